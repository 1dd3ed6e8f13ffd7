"""The steps of one planning pass: requests, gating, promotion, rejection, retirement.

Each step reads the observed state, appends actions and events to the ``Pass`` and returns
where the rollout stands. Order inside a pass matters only for verdicts: a verdict is
recorded (status is written first by the shell) before the objects it condemns are deleted.
"""

from __future__ import annotations

from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.status import GateRecord
from vllm_operator.api.summary import BenchSummary
from vllm_operator.engine.policy import LaunchPlan
from vllm_operator.render import labels, names
from vllm_operator.render.job import render_job
from vllm_operator.render.services import render_candidate_service, render_serving_service
from vllm_operator.rollout import causes, ledger, reruns, scaling, trust, twin, waiting
from vllm_operator.rollout.actions import Delete, EventType, Patch
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.held import serving_ok
from vllm_operator.rollout.objects import create_deployment, ensure_service, patch_deployment
from vllm_operator.rollout.observed import BASELINE_MODE_ANNOTATION, JobView, parse_time
from vllm_operator.rollout.overrides import handle_requests
from vllm_operator.rollout.status import Outcome


def baseline_of(state: Pass, stable: str | None) -> BenchSummary | None:
    """The stable revision's stored benchmark: the baseline of the gate."""
    if stable is None:
        return None
    prev = state.previous.stable
    if prev is not None and prev.revision == stable and prev.benchmark is not None:
        return prev.benchmark
    for entry in state.history:
        if entry.revision == stable and entry.outcome == "Passed" and entry.summary is not None:
            return entry.summary
    return None


def steady(state: Pass, vd: VLLMDeployment, launch: LaunchPlan, revision: str) -> Outcome:
    """The spec's revision serves: keep it at ``replicas`` and its Service as specified.

    Under autoscaling the count is the autoscaler's: the operator never writes it back.
    """
    dep = state.observed.deployment_of(revision)
    ensure_service(state, render_serving_service(vd, revision), revision)
    if dep is None or dep.deleting:
        if dep is None:
            replicas = scaling.serving_replicas(vd, None)
            create_deployment(state, vd, revision, replicas, labels.ROLE_STABLE)
            state.event("Warning", "StableRecreated", f"revision {revision} had no Deployment")
        state.after(1.0)
        return Outcome("Progressing", f"recreating revision {revision}", "StableMissing")
    replicas = scaling.serving_replicas(vd, dep.replicas)
    patch_deployment(state, dep, replicas, labels.ROLE_STABLE)
    if dep.ready_replicas >= replicas and dep.replicas == replicas:
        return Outcome(
            "Serving",
            f"revision {revision} serves ({dep.ready_replicas}/{replicas} Ready)",
            "Serving",
        )
    return Outcome(
        "Progressing",
        f"revision {revision}: {dep.ready_replicas}/{replicas} Ready",
        "Scaling",
    )


def rollout(
    state: Pass, vd: VLLMDeployment, launch: LaunchPlan, desired: str, stable: str | None
) -> tuple[Outcome, str | None]:
    """The spec's revision is not the stable one: gate it, then promote or reject it."""
    outcome = None
    if reruns.gate_pending(state, vd, desired):
        outcome = _gate(state, vd, desired, stable)
    decided = state.decision(desired)
    if decided is None or reruns.gate_pending(state, vd, desired):
        assert outcome is not None
        return outcome, desired
    state.twin = None  # decided: a twin kept earlier in this pass goes now
    if decided.outcome == "Passed":
        return _promote(state, vd, desired, stable, decided), desired
    policy = vd.spec.rollout.on_inconclusive
    if decided.outcome == "Inconclusive" and policy in ("hold", "rerun"):
        text = "; ".join(decided.reasons) or "inconclusive"
        if policy == "rerun":
            text += f"; still inconclusive after {vd.spec.rollout.max_reruns} rerun(s)"
        return Outcome(
            "Holding",
            f"gate inconclusive on revision {desired} ({text}); annotate "
            f"vllm-operator.dev/promote={desired} or vllm-operator.dev/abort={desired}",
            "GateInconclusive",
        ), desired
    return _reject(state, desired, stable, decided), None


