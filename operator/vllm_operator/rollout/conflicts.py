"""A child name held by an object this resource does not own: stop, say who, touch nothing.

Before, a 409 AlreadyExists on create meant "already as planned", whoever owned the object:
a foreign Service at the serving name made the resource loop in Promoting with dozens of
false "Promoted" Events a second, and another resource's Service at the candidate name was
benchmarked in place of the candidate (issue 10). Now the shell looks up who holds each name
a plan would create (``Observed.foreign``); if anything is held by someone else the pass
does nothing but report it: ``Stalled=True`` with reason ``NameConflict`` naming the object
and its holder, one Warning Event when that report changes, and no requeue (the periodic
resync looks again). Nothing else moves, so the stable revision keeps serving.
"""

from __future__ import annotations

from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.status import VLLMDeploymentStatus
from vllm_operator.rollout import held
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.status import gate_condition


def message(foreign: dict[tuple[str, str], str]) -> str:
    held = "; ".join(
        f"{kind} {name} is held by {who}" for (kind, name), who in sorted(foreign.items())
    )
    return (
        f"{held}: the operator will not use or change an object it does not own; delete or "
        "rename that object, or rename this VLLMDeployment"
    )


def name_conflict(
    state: Pass, stable: str | None, desired: str, gate_enabled: bool
) -> VLLMDeploymentStatus:
    """The status of a pass blocked by foreign objects; no actions, one Event per change."""
    observed = state.observed
    text = message(dict(observed.foreign))
    before = next((c for c in state.previous.conditions if c.type == "Stalled"), None)
    if before is None or before.reason != ConditionReason.NameConflict or before.message != text:
        state.event("Warning", EventReason.NameConflict, text)
    gate = gate_condition(state.decision(desired), gate_enabled)
    return held.stopped_status(
        state,
        stable,
        text,
        ConditionReason.NameConflict,
        warnings=list(state.previous.warnings),
        gate=gate,
    )
