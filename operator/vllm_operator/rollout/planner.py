"""The rollout planner: observed cluster state and the time -> the next actions and status.

Level-triggered and restart-safe by construction: every decision is derived from the
cluster (the serving Service's selector says which revision is stable, the verdict history
in status says which revisions were judged, the ``handled`` annotation says which requests
were carried out), never from memory of a previous pass. Planning the same state twice
gives the same plan, and applying a plan twice is harmless (create-if-absent, delete-if-
present), so an operator stopped at any point continues without creating anything twice.

One pass, for a valid spec whose revision D differs from the stable revision S:
  D undecided -> candidate Deployment + Service -> Ready -> benchmark Job -> verdict
  D Passed    -> scale D to ``replicas`` (under autoscaling: S's current count) -> enough
                 Ready -> serving Service selects D, the autoscaler targets D (same plan)
  D rejected  -> delete D's Deployment and Job; S keeps serving, untouched
and when D == S, keep S at ``replicas`` (under autoscaling: leave the count to the
autoscaler) and retire everything else. The serving revision, and only it, has a
PodDisruptionBudget (``scaling.follow``). A child name held by an
object this resource does not own (``Observed.foreign``) stops the pass: Stalled, no action.

D is the revision this operator renders the spec into, except when S was rendered from the
same spec by an earlier operator (same spec digest, another template): then D = S, nothing
rolls, and OperatorUpdatePending says so until a person asks for it (``upgrade.py``).
"""

from __future__ import annotations

from datetime import datetime

from vllm_operator.api.reasons import EventReason
from vllm_operator.api.resource import VLLMDeployment, parse_vllm_deployment
from vllm_operator.api.status import VLLMDeploymentStatus
from vllm_operator.api.summary import BenchSummary
from vllm_operator.api.text import clip
from vllm_operator.engine.extra_args import unknown_version_note
from vllm_operator.engine.policy import LaunchPlan, plan_launch
from vllm_operator.errors import SpecErrors
from vllm_operator.render import labels, names
from vllm_operator.render.revision import revision_hash, spec_digest
from vllm_operator.render.validate import object_errors
from vllm_operator.rollout import (
    baseline,
    calibration,
    figures,
    references,
    scaling,
    steps,
    stopped,
    twin,
    upgrade,
)
from vllm_operator.rollout.actions import Plan
from vllm_operator.rollout.canary import phase as canary
from vllm_operator.rollout.context import Pass, Settings
from vllm_operator.rollout.gate_plan import plan_power_notes, plan_warnings
from vllm_operator.rollout.observed import Observed
from vllm_operator.rollout.status import (
    Outcome,
    gate_condition,
    summarise,
    verdict_annotation,
)


def _spec_problems(
    observed: Observed, settings: Settings
) -> tuple[VLLMDeployment, LaunchPlan] | SpecErrors:
    try:
        vd = parse_vllm_deployment(dict(observed.body))
        # Names, quantities and tolerations too: render_deployment would refuse them in the
        # middle of a pass, and they would reach the catch-all instead of naming the field.
        name_errors = object_errors(vd)
        launch = plan_launch(vd.spec)
    except SpecErrors as exc:
        return exc
    name_errors += references.secret_problems(vd, settings.allowed_secrets)
    name_errors += scaling.engine_problems(vd, settings)
    if name_errors:
        return SpecErrors(name_errors)
    return vd, launch


