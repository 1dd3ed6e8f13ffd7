"""The steps of one planning pass: requests, gating, promotion, rejection, retirement.

Each step reads the observed state, appends actions and events to the ``Pass`` and returns
where the rollout stands. Order inside a pass matters only for verdicts: a verdict is
recorded (status is written first by the shell) before the objects it condemns are deleted.
"""

from __future__ import annotations

from vllm_operator.api.progress import NOW
from vllm_operator.api.progress import describe as describe_progress
from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.status import GateRecord
from vllm_operator.api.summary import BenchSummary, Placement, TrialPlan
from vllm_operator.engine.policy import LaunchPlan
from vllm_operator.render import labels, names
from vllm_operator.render.job import render_job
from vllm_operator.render.services import render_candidate_service, render_serving_service
from vllm_operator.rollout import (
    advice,
    baseline,
    causes,
    ledger,
    reruns,
    scaling,
    trust,
    twin,
    waiting,
)
from vllm_operator.rollout.actions import Delete, EventType, Patch
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.objects import create_deployment, ensure_service, patch_deployment
from vllm_operator.rollout.observed import (
    BASELINE_MODE_ANNOTATION,
    BASELINE_REASON_ANNOTATION,
    PROGRESS_SECONDS,
    JobView,
    parse_time,
)
from vllm_operator.rollout.overrides import handle_requests
from vllm_operator.rollout.status import Outcome
from vllm_operator.rollout.stopped import serving_ok


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
        outcome = _start_candidate(state, vd, candidate, stable)
    decided = state.decision(candidate)
    if decided is None or reruns.gate_pending(state, vd, candidate):
        assert outcome is not None
        return outcome, candidate
    state.twin = None  # decided: a twin kept earlier in this pass goes now
    if decided.outcome == "Passed":
        return _promote(state, vd, candidate, stable, decided), candidate
    policy = vd.spec.rollout.on_inconclusive
    if decided.outcome == "Inconclusive" and policy in ("hold", "rerun"):
        text = "; ".join(decided.reasons) or "inconclusive"
        if policy == "rerun":
            text += f"; still inconclusive after {vd.spec.rollout.max_reruns} rerun(s)"
        return Outcome(
            "Holding",
            advice.holding_message(vd, candidate, text),
            ConditionReason.GateInconclusive,
        ), candidate
    return _reject(state, candidate, stable, decided), None