def _gate(state: Pass, vd: VLLMDeployment, desired: str, stable: str | None) -> Outcome:
    observed = state.observed
    wanted = vd.spec.rollout.candidate_replicas
    ensure_service(state, render_candidate_service(vd, desired), desired)
    with_twin = stable is not None and twin.wanted(state, vd, desired, stable)
    if with_twin:
        assert stable is not None
        twin.ensure(state, vd, desired, stable)
    dep = observed.deployment_of(desired)
    deadline = state.scaled(vd.spec.rollout.progress_deadline_seconds)
    if dep is None or dep.deleting:
        if dep is None:
            create_deployment(state, vd, desired, wanted, labels.ROLE_CANDIDATE)
            state.event("Normal", "CandidateCreated", f"revision {desired}: {wanted} replica(s)")
            state.after(deadline)
        else:
            state.after(1.0)
        return Outcome("Progressing", f"starting candidate revision {desired}", "CandidateStarting")
    if dep.ready_replicas < wanted:
        return waiting.until_ready(
            state,
            side="candidate",
            desired=desired,
            stable=stable,
            ready=dep.ready_replicas,
            wanted=wanted,
            started_at=dep.started_at,
            cause=causes.pods_cause(observed.pods_of_revision(desired)),
            deadline_seconds=vd.spec.rollout.progress_deadline_seconds,
        )
    if not vd.spec.gate.enabled:
        state.record(
            GateRecord(
                revision=desired,
                outcome="Passed",
                reasons=["gate disabled: promoted once Ready"],
                baseline_revision=stable,
            )
        )
        return Outcome("Promoting", "gate disabled", "GateDisabled")
    if with_twin:
        assert stable is not None
        twin_wait = twin.wait(state, vd, desired, stable)
        if twin_wait is not None:
            return twin_wait
    return _benchmark(state, vd, desired, stable, with_twin)


def _current_job(state: Pass, desired: str) -> JobView | None:
    floor = reruns.attempt_floor(state, desired)
    jobs = [
        j
        for j in state.observed.jobs
        if j.revision == desired and j.attempt >= floor and not j.deleting
    ]
    return max(jobs, key=lambda j: j.attempt) if jobs else None


def _benchmark(
    state: Pass, vd: VLLMDeployment, desired: str, stable: str | None, with_twin: bool = False
) -> Outcome:
    observed = state.observed
    baseline = baseline_of(state, stable)
    job = _current_job(state, desired)
    if job is None:
        floor = reruns.attempt_floor(state, desired)
        attempt = max(ledger.verdicts_on(state.history, desired) + 1, floor)
        where = twin.candidate_placement(state, desired)
        twin_where = twin.twin_placement(state, stable) if with_twin and stable else None
        manifest = render_job(
            vd,
            desired,
            attempt,
            image=state.settings.bench_image,
            baseline=None if with_twin else baseline,
            extra_env=dict(state.settings.job_env),
            ttl_seconds=state.settings.job_ttl_seconds,
            baseline_url=twin.url(state, stable) if with_twin and stable else None,
            placement=twin.flags(where, twin_where),
        )
        manifest["metadata"]["annotations"][BASELINE_MODE_ANNOTATION] = (
            "twin" if with_twin else "stored"
        )
        state.create(manifest)
        state.event(
            "Normal", "BenchmarkStarted", f"revision {desired}: Job {manifest['metadata']['name']}"
        )
        state.after(state.scaled(state.settings.job_start_seconds))
        return Outcome("Benchmarking", f"benchmarking revision {desired}", "Benchmarking")
    pods = observed.job_pods(job)
    paired = stable is not None and (job.baseline_mode or vd.spec.gate.baseline.mode) == "twin"
    if job.finished:
        # Believed only if the Job ended as documented and the summary names this run.
        judged = trust.judge(
            observed,
            job,
            vd.spec.gate.thresholds,
            None if paired else baseline,
            require_paired=paired,
        )
        outcome, reasons, summary = judged.outcome, list(judged.reasons), judged.summary
        if outcome == "Error":
            if job.failed_reason:
                reasons.append(
                    f"Job failed: {job.failed_reason} {job.failed_message or ''}".strip()
                )
            for extra in (causes.start_failure(pods), causes.job_pod_exit(pods)):
                if isinstance(extra, tuple):
                    reasons.append(extra[0])
                elif extra and extra not in " ".join(reasons):
                    reasons.append(extra)
            if summary is not None and summary.reasons:
                reasons.append("the benchmark said: " + "; ".join(summary.reasons[:3]))
        entry = state.record(
            GateRecord(
                revision=desired,
                outcome=outcome,
                reasons=reasons,
                summary=summary,
                baseline_revision=stable if paired or baseline is not None else None,
                attempt=job.attempt,
                baseline_mode="twin" if paired else "stored",
                candidate_placement=twin.recorded(
                    twin.candidate_placement(state, desired),
                    summary.placement if summary is not None else None,
                ),
                # Stored: where the stable revision's own gate measured it.
                baseline_placement=twin.recorded(
                    twin.twin_placement(state, stable),
                    summary.paired_baseline.placement
                    if summary is not None and summary.paired_baseline is not None
                    else None,
                )
                if paired and stable
                else (baseline.placement if baseline is not None else None),
            )
        )
        kind: EventType = "Normal" if outcome == "Passed" else "Warning"
        state.event(kind, f"Gate{outcome}", f"revision {desired}: " + "; ".join(entry.reasons))
        if outcome == "Inconclusive" and vd.spec.rollout.on_inconclusive == "rerun":
            reruns.announce(state, vd, desired, job.attempt)
        return Outcome("Benchmarking", f"gate {outcome}", f"Gate{outcome}")
    failure = causes.start_failure(pods)
    limit = state.scaled(state.settings.job_start_seconds)
    age = state.elapsed(job.created_at)
    if failure is not None:
        cause, hopeless = failure
        if hopeless or age >= limit:
            reasons = [f"benchmark Job {job.name} never started: {cause}"]
            state.record(
                GateRecord(
                    revision=desired,
                    outcome="Error",
                    reasons=reasons,
                    baseline_revision=stable,
                    attempt=job.attempt,
                )
            )
            state.event("Warning", "GateError", f"revision {desired}: {reasons[0]}")
            return Outcome("Benchmarking", "gate Error", "GateError")
        state.after(limit - age)
        return Outcome("Benchmarking", f"benchmark Job waiting: {cause}", "Benchmarking")
    return Outcome(
        "Benchmarking", f"benchmarking revision {desired} (Job {job.name})", "Benchmarking"
    )


