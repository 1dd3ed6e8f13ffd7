"""The steps of one planning pass: requests, gating, promotion, rejection, retirement.

The benchmark Job a gate runs (start, wait, judge and record) is ``rollout.benchmark``. Each
step reads the observed state, appends actions and events to the ``Pass`` and returns
where the rollout stands. Order inside a pass matters only for verdicts: a verdict is
recorded (status is written first by the shell) before the objects it condemns are deleted.
"""

from __future__ import annotations

from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.status import GateRecord
from vllm_operator.api.text import LINE_CHARS, clip
from vllm_operator.engine.policy import LaunchPlan
from vllm_operator.render import labels, names
from vllm_operator.render.services import render_candidate_service, render_serving_service
from vllm_operator.rollout import (
    advice,
    baseline,
    benchmark,
    causes,
    reruns,
    scaling,
    twin,
    waiting,
)
from vllm_operator.rollout.actions import Delete, Patch
from vllm_operator.rollout.canary import phase as canary
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.objects import create_deployment, ensure_service, patch_deployment
from vllm_operator.rollout.overrides import handle_requests
from vllm_operator.rollout.status import Outcome
from vllm_operator.rollout.stopped import serving_ok
from vllm_operator.rollout.views import parse_time


def steady(state: Pass, vd: VLLMDeployment, launch: LaunchPlan, revision: str) -> Outcome:
    """The spec's revision serves: keep it at ``replicas`` and its Service as specified.

    Under autoscaling the count is the autoscaler's: the operator never writes it back.
    """
    dep = state.observed.deployment_of(revision)
    ensure_service(state, render_serving_service(vd, revision), revision)
    if dep is None or dep.deleting:
        if dep is None:
            replicas = scaling.serving_replicas(vd, None)
            create_deployment(state, vd, launch, revision, replicas, role=labels.ROLE_STABLE)
            state.event(
                "Warning", EventReason.StableRecreated, f"revision {revision} had no Deployment"
            )
        state.after(1.0)
        return Outcome(
            "Progressing", f"recreating revision {revision}", ConditionReason.StableMissing
        )
    replicas = scaling.serving_replicas(vd, dep.replicas)
    patch_deployment(state, dep, replicas, labels.ROLE_STABLE)
    if dep.ready_replicas >= replicas and dep.replicas == replicas:
        return Outcome(
            "Serving",
            f"revision {revision} serves ({dep.ready_replicas}/{replicas} Ready)",
            ConditionReason.Serving,
        )
    return Outcome(
        "Progressing",
        f"revision {revision}: {dep.ready_replicas}/{replicas} Ready",
        ConditionReason.Scaling,
    )


def rollout(
    state: Pass, vd: VLLMDeployment, launch: LaunchPlan, candidate: str, stable: str | None
) -> tuple[Outcome, str | None]:
    """The spec's revision is not the stable one, so it is the candidate: gate it, then
    promote or reject it."""
    outcome = None
    if reruns.gate_pending(state, vd, candidate):
        outcome = _start_candidate(state, vd, launch, candidate, stable)
    decided = state.decision(candidate)
    if decided is None or reruns.gate_pending(state, vd, candidate):
        assert outcome is not None
        return outcome, candidate
    state.twin = None  # decided: a twin kept earlier in this pass goes now
    live = canary.wanted(vd, decided, stable) if decided.outcome == "Passed" else None
    if live is not None:
        assert stable is not None
        during = canary.run(state, vd, live, candidate, stable)
        if during is not None:
            return during, candidate
        decided = state.decision(candidate) or decided  # the canary may have judged it
    if decided.outcome == "Passed":
        return _promote(state, vd, launch, candidate, stable, decided=decided), candidate
    policy = vd.spec.rollout.on_inconclusive
    if decided.outcome == "Inconclusive" and policy in ("hold", "rerun"):
        text = decided.line() or "inconclusive"
        if policy == "rerun":
            text += f"; still inconclusive after {vd.spec.rollout.max_reruns} rerun(s)"
        return Outcome(
            "Holding",
            advice.holding_message(vd, candidate, text),
            ConditionReason.GateInconclusive,
        ), candidate
    # A candidate that served live traffic stays until no new request can reach it.
    drain = not canary.may_remove(state, vd, candidate)
    return _reject(state, candidate, stable, decided, drain=drain), (candidate if drain else None)


