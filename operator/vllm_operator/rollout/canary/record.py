"""The canary's record in the cluster: which step, since when, and what the pods had counted.

Restart safety is the rule of this operator: everything a pass needs lives in the cluster.
A canary step needs what a restarted operator cannot recompute: the step it is at, when it
was entered and started (so it is judged, and its deadline kept, on time, not again from the
restart), what every pod had counted at the last read and what it counted in the step so far
(the step's counts are accumulated read by read, so a counter reset loses nothing). They live in one
annotation on the candidate's Deployment, written by the pass that takes each decision; the
Deployment goes when the candidate goes, and with it the record. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from vllm_operator.rollout.canary.metrics import PodCounts, ScrapeError

MAX_RECORD_BYTES = 200_000
"""An annotation value may be large but all of a Deployment's annotations share 256 kB; the
counts of one pod take ~1.5 kB and the record holds two per pod (its latest read and the
step's counts), so this holds a step of ~60 pods."""


@dataclass(frozen=True)
class CanaryRecord:
    """One candidate's canary, as its Deployment's annotation says."""

    step: int = 0
    """Index into ``rollout.canary.steps`` of the step under way."""
    started_at: str | None = None
    """When the step's share was in place and its start counts were read (RFC 3339)."""
    due_at: str | None = None
    """When the step is judged (start + holdSeconds, pushed back by each extension)."""
    extensions: int = 0
    last: Mapping[str, PodCounts] = field(default_factory=dict)
    """Pod name -> its counts at its latest read."""
    counts: Mapping[str, PodCounts] = field(default_factory=dict)
    """Pod name -> what it counted in the step so far (``metrics.accumulate``)."""
    passed: bool = False
    """Every step passed: promotion as without a canary."""
    entered_at: str | None = None
    """When the step was entered (its pods asked for): the progress deadline counts from it."""
    progress_at: str | None = None
    """The latest read of every pod of the step: the progress deadline counts from it too."""
    next_read_at: str | None = None
    """When the pods are read again (every analysis.intervalSeconds inside the step)."""

    def next_step(self) -> CanaryRecord:
        return CanaryRecord(step=self.step + 1)

    def extended(self, due_at: str) -> CanaryRecord:
        return replace(self, due_at=due_at, extensions=self.extensions + 1)

    def to_annotation(self) -> str:
        body: dict[str, Any] = {"step": self.step}
        if self.passed:
            body["passed"] = True
        if self.started_at is not None:
            body["startedAt"] = self.started_at
        if self.due_at is not None:
            body["dueAt"] = self.due_at
        if self.extensions:
            body["extensions"] = self.extensions
        for key, value in (
            ("enteredAt", self.entered_at),
            ("progressAt", self.progress_at),
            ("nextReadAt", self.next_read_at),
        ):
            if value is not None:
                body[key] = value
        if self.last:
            body["last"] = {pod: c.to_json() for pod, c in sorted(self.last.items())}
        if self.counts:
            body["counts"] = {pod: c.to_json() for pod, c in sorted(self.counts.items())}
        return json.dumps(body, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_annotation(cls, text: str | None) -> CanaryRecord | None:
        """The record, or None when there is none; a damaged one restarts the step (its
        counts cannot be trusted) rather than failing the pass."""
        if not text:
            return None
        if len(text) > MAX_RECORD_BYTES:
            return CanaryRecord()
        raw: object = None
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict):
                return CanaryRecord()
            step = raw.get("step", 0)
            last_raw, counts_raw = raw.get("last") or {}, raw.get("counts") or {}
            if not isinstance(step, int) or step < 0:
                return CanaryRecord()
            if not isinstance(last_raw, dict) or not isinstance(counts_raw, dict):
                return CanaryRecord(step=step)
            return cls(
                step=step,
                started_at=_text(raw.get("startedAt")),
                due_at=_text(raw.get("dueAt")),
                extensions=max(int(raw.get("extensions", 0)), 0),
                last={str(p): PodCounts.from_json(c) for p, c in last_raw.items()},
                counts={str(p): PodCounts.from_json(c) for p, c in counts_raw.items()},
                passed=raw.get("passed") is True,
                entered_at=_text(raw.get("enteredAt")),
                progress_at=_text(raw.get("progressAt")),
                next_read_at=_text(raw.get("nextReadAt")),
            )
        except (ValueError, TypeError, ScrapeError):
            return CanaryRecord(step=raw["step"] if isinstance(raw, dict) and _step_ok(raw) else 0)


def _step_ok(raw: object) -> bool:
    return isinstance(raw, dict) and isinstance(raw.get("step"), int) and raw["step"] >= 0


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
