"""Passes that stop and touch nothing: an invalid spec, a child name held by someone else, a
resource the planner could not handle.

All three leave every object as it is, so the stable revision keeps serving; the status says
why (Degraded while the stable revision still has Ready pods, else Failed) and keeps stable,
candidate and history as they were (``stopped_status``).

A child name held by an object this resource does not own (issue 10): before, a 409
AlreadyExists on create meant "already as planned", whoever owned the object: a foreign
Service at the serving name made the resource loop in Promoting with dozens of false
"Promoted" Events a second, and another resource's Service at the candidate name was
benchmarked in place of the candidate. Now the shell looks up who holds each name a plan
would create (``Observed.foreign``); if anything is held by someone else the pass does
nothing but report it (``name_conflict``): ``Stalled=True`` with reason ``NameConflict``
naming the object and its holder, one Warning Event when that report changes, and no
requeue (the periodic resync looks again).

A resource the planner could not handle: ``parse_vllm_deployment`` refuses what it knows to
be unmanageable (too deep, numbers out of range, unknown fields), and the planner reports
that as ``InvalidSpec`` (``invalid_spec``). Anything it does not foresee (a value the API
accepted that makes rendering or hashing raise) would otherwise escape the reconcile as an
exception: the resource kept an empty status, no Event said why, and the work queue retried
it forever. ``unhandled`` turns such an exception into the same ``InvalidSpec`` status and
one Warning Event per generation, with no action and no requeue: the next spec change (or
the periodic resync) tries again.
"""

from __future__ import annotations

from datetime import datetime

from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.status import ConditionStatus, VLLMDeploymentStatus
from vllm_operator.errors import SpecError, SpecErrors
from vllm_operator.render import names
from vllm_operator.rollout import baseline
from vllm_operator.rollout.actions import Plan
from vllm_operator.rollout.context import Pass, Settings
from vllm_operator.rollout.observed import Observed
from vllm_operator.rollout.status import Outcome, gate_condition, verdict_annotation

MESSAGE_LIMIT = 300
FIX = (
    "simplify the spec until `vllm-operator render -f <file>` accepts it; "
    "the stable revision keeps serving meanwhile"
)


def serving_ok(state: Pass, stable: str | None) -> bool:
    if stable is None:
        return False
    dep = state.observed.deployment_of(stable)
    return dep is not None and dep.ready_replicas > 0


def invalid_spec(state: Pass, errors: SpecErrors, stable: str | None) -> VLLMDeploymentStatus:
    """Report an invalid spec and touch nothing: the stable revision keeps serving."""
    lines = [str(e) for e in errors.errors]
    message = "invalid spec: " + "; ".join(lines)
    return _refused(state, stable, message, EventReason.InvalidSpec, ConditionReason.InvalidSpec)


def _refused(
    state: Pass,
    stable: str | None,
    message: str,
    event: EventReason,
    reason: ConditionReason,
) -> VLLMDeploymentStatus:
    """A spec the operator will not act on: a Warning Event once per generation, status
    saying why, and nothing touched (the stable revision keeps serving)."""
    if state.previous.observed_generation != state.observed.generation:
        state.event("Warning", event, message)
    return stopped_status(state, stable, message, reason, warnings=[], gate=("Unknown", reason))


MULTINODE_FIX = (
    "install LeaderWorkerSet (kubernetes-sigs/lws, v0.10.0 or later) and run the operator "
    "with --multi-node (chart: multiNode.enabled=true), or set spec.resources.nodes: 1 for a "
    "model that fits one node (docs/multi-node.md)"
)


def multinode_unavailable(state: Pass, nodes: int, stable: str | None) -> VLLMDeploymentStatus:
    """A multi-node spec where this operator runs no LeaderWorkerSets: create nothing (no
    half-made group), keep the stable revision serving, and name the fix."""
    message = (
        f"spec.resources.nodes is {nodes}: a multi-node revision runs as a LeaderWorkerSet, "
        f"which this operator is not set up for; {MULTINODE_FIX}"
    )
    return _refused(
        state,
        stable,
        message,
        EventReason.MultiNodeUnavailable,
        ConditionReason.MultiNodeUnavailable,
    )