def _start_candidate(
    state: Pass, vd: VLLMDeployment, launch: LaunchPlan, candidate: str, stable: str | None
) -> Outcome:
    """Start the candidate (its Deployment, Service and, with a twin baseline, the twin),
    wait until it is Ready, then benchmark it (or pass it at once when the gate is
    disabled)."""
    observed = state.observed
    wanted = vd.spec.rollout.candidate_replicas
    ensure_service(state, render_candidate_service(vd, candidate), candidate)
    job = benchmark.current_job(state, candidate)
    with_twin = baseline.keeps_twin(state, vd, candidate, stable, job)
    if with_twin:
        assert stable is not None
        twin.ensure(state, vd, candidate, stable)
    dep = observed.deployment_of(candidate)
    deadline = state.scaled(vd.spec.rollout.progress_deadline_seconds)
    if dep is None or dep.deleting:
        if dep is None:
            create_deployment(state, vd, launch, candidate, wanted, role=labels.ROLE_CANDIDATE)
            state.event(
                "Normal", EventReason.CandidateCreated, f"revision {candidate}: {wanted} replica(s)"
            )
            state.after(deadline)
        else:
            state.after(1.0)
        return Outcome(
            "Progressing",
            f"starting candidate revision {candidate}",
            ConditionReason.CandidateStarting,
        )
    if dep.ready_replicas < wanted:
        return waiting.until_ready(
            state,
            side="candidate",
            candidate=candidate,
            stable=stable,
            ready=dep.ready_replicas,
            wanted=wanted,
            started_at=dep.started_at,
            cause=causes.pods_cause(observed.pods_of_revision(candidate)),
            deadline_seconds=vd.spec.rollout.progress_deadline_seconds,
        )
    if not vd.spec.gate.enabled:
        state.decide(
            GateRecord(
                revision=candidate,
                outcome="Passed",
                reasons=["gate disabled: promoted once Ready"],
                baseline_revision=stable,
            ),
            None,
        )
        return Outcome("Promoting", "gate disabled", ConditionReason.GateDisabled)
    fallback = None
    if with_twin and (job is None or vd.spec.gate.baseline.mode == "twin"):
        assert stable is not None
        waited = baseline.await_twin(state, vd, candidate, stable)
        if isinstance(waited, Outcome):
            return waited
        if waited is not None:  # mode auto gives up on the twin: it goes in this pass
            fallback, with_twin, state.twin = waited, False, None
    return benchmark.gate(
        state, vd, candidate, stable, job=job, with_twin=with_twin, fallback=fallback
    )