def _promote(
    state: Pass, vd: VLLMDeployment, desired: str, stable: str | None, decided: GateRecord
) -> Outcome:
    target = scaling.promotion_target(state, vd, stable)
    dep = state.observed.deployment_of(desired)
    if dep is None or dep.deleting:
        if dep is None:
            create_deployment(state, vd, desired, target, labels.ROLE_CANDIDATE)
            state.event("Normal", "CandidateCreated", f"revision {desired}: {target} replica(s)")
        state.after(1.0)
        return Outcome("Promoting", f"starting revision {desired}", "Promoting")
    if dep.replicas != target:
        state.event("Normal", "Promoting", f"scaling revision {desired} to {target} replica(s)")
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
        ensure_service(state, render_serving_service(vd, desired), desired)
        state.serving = desired  # the autoscaler and the budget follow in this plan
        state.actions.append(
            Patch(
                "Deployment",
                dep.name,
                {"metadata": {"labels": {labels.ROLE_LABEL: labels.ROLE_STABLE}}},
            )
        )
        why = "" if enough else f" after the progress deadline, at {dep.ready_replicas}/{target}"
        state.event(
            "Normal",
            "Promoted",
            f"serving Service now selects revision {desired} ({dep.ready_replicas} Ready{why})"
            + (f"; retiring revision {stable}" if stable else ""),
        )
        state.after(0.0)
        return Outcome("Promoting", f"switching traffic to revision {desired}", "Promoting")
    state.after(max(deadline - elapsed, 1.0))
    return Outcome(
        "Promoting",
        f"scaling revision {desired} to {target}: {dep.ready_replicas} Ready",
        "Promoting",
    )


def _reject(state: Pass, desired: str, stable: str | None, decided: GateRecord) -> Outcome:
    dep = state.observed.deployment_of(desired)
    if dep is not None and not dep.deleting:
        state.delete("Deployment", dep.name)
        state.event(
            "Normal", "CandidateRemoved", f"revision {desired} rejected: Deployment deleted"
        )
    text = "; ".join(decided.reasons[:3]) or decided.outcome
    if serving_ok(state, stable):
        return Outcome(
            "Degraded",
            f"revision {desired} rejected ({decided.outcome}: {text}); revision {stable} serves",
            "CandidateRejected",
        )
    return Outcome(
        "Failed",
        f"revision {desired} rejected ({decided.outcome}: {text}); nothing serves",
        "CandidateRejected",
    )


def retire(state: Pass, keep: set[str]) -> None:
    """Delete every Deployment and Job that no longer has a role."""
    observed = state.observed
    doomed = {(a.kind, a.name) for a in state.actions if isinstance(a, Delete)}
    for dep in observed.deployments:
        if dep.revision in keep or dep.deleting or ("Deployment", dep.name) in doomed:
            continue
        state.delete("Deployment", dep.name)
        reason = "RevisionRetired" if dep.role == labels.ROLE_STABLE else "CandidateAbandoned"
        state.event("Normal", reason, f"revision {dep.revision}: Deployment {dep.name} deleted")
    current = None
    for revision in keep:
        decided = state.decision(revision)
        if decided is None or (decided.outcome == "Inconclusive" and decided.attempt):
            current = _current_job(state, revision) or current
    for job in observed.jobs:
        if job.deleting or (current is not None and job.name == current.name):
            continue
        if not job.finished and job.revision not in keep:
            state.event("Normal", "BenchmarkAbandoned", f"Job {job.name} deleted")
        state.delete("Job", job.name)


__all__ = ["baseline_of", "handle_requests", "names", "retire", "rollout", "steady"]