def _start_candidate(
    state: Pass, vd: VLLMDeployment, candidate: str, stable: str | None
) -> Outcome:
    """Start the candidate (its Deployment, Service and, with a twin baseline, the twin),
    wait until it is Ready, then benchmark it (or pass it at once when the gate is
    disabled)."""
    observed = state.observed
    wanted = vd.spec.rollout.candidate_replicas
    ensure_service(state, render_candidate_service(vd, candidate), candidate)
    job = _current_job(state, candidate)
    with_twin = baseline.keeps_twin(state, vd, candidate, stable, job)
    if with_twin:
        assert stable is not None
        twin.ensure(state, vd, candidate, stable)
    dep = observed.deployment_of(candidate)
    deadline = state.scaled(vd.spec.rollout.progress_deadline_seconds)
    if dep is None or dep.deleting:
        if dep is None:
            create_deployment(state, vd, candidate, wanted, labels.ROLE_CANDIDATE)
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
        state.record(
            GateRecord(
                revision=candidate,
                outcome="Passed",
                reasons=["gate disabled: promoted once Ready"],
                baseline_revision=stable,
            )
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
    return _benchmark(state, vd, candidate, stable, job=job, with_twin=with_twin, fallback=fallback)


def _current_job(state: Pass, candidate: str) -> JobView | None:
    floor = reruns.attempt_floor(state, candidate)
    jobs = [
        j
        for j in state.observed.jobs
        if j.revision == candidate and j.attempt >= floor and not j.deleting
    ]
    return max(jobs, key=lambda j: j.attempt) if jobs else None


def _benchmark(
    state: Pass,
    vd: VLLMDeployment,
    candidate: str,
    stable: str | None,
    *,
    job: JobView | None,
    with_twin: bool,
    fallback: baseline.Fallback | None,
) -> Outcome:
    """Start the benchmark Job, wait for it, then judge its summary and record the verdict."""
    stored = baseline.stored_summary(state, stable)
    if job is None:
        return _start_job(
            state, vd, candidate, stable, stored=stored, with_twin=with_twin, fallback=fallback
        )
    if job.finished:
        return _judge(state, vd, candidate, stable, job, stored=stored)
    return _wait_for_job(state, vd, candidate, stable, job)


def _start_job(
    state: Pass,
    vd: VLLMDeployment,
    candidate: str,
    stable: str | None,
    *,
    stored: BenchSummary | None,
    with_twin: bool,
    fallback: baseline.Fallback | None,
) -> Outcome:
    """Create the benchmark Job of the next attempt, its baseline named on it."""
    floor = reruns.attempt_floor(state, candidate)
    attempt = max(ledger.verdicts_on(state.history, candidate) + 1, floor)
    where = twin.candidate_placement(state, candidate)
    twin_where = twin.twin_placement(state, stable) if with_twin and stable else None
    manifest = render_job(
        vd,
        candidate,
        attempt,
        image=state.settings.bench_image,
        baseline=None if with_twin else stored,
        extra_env=dict(state.settings.job_env),
        ttl_seconds=state.settings.job_ttl_seconds,
        baseline_url=twin.url(state, stable) if with_twin and stable else None,
        placement=twin.flags(where, twin_where),
    )
    choice = baseline.choose(vd, stable, with_twin, stored, fallback)
    annotations = manifest["metadata"]["annotations"]
    annotations[BASELINE_MODE_ANNOTATION] = choice.mode
    annotations[BASELINE_REASON_ANNOTATION] = choice.reason
    state.create(manifest)
    if fallback is not None:
        baseline.announce(state, candidate, choice)
    state.event(
        "Normal",
        EventReason.BenchmarkStarted,
        f"revision {candidate}: Job {manifest['metadata']['name']}; baseline: {choice.reason}",
    )
    state.after(state.scaled(state.settings.job_start_seconds))
    return Outcome(
        "Benchmarking",
        f"benchmarking revision {candidate} (baseline: {choice.reason})",
        ConditionReason.Benchmarking,
    )


def _wait_for_job(
    state: Pass, vd: VLLMDeployment, candidate: str, stable: str | None, job: JobView
) -> Outcome:
    """A running Job: an Error once its pod can never start (or has not in time), else
    its progress in the message and a Normal Event when that changes."""
    observed = state.observed
    failure = causes.start_failure(observed.job_pods(job))
    limit = state.scaled(state.settings.job_start_seconds)
    age = state.elapsed(job.created_at)
    if failure is not None:
        cause, hopeless = failure
        if hopeless or age >= limit:
            reasons = [f"benchmark Job {job.name} never started: {cause}"]
            state.record(
                GateRecord(
                    revision=candidate,
                    outcome="Error",
                    reasons=reasons,
                    baseline_revision=stable,
                    attempt=job.attempt,
                )
            )
            state.event("Warning", EventReason.GateError, f"revision {candidate}: {reasons[0]}")
            return Outcome("Benchmarking", "gate Error", ConditionReason.GateError)
        state.after(limit - age)
        return Outcome(
            "Benchmarking", f"benchmark Job waiting: {cause}", ConditionReason.Benchmarking
        )
    message = f"benchmarking revision {candidate} (Job {job.name}" + (
        f"; baseline: {job.baseline_reason})" if job.baseline_reason else ")"
    )
    event = observed.progress.get(job.name)
    if event is not None:
        progress = describe_progress(event, vd.spec.gate.max_trials)
        message += f"{NOW}{progress}"
        if state.previous.message != message:
            state.event(
                "Normal", EventReason.BenchmarkProgress, f"revision {candidate}: {progress}"
            )
    state.after(state.scaled(PROGRESS_SECONDS))
    return Outcome("Benchmarking", message, ConditionReason.Benchmarking)


def _judge(
    state: Pass,
    vd: VLLMDeployment,
    candidate: str,
    stable: str | None,
    job: JobView,
    *,
    stored: BenchSummary | None,
) -> Outcome:
    """A finished Job: judge its summary (believed only if the Job ended as documented and
    the summary names this run) against the baseline it ran with, then record the verdict."""
    paired = stable is not None and (job.baseline_mode or vd.spec.gate.baseline.mode) == "twin"
    judged = trust.judge(
        state.observed,
        job,
        vd.spec.gate.thresholds,
        None if paired else stored,
        require_paired=paired,
        plan=TrialPlan(min_trials=vd.spec.gate.trials, max_trials=vd.spec.gate.max_trials),
    )
    outcome, reasons, summary = (
        judged.verdict.outcome,
        list(judged.verdict.reasons),
        judged.summary,
    )
    if outcome == "Error":
        reasons += causes.job_error_details(job, state.observed.job_pods(job), reasons, summary)
    why = job.baseline_reason or baseline.choose(vd, stable, paired, stored, None).reason
    if outcome != "Error":  # figures were judged: say what they were compared with
        reasons += baseline.notes(state, job, stable, paired=paired, stored=stored, reason=why)
    entry = state.record(
        GateRecord(
            revision=candidate,
            outcome=outcome,
            reasons=reasons,
            summary=summary,
            baseline_revision=stable if paired or stored is not None else None,
            attempt=job.attempt,
            baseline_mode="twin" if paired else "stored" if stored is not None else None,
            baseline_reason=why,
            candidate_placement=twin.recorded(
                twin.candidate_placement(state, candidate),
                summary.placement if summary is not None else None,
            ),
            baseline_placement=_baseline_placement(state, stable, summary, stored, paired=paired),
        )
    )
    _announce_verdict(state, vd, candidate, entry, job.attempt)
    return Outcome("Benchmarking", f"gate {outcome}", ConditionReason(f"Gate{outcome}"))


def _baseline_placement(
    state: Pass,
    stable: str | None,
    summary: BenchSummary | None,
    stored: BenchSummary | None,
    *,
    paired: bool,
) -> Placement | None:
    """Where the baseline ran: the twin's node (as seen and as the bench reported it) when
    paired; stored, where the stable revision's own gate measured it."""
    if paired and stable:
        return twin.recorded(
            twin.twin_placement(state, stable),
            summary.paired_baseline.placement
            if summary is not None and summary.paired_baseline is not None
            else None,
        )
    return stored.placement if stored is not None else None


def _announce_verdict(
    state: Pass, vd: VLLMDeployment, candidate: str, entry: GateRecord, attempt: int
) -> None:
    """The Event of a recorded verdict, and what follows an Inconclusive one."""
    kind: EventType = "Normal" if entry.outcome == "Passed" else "Warning"
    state.event(
        kind,
        EventReason(f"Gate{entry.outcome}"),
        f"revision {candidate}: " + "; ".join(entry.reasons),
    )
    if entry.outcome == "Inconclusive" and vd.spec.rollout.on_inconclusive == "rerun":
        reruns.announce(state, vd, candidate, attempt)
    elif entry.outcome == "Inconclusive" and vd.spec.rollout.on_inconclusive == "hold":
        state.event(
            "Warning",
            EventReason.GateHolding,
            f"revision {candidate}: held for a person; "
            + "; ".join(advice.holding_advice(vd, candidate)),
        )


def _promote(
    state: Pass, vd: VLLMDeployment, candidate: str, stable: str | None, decided: GateRecord
) -> Outcome:
    target = scaling.promotion_target(state, vd, stable)
    dep = state.observed.deployment_of(candidate)
    if dep is None or dep.deleting:
        if dep is None:
            create_deployment(state, vd, candidate, target, labels.ROLE_CANDIDATE)
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
                "Deployment",
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


def _reject(state: Pass, candidate: str, stable: str | None, decided: GateRecord) -> Outcome:
    dep = state.observed.deployment_of(candidate)
    if dep is not None and not dep.deleting:
        state.delete("Deployment", dep.name)
        state.event(
            "Normal",
            EventReason.CandidateRemoved,
            f"revision {candidate} rejected: Deployment deleted",
        )
    text = "; ".join(decided.reasons[:3]) or decided.outcome
    if serving_ok(state, stable):
        return Outcome(
            "Degraded",
            f"revision {candidate} rejected ({decided.outcome}: {text}); revision {stable} serves",
            ConditionReason.CandidateRejected,
        )
    return Outcome(
        "Failed",
        f"revision {candidate} rejected ({decided.outcome}: {text}); nothing serves",
        ConditionReason.CandidateRejected,
    )


def retire(state: Pass, keep: set[str]) -> None:
    """Delete every Deployment and Job that no longer has a role."""
    observed = state.observed
    doomed = {(a.kind, a.name) for a in state.actions if isinstance(a, Delete)}
    for dep in observed.deployments:
        if dep.revision in keep or dep.deleting or ("Deployment", dep.name) in doomed:
            continue
        state.delete("Deployment", dep.name)
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
            current = _current_job(state, revision) or current
    for job in observed.jobs:
        if job.deleting or (current is not None and job.name == current.name):
            continue
        if not job.finished and job.revision not in keep:
            state.event("Normal", EventReason.BenchmarkAbandoned, f"Job {job.name} deleted")
        state.delete("Job", job.name)


__all__ = ["handle_requests", "names", "retire", "rollout", "steady"]
