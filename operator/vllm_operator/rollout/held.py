"""Passes that stop and touch nothing: an invalid spec, a child name held by someone else.

Both leave every object as it is, so the stable revision keeps serving; the status says why
(Degraded while the stable revision still has Ready pods, else Failed) and keeps stable,
candidate and history as they were.
"""

from __future__ import annotations

from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.status import ConditionStatus, VLLMDeploymentStatus
from vllm_operator.errors import SpecErrors
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.status import Outcome, build_status, summarise


def serving_ok(state: Pass, stable: str | None) -> bool:
    if stable is None:
        return False
    dep = state.observed.deployment_of(stable)
    return dep is not None and dep.ready_replicas > 0


def invalid_spec(state: Pass, errors: SpecErrors, stable: str | None) -> VLLMDeploymentStatus:
    """Report an invalid spec and touch nothing: the stable revision keeps serving."""
    observed = state.observed
    lines = [str(e) for e in errors.errors]
    message = "invalid spec: " + "; ".join(lines)
    if state.previous.observed_generation != observed.generation:
        state.event("Warning", EventReason.InvalidSpec, message)
    return stopped_status(
        state,
        stable,
        message,
        ConditionReason.InvalidSpec,
        warnings=[],
        gate=("Unknown", ConditionReason.InvalidSpec),
    )


def stopped_status(
    state: Pass,
    stable: str | None,
    message: str,
    reason: ConditionReason,
    *,
    warnings: list[str],
    gate: tuple[ConditionStatus, ConditionReason],
) -> VLLMDeploymentStatus:
    """The status of a pass that stops and touches nothing: Degraded while the stable
    revision still serves (it keeps serving, untouched), else Failed; stable, candidate and
    history as they were."""
    observed = state.observed
    serving = serving_ok(state, stable)
    outcome = Outcome("Degraded" if serving else "Failed", message, reason)
    stable_summary = None
    if stable is not None:
        prev = state.previous.stable
        stable_summary = summarise(
            observed.deployment_of(stable),
            stable,
            benchmark=prev.benchmark if prev is not None and prev.revision == stable else None,
            previous=prev,
            now=state.now,
        )
    return build_status(
        state.previous,
        outcome,
        generation=observed.generation,
        now=state.now,
        stable=stable_summary,
        candidate=state.previous.candidate,
        history=state.history,
        warnings=warnings,
        gate=(*gate, ""),
    )