def plan(observed: Observed, now: datetime, settings: Settings | None = None) -> Plan:
    """The next step for one VLLMDeployment. Pure: same inputs, same plan."""
    state = Pass.begin(observed, now, settings)
    previous = state.previous
    meta = observed.body.get("metadata") or {}
    if isinstance(meta, dict) and meta.get("deletionTimestamp"):
        # Being deleted: ownerReferences take the children with it; touch nothing.
        return Plan(status=previous)
    serving = observed.service(names.serving_service_name(observed.name))
    stable = serving.revision if serving is not None else None
    parsed = _spec_problems(observed, state.settings)
    if isinstance(parsed, SpecErrors):
        status = stopped.invalid_spec(state, parsed, stable)
        return _finish(state, status)
    vd, launch = parsed
    if launch.group is not None and not state.settings.multi_node:
        return _finish(state, stopped.multinode_unavailable(state, launch.group.nodes, stable))
    if launch.group is not None and not observed.groups_served:
        # --multi-node, but the LeaderWorkerSet CRD is not installed: nothing of the
        # revision is created (no candidate Service whose set would then fail).
        return _finish(state, stopped.groups_not_served(state, launch.group.nodes, stable))
    rendered = revision_hash(vd.spec, launch)
    digest = spec_digest(vd.spec)
    # An unchanged spec rendered differently by this operator keeps its stable revision
    # until a person asks to roll it (rollout/upgrade.py).
    update = upgrade.detect(observed, stable, rendered, digest)
    desired = upgrade.target(update, rendered)
    if observed.foreign:
        # A child name is held by an object this resource does not own: touch nothing.
        status = stopped.name_conflict(state, stable, desired, vd.spec.gate.enabled)
        return _finish(state, status)
    if launch.warnings and previous.observed_generation != observed.generation:
        for warning in launch.warnings:
            older = launch.flags_from_older_release and warning == _flags_note(launch)
            state.event(
                "Warning",
                EventReason.FlagsCheckedAgainstOlderRelease if older else EventReason.EngineWarning,
                warning,
            )
    gate_plan = plan_warnings(vd.spec.gate)
    if gate_plan and previous.observed_generation != observed.generation:
        for warning in gate_plan:
            state.event("Warning", EventReason.GatePlanTooShort, warning)
    if update is not None:
        upgrade.announce(state, update)
    if desired == rendered:
        upgrade.record_digest(state, desired, digest)
    steps.handle_requests(state, desired, stable)
    state.serving = stable  # promotion moves it to the candidate when the Service switches
    if desired == stable:
        outcome, candidate = steps.steady(state, vd, launch, desired), None
    else:
        outcome, candidate = steps.rollout(state, vd, launch, desired, stable)
    canary.settle(state, vd, stable)
    calibration.step(state, vd, stable, desired)
    keep = {r for r in (stable, candidate) if r is not None} | canary.draining(state, vd)
    steps.retire(state, keep=keep)
    twin.remove(state)
    scaling.follow(state, vd)
    status = _status(
        state,
        vd,
        launch=launch,
        outcome=outcome,
        desired=desired,
        stable=stable,
        candidate=candidate,
        operator_update=update,
        gate_plan=gate_plan,
    )
    return _finish(state, status)


def _status(
    state: Pass,
    vd: VLLMDeployment,
    *,
    launch: LaunchPlan,
    outcome: Outcome,
    desired: str,
    stable: str | None,
    candidate: str | None,
    operator_update: upgrade.OperatorUpdate | None = None,
    gate_plan: list[str] | None = None,
) -> VLLMDeploymentStatus:
    fallback = launch.record()
    candidate_summary = None
    stable_figures = baseline.stored_summary(state, stable) if stable is not None else None
    if stable is not None:
        _store_figures(state, stable, stable_figures)
    if candidate is not None:
        decided = state.decision(candidate)
        measured = baseline.figures_of(state, decided) if decided is not None else None
        if decided is not None and decided.outcome == "Passed":
            _store_figures(state, candidate, measured)
        candidate_summary = summarise(
            state.observed.deployment_of(candidate),
            candidate,
            fallback=fallback if candidate == desired else None,
            benchmark=measured,
            previous=state.previous.candidate,
            now=state.now,
        )
    decided = state.decision(desired)
    gate_status, gate_reason = gate_condition(decided, vd.spec.gate.enabled)
    gate_message = ""
    if decided is not None:
        gate_message = f"revision {desired}: {decided.outcome}"
        if decided.reasons:
            gate_message = clip(gate_message + " - " + decided.line())
    status = state.status(
        outcome,
        stable=stable,
        stable_benchmark=stable_figures,
        fallback=fallback if stable == desired else None,
        candidate=candidate_summary,
        warnings=launch.warnings,
        gate=(gate_status, gate_reason, gate_message),
        flags_note=_flags_note(launch) if launch.flags_from_older_release else "",
        operator_update=operator_update.condition() if operator_update is not None else None,
        gate_plan_note="; ".join(gate_plan or []),
        gate_plan_power="; ".join(plan_power_notes(vd.spec.gate)),
    )
    if state.canary_status is not None:
        status = status.model_copy(update={"canary": state.canary_status})
    return status


def _store_figures(state: Pass, revision: str, summary: BenchSummary | None) -> None:
    """Put a Passed revision's figures on its Deployment (status then keeps their digest)."""
    patch = figures.store(state.observed, revision, summary)
    if patch is not None:
        state.actions.append(patch)


def _flags_note(launch: LaunchPlan) -> str:
    assert launch.flags_checked_against is not None
    return unknown_version_note(launch.version, launch.flags_checked_against)


def _finish(state: Pass, status: VLLMDeploymentStatus) -> Plan:
    annotations = verdict_annotation(status, state.observed.annotations)
    if state.handled_changed:
        annotations[labels.HANDLED_ANNOTATION] = state.handled.to_annotation()
    requeue = min(state.requeue) if state.requeue else None
    if state.calibration is not None:  # carried through every pass, a stopped one too
        status = status.model_copy(update={"calibration": state.calibration})
    return Plan(
        status=status,
        actions=tuple(state.actions),
        events=tuple(state.events),
        annotations=annotations,
        requeue_after=requeue,
        verdicts=tuple(state.verdicts),
    )
