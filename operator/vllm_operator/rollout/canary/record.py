"""The canary's record in the cluster: which step, since when, and what the pods had counted.

Restart safety is the rule of this operator: everything a pass needs lives in the cluster.
A canary step needs three things a restarted operator cannot recompute: the step it is at,
when it started (so it is judged on time, not held again from the restart) and the counts
every pod had when it started (the step's deltas are measured from them). They live in one
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
counts of one pod take ~1.5 kB, so this holds the start of a step of ~120 pods."""


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
    start: Mapping[str, PodCounts] = field(default_factory=dict)
    """Pod name -> its counts at the step's start."""
    passed: bool = False
    """Every step passed: promotion as without a canary."""

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
        if self.start:
            body["start"] = {pod: c.to_json() for pod, c in sorted(self.start.items())}
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
            start_raw = raw.get("start") or {}
            if not isinstance(step, int) or step < 0 or not isinstance(start_raw, dict):
                return CanaryRecord()
            return cls(
                step=step,
                started_at=_text(raw.get("startedAt")),
                due_at=_text(raw.get("dueAt")),
                extensions=max(int(raw.get("extensions", 0)), 0),
                start={str(p): PodCounts.from_json(c) for p, c in start_raw.items()},
                passed=raw.get("passed") is True,
            )
        except (ValueError, TypeError, ScrapeError):
            return CanaryRecord(step=raw["step"] if isinstance(raw, dict) and _step_ok(raw) else 0)


def _step_ok(raw: object) -> bool:
    return isinstance(raw, dict) and isinstance(raw.get("step"), int) and raw["step"] >= 0


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