def _promote(
    state: Pass,
    vd: VLLMDeployment,
    launch: LaunchPlan,
    candidate: str,
    stable: str | None,
    *,
    decided: GateRecord,
) -> Outcome:
    target = scaling.promotion_target(state, vd, stable)
    dep = state.observed.deployment_of(candidate)
    if dep is None or dep.deleting:
        if dep is None:
            create_deployment(state, vd, launch, candidate, target, role=labels.ROLE_CANDIDATE)
            state.event(
                "Normal", EventReason.CandidateCreated, f"revision {candidate}: {target} replica(s)"
            )
        state.after(1.0)
        return Outcome("Promoting", f"starting revision {candidate}", ConditionReason.Promoting)
    if dep.replicas != target:
        state.event(
            "Normal", EventReason.Promoting, f"scaling revision {candidate} to {target} replica(s)"
        )
    patch_deployment(state, dep, target, labels.ROLE_CANDIDATE)
    since = parse_time(decided.finished_at)
    deadline = state.scaled(vd.spec.rollout.progress_deadline_seconds)
    elapsed = state.elapsed(since)
    proven = min(vd.spec.rollout.candidate_replicas, target)
    enough = dep.replicas == target and dep.ready_replicas >= target
    # Escape from a full GPU cluster: the old revision holds the GPUs the rest of the new
    # one needs. After the deadline, switch at the size the gate proved, then retire.
    escape = elapsed >= deadline and dep.ready_replicas >= max(proven, 1)
    if enough or escape:
        ensure_service(state, render_serving_service(vd, candidate), candidate)
        state.serving = candidate  # the autoscaler and the budget follow in this plan
        state.actions.append(
            Patch(
                dep.kind,
                dep.name,
                {"metadata": {"labels": {labels.ROLE_LABEL: labels.ROLE_STABLE}}},
            )
        )
        why = "" if enough else f" after the progress deadline, at {dep.ready_replicas}/{target}"
        state.event(
            "Normal",
            EventReason.Promoted,
            f"serving Service now selects revision {candidate} ({dep.ready_replicas} Ready{why})"
            + (f"; retiring revision {stable}" if stable else ""),
        )
        state.after(0.0)
        return Outcome(
            "Promoting", f"switching traffic to revision {candidate}", ConditionReason.Promoting
        )
    state.after(max(deadline - elapsed, 1.0))
    return Outcome(
        "Promoting",
        f"scaling revision {candidate} to {target}: {dep.ready_replicas} Ready",
        ConditionReason.Promoting,
    )


def _reject(
    state: Pass, candidate: str, stable: str | None, decided: GateRecord, *, drain: bool = False
) -> Outcome:
    dep = state.observed.deployment_of(candidate)
    if dep is not None and not dep.deleting and not drain:
        state.delete(dep.kind, dep.name)
        state.event(
            "Normal",
            EventReason.CandidateRemoved,
            f"revision {candidate} rejected: {dep.kind} deleted",
        )
    # One line describe prints whole (issue 42): the deciding figure first, cut to fit; the
    # verdict annotation and status.lastGate have the rest, the report every figure.
    head = f"revision {candidate} rejected ({decided.outcome}: "
    tail = f"); revision {stable} serves" if serving_ok(state, stable) else "); nothing serves"
    text = clip(decided.line() or decided.outcome, LINE_CHARS - len(head) - len(tail))
    return Outcome(
        "Degraded" if serving_ok(state, stable) else "Failed",
        head + text + tail,
        ConditionReason.CandidateRejected,
    )


def retire(state: Pass, keep: set[str]) -> None:
    """Delete every Deployment and Job that no longer has a role."""
    observed = state.observed
    doomed = {(a.kind, a.name) for a in state.actions if isinstance(a, Delete)}
    for dep in observed.deployments:
        if dep.revision in keep or dep.deleting or (dep.kind, dep.name) in doomed:
            continue
        state.delete(dep.kind, dep.name)
        reason = (
            EventReason.RevisionRetired
            if dep.role == labels.ROLE_STABLE
            else EventReason.CandidateAbandoned
        )
        state.event("Normal", reason, f"revision {dep.revision}: Deployment {dep.name} deleted")
    current = None
    for revision in keep:
        decided = state.decision(revision)
        if decided is None or (decided.outcome == "Inconclusive" and decided.attempt):
            current = benchmark.current_job(state, revision) or current
    for job in observed.jobs:
        if job.deleting or (current is not None and job.name == current.name):
            continue
        if not job.finished and job.revision not in keep:
            state.event("Normal", EventReason.BenchmarkAbandoned, f"Job {job.name} deleted")
        state.delete("Job", job.name)


__all__ = ["handle_requests", "names", "retire", "rollout", "steady"]