# The LeaderWorkerSet release the operator is tested against (its CRD is vendored in
# tests/unit/render/crds/ and played by the embedded cluster).
LWS_RELEASE = "v0.10.0"
LWS_INSTALL = (
    "kubectl apply --server-side -f https://github.com/kubernetes-sigs/lws/releases/download/"
    f"{LWS_RELEASE}/manifests.yaml"
)
# How soon a resource refused for a missing LeaderWorkerSet CRD is looked at again, so its
# revision rolls out soon after the CRD is installed (the periodic resync is slower).
GROUPS_RECHECK_SECONDS = 30.0


def groups_not_served(state: Pass, nodes: int, stable: str | None) -> VLLMDeploymentStatus:
    """A multi-node spec under ``--multi-node`` on a cluster that serves no LeaderWorkerSet
    (its CRD is not installed): the same refusal, checked before anything of the revision is
    created (no candidate Service left behind), looked at again every
    ``GROUPS_RECHECK_SECONDS`` so the revision rolls out once LeaderWorkerSet is there."""
    message = (
        f"spec.resources.nodes is {nodes}: a multi-node revision runs as a LeaderWorkerSet, and "
        "this cluster does not serve leaderworkersets.leaderworkerset.x-k8s.io/v1 (the "
        f"LeaderWorkerSet CRD is not installed); install LeaderWorkerSet {LWS_RELEASE} "
        f"({LWS_INSTALL}): the revision rolls out once it is served, or set "
        "spec.resources.nodes: 1 for a model that fits one node (docs/multi-node.md)"
    )
    state.requeue.append(GROUPS_RECHECK_SECONDS)
    return _refused(
        state,
        stable,
        message,
        EventReason.MultiNodeUnavailable,
        ConditionReason.MultiNodeUnavailable,
    )


def conflict_message(foreign: dict[tuple[str, str], str]) -> str:
    """Who holds which child name, and what a person can do about it."""
    holders = "; ".join(
        f"{kind} {name} is held by {who}" for (kind, name), who in sorted(foreign.items())
    )
    return (
        f"{holders}: the operator will not use or change an object it does not own; delete or "
        "rename that object, or rename this VLLMDeployment"
    )


def name_conflict(
    state: Pass, stable: str | None, desired: str, gate_enabled: bool
) -> VLLMDeploymentStatus:
    """The status of a pass blocked by foreign objects; no actions, one Event per change."""
    observed = state.observed
    text = conflict_message(dict(observed.foreign))
    before = next((c for c in state.previous.conditions if c.type == "Stalled"), None)
    if before is None or before.reason != ConditionReason.NameConflict or before.message != text:
        state.event("Warning", EventReason.NameConflict, text)
    gate = gate_condition(state.decision(desired), gate_enabled)
    return stopped_status(
        state,
        stable,
        text,
        ConditionReason.NameConflict,
        warnings=list(state.previous.warnings),
        gate=gate,
    )


def unhandled(
    observed: Observed, now: datetime, error: BaseException, settings: Settings | None = None
) -> Plan:
    """An ``InvalidSpec`` status (and Event) for ``error``, raised while planning."""
    state = Pass.begin(observed, now, settings)
    serving = observed.service(names.serving_service_name(observed.name))
    stable = serving.revision if serving is not None else None
    detail = f"{type(error).__name__}: {error}"
    if len(detail) > MESSAGE_LIMIT:
        detail = detail[:MESSAGE_LIMIT] + "..."
    problem = SpecError("spec", f"the operator cannot handle this resource ({detail})", FIX)
    status = invalid_spec(state, SpecErrors([problem]), stable)
    return Plan(
        status=status,
        events=tuple(state.events),
        annotations=verdict_annotation(status, observed.annotations),
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
    outcome = Outcome("Degraded" if serving_ok(state, stable) else "Failed", message, reason)
    return state.status(
        outcome,
        stable=stable,
        stable_benchmark=baseline.stored_summary(state, stable),
        candidate=state.previous.candidate,
        warnings=warnings,
        gate=(*gate, ""),
    )
