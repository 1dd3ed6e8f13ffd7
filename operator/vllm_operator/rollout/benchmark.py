"""The benchmark Job of a candidate: start it, wait for it, judge its summary, record the verdict.

``gate`` is the step ``steps`` takes once the candidate (and its twin) are Ready; each pass
does one of the three. Starting names the baseline on the Job (``baseline.choose``), so the
judgement later compares with what the Job measured, whatever the spec says by then. A
summary is believed only from a Job that ended as the bench's exit codes say and that names
this run (``trust.judge``); a Job whose pod can never start, or has not within the start
limit, is an Error. The verdict is recorded before anything it condemns is deleted.
"""

from __future__ import annotations

from vllm_operator.api.progress import NOW
from vllm_operator.api.progress import describe as describe_progress
from vllm_operator.api.progress import stage as progress_stage
from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.status import GateRecord
from vllm_operator.api.summary import BenchSummary, Placement
from vllm_operator.api.text import EVENT_CHARS, clip
from vllm_operator.gate.decidable import gate_plan
from vllm_operator.gate.verdict import HEADLINE_CHARS
from vllm_operator.render import labels
from vllm_operator.render.job import bench_deadline, render_job
from vllm_operator.rollout import advice, baseline, causes, ledger, reruns, trust, twin
from vllm_operator.rollout.actions import EventType, JobRef
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.observed import PROGRESS_SECONDS
from vllm_operator.rollout.status import Outcome
from vllm_operator.rollout.views import JobView


def current_job(state: Pass, candidate: str) -> JobView | None:
    """The newest benchmark Job of ``candidate`` this gate counts (none below the attempt
    floor a rerun request set, none being deleted)."""
    floor = reruns.attempt_floor(state, candidate)
    jobs = [
        j
        for j in state.observed.jobs
        if j.revision == candidate and j.attempt >= floor and not j.deleting
    ]
    return max(jobs, key=lambda j: j.attempt) if jobs else None


def gate(
    state: Pass,
    vd: VLLMDeployment,
    candidate: str,
    stable: str | None,
    *,
    job: JobView | None,
    with_twin: bool,
    fallback: baseline.Fallback | None,
) -> Outcome:
    """One step of the gate: start the benchmark Job, wait for it, or judge its summary and
    record the verdict."""
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
    planted = not with_twin and baseline.planted(state, stable)
    choice = baseline.choose(vd, stable, with_twin, stored, fallback, planted=planted)
    annotations = manifest["metadata"]["annotations"]
    annotations[labels.BASELINE_MODE_ANNOTATION] = choice.mode
    annotations[labels.BASELINE_REASON_ANNOTATION] = choice.reason
    state.create(manifest)
    if fallback is not None:
        baseline.announce(state, candidate, choice)
    state.event(
        "Normal",
        EventReason.BenchmarkStarted,
        clip(
            f"revision {candidate}: Job {manifest['metadata']['name']}; baseline: {choice.reason}",
            EVENT_CHARS,
        ),
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
            state.decide(
                GateRecord(
                    revision=candidate,
                    outcome="Error",
                    reasons=reasons,
                    baseline_revision=stable,
                    attempt=job.attempt,
                ),
                EventReason.GateError,
            )
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
        head, message = message + NOW, f"{message}{NOW}{progress}"
        before = state.previous.message  # this Job's progress as last said, if any
        said = before[len(head) :] if before.startswith(head) else None
        first = vd.spec.gate.trials
        if said is None or progress_stage(said, first) != progress_stage(progress, first):
            state.event(
                "Normal",
                EventReason.BenchmarkProgress,
                f"revision {candidate}: {progress}",
                job=JobRef(job.name, job.uid) if job.uid else None,
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
        plan=gate_plan(
            vd.spec.gate, bench_deadline(vd.spec.gate.timeout_seconds), 2 if paired else 1
        ),
    )
    outcome, reasons, summary = (
        judged.verdict.outcome,
        list(judged.verdict.reasons),
        judged.summary,
    )
    deciding, headline = judged.verdict.deciding or 0, judged.verdict.headline
    if outcome == "Error":
        details = causes.job_error_details(job, state.observed.job_pods(job), reasons, summary)
        if deciding:  # they explain the Error: with what decided it
            reasons[deciding:deciding] = details
            deciding += len(details)
        else:
            reasons += details
        if details and headline:
            headline = f"{headline}; {details[0]}"[:HEADLINE_CHARS]
    why = job.baseline_reason or baseline.choose(vd, stable, paired, stored, None).reason
    if outcome != "Error":  # figures were judged: say what they were compared with
        said = baseline.notes(state, job, stable, paired=paired, stored=stored, reason=why)
        reasons += said
        if said and headline:  # its first words: "baseline measured earlier", ...
            headline = f"{headline}; {said[0].split(':')[0]}"
    entry = state.decide(
        GateRecord(
            revision=candidate,
            outcome=outcome,
            reasons=reasons,
            deciding=deciding or None,
            headline=headline,
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
        ),
        None,  # its Event is _announce_verdict's, with what follows an Inconclusive one
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
    said = entry.line()
    if entry.outcome != "Passed":  # what decided, in full; the rest are in status.lastGate
        said = "; ".join(entry.decided_by_reasons())
        more = len(entry.reasons) - len(entry.decided_by_reasons())
        if more > 0:
            said += f" (+{more} more in status.lastGate)"
    message = f"revision {candidate}: {said}"
    if len(message) > EVENT_CHARS:  # a line describe prints whole: the verdict in one line
        message = clip(f"revision {candidate}: {entry.line()}", EVENT_CHARS)
    state.event(kind, EventReason(f"Gate{entry.outcome}"), message)
    if entry.outcome == "Inconclusive" and vd.spec.rollout.on_inconclusive == "rerun":
        reruns.announce(state, vd, candidate, attempt)
    elif entry.outcome == "Inconclusive" and vd.spec.rollout.on_inconclusive == "hold":
        state.event(
            "Warning",
            EventReason.GateHolding,
            f"revision {candidate}: held for a person; "
            + "; ".join(advice.holding_advice(vd, candidate)),
        )
