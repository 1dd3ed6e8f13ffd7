"""Waiting for pods to become Ready before a gate, with the rollout's progress deadline.

The candidate and the twin of the stable revision wait the same way: until their pods are
Ready, or until ``rollout.progressDeadlineSeconds`` has passed since they started, when the
gate is recorded as an Error (decided by the deadline) with the pods' cause, and a Warning
Event says which side got stuck. One function keeps the two from drifting apart.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.status import GateRecord
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.status import Outcome


def until_ready(
    state: Pass,
    *,
    side: Literal["candidate", "twin"],
    candidate: str,
    stable: str | None,
    ready: int,
    wanted: int,
    started_at: datetime | None,
    cause: str | None,
    deadline_seconds: int,
) -> Outcome:
    """Keep waiting (requeue at the deadline), or record the stuck gate as an Error."""
    deadline = state.scaled(deadline_seconds)
    elapsed = state.elapsed(started_at)
    if side == "candidate":
        who = f"candidate revision {candidate}"
    else:
        who = f"twin of stable revision {stable}"
    if elapsed < deadline:
        state.after(deadline - elapsed)
        text = f"waiting for {'the ' if side == 'twin' else ''}{who}: {ready}/{wanted} Ready"
        starting = (
            ConditionReason.CandidateStarting
            if side == "candidate"
            else ConditionReason.TwinStarting
        )
        return Outcome("Progressing", text + (f" ({cause})" if cause else ""), starting)
    subject = "" if side == "candidate" else f"{who} "
    reasons = [f"{subject}not Ready within {deadline_seconds} s ({ready}/{wanted} Ready)"]
    if cause:
        reasons.append(cause)
    if side == "twin":
        reasons.append(
            "gate.baseline.mode: auto uses the stored baseline when the twin is not scheduled "
            "in time; stored never starts a twin (no extra GPUs)"
        )
    state.decide(
        GateRecord(
            revision=candidate,
            outcome="Error",
            reasons=reasons,
            baseline_revision=stable,
            decided_by="deadline",
            baseline_mode="twin" if side == "twin" else None,
        ),
        EventReason.CandidateStuck if side == "candidate" else EventReason.TwinStuck,
    )
    return Outcome("Progressing", f"{side} stuck", ConditionReason.ProgressDeadlineExceeded)
