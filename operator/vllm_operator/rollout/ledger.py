"""The decisions already taken: verdict history and the requests people made.

A restarted operator must know, from the cluster alone, whether a revision was judged
(history in status) and which of a person's requests it already carried out (the operator's
own ``vllm-operator.dev/handled`` annotation). The *decision* on a revision is its newest
verdict, unless a later gate re-run superseded it: a re-run does not erase history, it only
marks the moment from which older verdicts on that revision no longer count.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from vllm_operator.api.resource import MAX_ATTEMPT_DIGITS
from vllm_operator.api.status import HISTORY_BYTES, HISTORY_FULL, HISTORY_LIMIT, GateRecord
from vllm_operator.render import labels

REJECTIONS = ("Failed", "Error")


def timestamp(when: datetime) -> str:
    """RFC 3339 in UTC with microseconds: sortable as text and precise enough to order."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def second_timestamp(when: datetime) -> str:
    """RFC 3339 in UTC to the second, as Kubernetes writes them (conditions, Events)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Rerun:
    """A handled gate re-run: verdicts on ``revision`` older than ``at`` no longer count."""

    token: str
    revision: str
    at: str
    min_attempt: int


@dataclass(frozen=True)
class Handled:
    """The requests (annotation values) already carried out."""

    promote: str | None = None
    abort: str | None = None
    rerun: Rerun | None = None

    def to_annotation(self) -> str:
        doc: dict[str, object] = {}
        if self.promote is not None:
            doc["promote"] = self.promote
        if self.abort is not None:
            doc["abort"] = self.abort
        if self.rerun is not None:
            doc["rerun"] = {
                "token": self.rerun.token,
                "revision": self.rerun.revision,
                "at": self.rerun.at,
                "minAttempt": self.rerun.min_attempt,
            }
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))


MAX_ATTEMPT = 10**MAX_ATTEMPT_DIGITS - 1
"""The highest gate attempt a Job name has room for (api/resource.py)."""
_MAX_VALUE = 253
"""Longest request value kept (a revision or a token; a DNS name at most)."""


def parse_handled(annotations: Mapping[str, str]) -> Handled:
    """The handled requests; a missing or damaged annotation means none were handled."""
    return check_handled(annotations)[0]


def check_handled(annotations: Mapping[str, str]) -> tuple[Handled, list[str]]:
    """The handled requests, and what was wrong with the annotation (ignored, as absent).

    The annotation is the operator's, but anyone who may edit the resource may edit it: a
    ``minAttempt`` of 1000 would name a Job past 63 characters, a ``rerun.at`` that is not
    a time would void or keep verdicts at random. Each bad part is treated as absent.
    """
    text = annotations.get(labels.HANDLED_ANNOTATION)
    if not text:
        return Handled(), []
    try:
        doc = json.loads(text) if len(text) <= 4096 else None
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        return Handled(), ["not a JSON object of at most 4096 characters"]
    problems: list[str] = []

    def request(key: str) -> str | None:
        value = doc.get(key)
        if value is None or (isinstance(value, str) and 0 < len(value) <= _MAX_VALUE):
            return value
        problems.append(f"{key} is not a string of 1 to {_MAX_VALUE} characters")
        return None

    promote, abort = request("promote"), request("abort")
    rerun = None
    raw = doc.get("rerun")
    if raw is not None:
        rerun = _rerun(raw)
        if rerun is None:
            problems.append(
                "rerun needs token and revision (strings), at (an RFC 3339 time) and "
                f"minAttempt (1 to {MAX_ATTEMPT})"
            )
    return Handled(promote=promote, abort=abort, rerun=rerun), problems


def _rerun(raw: object) -> Rerun | None:
    if not isinstance(raw, dict):
        return None
    token, revision, at = raw.get("token"), raw.get("revision"), raw.get("at")
    attempt = raw.get("minAttempt", 1)
    if not all(isinstance(v, str) and 0 < len(v) <= _MAX_VALUE for v in (token, revision, at)):
        return None
    if not isinstance(attempt, int) or isinstance(attempt, bool) or not 1 <= attempt <= MAX_ATTEMPT:
        return None
    try:
        when = datetime.fromisoformat(str(at))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return Rerun(token=str(token), revision=str(revision), at=str(at), min_attempt=attempt)


@dataclass(frozen=True)
class Requests:
    """Annotation values a person set on the resource (None when absent)."""

    promote: str | None = None
    abort: str | None = None
    rerun: str | None = None


def parse_requests(annotations: Mapping[str, str]) -> Requests:
    def value(key: str) -> str | None:
        text = annotations.get(key)
        return text.strip() if isinstance(text, str) and text.strip() else None

    return Requests(
        promote=value(labels.PROMOTE_ANNOTATION),
        abort=value(labels.ABORT_ANNOTATION),
        rerun=value(labels.RERUN_ANNOTATION),
    )


def decision(
    history: Sequence[GateRecord], revision: str, rerun: Rerun | None
) -> GateRecord | None:
    """The verdict that currently decides ``revision``, or None when it still awaits one."""
    cutoff = rerun.at if rerun is not None and rerun.revision == revision else None
    for record in history:  # newest first
        if record.revision != revision:
            continue
        if cutoff is not None and (record.finished_at or "") < cutoff:
            return None
        return record
    return None


def is_rejection(record: GateRecord, on_inconclusive: str) -> bool:
    """Whether ``record`` removes the candidate (Failed, Error, or Inconclusive with reject)."""
    if record.outcome in REJECTIONS:
        return True
    return record.outcome == "Inconclusive" and on_inconclusive == "reject"


def inconclusive_streak(history: Sequence[GateRecord], revision: str, rerun: Rerun | None) -> int:
    """How many gate verdicts on ``revision`` in a row, newest first, were Inconclusive
    (since a person's re-run request, which starts the count again)."""
    cutoff = rerun.at if rerun is not None and rerun.revision == revision else None
    count = 0
    for entry in history:  # newest first
        if entry.revision != revision:
            continue
        if cutoff is not None and (entry.finished_at or "") < cutoff:
            break
        if entry.outcome != "Inconclusive" or entry.decided_by != "gate":
            break
        count += 1
    return count


def verdicts_on(history: Iterable[GateRecord], revision: str) -> int:
    return sum(1 for r in history if r.revision == revision)


def record(history: Sequence[GateRecord], entry: GateRecord) -> list[GateRecord]:
    """``entry`` prepended to ``history``, trimmed to the limit; kept in full for the rest
    of the pass (the status's ``lastGate``), made one line when status is written
    (``bounded``)."""
    return [entry, *history][:HISTORY_LIMIT]


LINE_CHARS = 200
"""Longest verdict line a history entry keeps."""


def one_line(entry: GateRecord, limit: int = LINE_CHARS, *, figures: bool = False) -> GateRecord:
    """``entry`` as the history keeps it: the verdict in one line (its headline, else its
    first reason and how many more), without placements or baseline (``lastGate`` has the
    newest verdict in full), with its figures only when ``figures``.

    What decides a rollout stays (revision, outcome, decidedBy, attempt, finishedAt): a
    rejected revision must stay rejected after the rest is gone.
    """
    reasons = list(entry.reasons)
    line = entry.headline or (reasons[0] if reasons else "")
    if len(line) > limit:
        line = line[: limit - 3] + "..."
    if not entry.headline and len(reasons) > 1:
        line += f" (+{len(reasons) - 1} more)"
    return entry.model_copy(
        update={
            "reasons": [line] if line else [],
            "deciding": None,
            "headline": None,
            "summary": entry.summary if figures else None,
            "candidate_placement": None,
            "baseline_placement": None,
            "baseline_reason": None,
            "baseline_mode": None,
            "baseline_revision": None,
        }
    )


def _size(history: Sequence[GateRecord]) -> int:
    return len(json.dumps([e.to_wire() for e in history], separators=(",", ":")))


def bounded(history: Sequence[GateRecord]) -> list[GateRecord]:
    """The history status keeps: the newest ``HISTORY_LIMIT`` verdicts, one line each, the
    newest ``HISTORY_FULL`` with their figures, and at most ``HISTORY_BYTES`` of JSON
    (figures dropped oldest first, then lines shortened)."""
    kept = list(history[:HISTORY_LIMIT])
    out = [one_line(e, figures=i < HISTORY_FULL) for i, e in enumerate(kept)]
    for i in reversed(range(len(out))):
        if _size(out) <= HISTORY_BYTES:
            return out
        out[i] = one_line(out[i])
    limit = LINE_CHARS
    while _size(out) > HISTORY_BYTES and limit > 20:
        limit //= 2
        out = [one_line(e, limit) for e in out]
    return out
