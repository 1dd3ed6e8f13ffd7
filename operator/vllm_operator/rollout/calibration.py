"""In-cluster calibration: ``vllm-operator.dev/calibrate=<N>`` runs N A/A gate Jobs.

A person (or GitOps) annotates a serving VLLMDeployment with ``calibrate=3``; the operator
starts the twin of the stable revision, then one calibration Job after another: the gate's own
bench measuring the stable revision (through the serving Service) against its twin. Each
finished Job's per-trial figures go into ``status.calibration.runs``; after the N-th, the fit
and plan of ``vllm-operator calibrate`` (``rollout.calibration_fit``) go into
``status.calibration.proposal`` and a ``CalibrationDone`` Event. It never records a verdict,
never touches the serving Service, the candidate or the autoscaler: the Jobs carry component
``calibration``, so no gate counts them and the rollout does not retire them (they go with
their TTL, their logs holding the full reports for ``vllm-operator calibrate``).

Restart-safe like the rest of the planner: what was asked, for which revision and spec
generation, the Jobs' name stem and the finished runs are in status; the next Job is
``<name>--calibrate-<token>-<len(runs)+1>``, found or created, never twice. It stops
(``Abandoned``, a Warning Event, its running Job deleted) when the spec changes (a new
generation), a new revision rolls out, the annotation is removed, a Job fails or the runs
cannot be fitted, or its twin cannot be had (``TwinUnavailable``: not scheduled within
``gate.baseline.twinWaitSeconds``, or not Ready within ``rollout.progressDeadlineSeconds``;
for a multi-node revision the twin is a whole second group, which often does not fit beside
the serving ones). A value that is not a whole number from 1 to ``MAX_RUNS`` is ``Invalid``,
naming the annotation. An answered request stays answered while the annotation stays: remove
it and set it again to calibrate again (GitOps re-applying it does not repeat the Jobs).
"""

from __future__ import annotations

import hashlib
import re

from vllm_operator.api.calibration import MAX_RUNS, CalibrationStatus
from vllm_operator.api.reasons import EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.summary import TrialPlan
from vllm_operator.errors import VLLMOperatorError
from vllm_operator.render.job import render_calibration_job
from vllm_operator.render.labels import CALIBRATE_ANNOTATION
from vllm_operator.render.names import calibration_job_name
from vllm_operator.rollout import causes, ledger, trust, twin
from vllm_operator.rollout.calibration_fit import proposal_of, run_of
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.observed import PROGRESS_SECONDS
from vllm_operator.rollout.views import DeploymentView, JobView

REQUEST_CHARS = 24
"""Longest annotation value recorded as itself (a count has at most 2 digits)."""

WAIT_SECONDS = 2.0
"""How soon to look again while the twin starts or the next Job is due."""


def requested_runs(raw: str) -> int | str:
    """The N of ``calibrate=<N>``, or why the value is refused (naming the annotation)."""
    text = raw.strip()
    if not re.fullmatch(r"[0-9]{1,3}", text) or not 1 <= int(text) <= MAX_RUNS:
        shown = raw if len(raw) <= 20 else raw[:20] + "..."
        return (
            f"annotation {CALIBRATE_ANNOTATION}={shown!r}: give the number of A/A runs, a "
            f"whole number from 1 to {MAX_RUNS} (e.g. {CALIBRATE_ANNOTATION}=3)"
        )
    return int(text)


def request_key(raw: str) -> str:
    """What ``status.calibration.request`` records of the value: itself when short, else a
    digest (an annotation value may be 256 KiB; the record is bounded)."""
    if len(raw) <= REQUEST_CHARS:
        return raw
    return "sha256:" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def step(state: Pass, vd: VLLMDeployment, stable: str | None, desired: str) -> None:
    """One pass of the calibration the annotation asks for (``state.calibration`` is what
    status carries after it)."""
    prev = state.calibration
    raw = state.observed.annotations.get(CALIBRATE_ANNOTATION)
    if raw is None:
        if prev is not None and prev.phase == "Running":
            _abandon(state, prev, "the annotation was removed")
        elif prev is not None and prev.request is not None:
            state.calibration = prev.model_copy(update={"request": None})
        return
    raw = str(raw)
    key = request_key(raw)
    if prev is not None and prev.request == key and prev.phase != "Running":
        return  # answered; set it again (after removing it) to calibrate again
    running = prev if prev is not None and prev.phase == "Running" else None
    if running is not None and running.request != key:
        _abandon(state, running, f"the annotation changed to {raw[:20]!r}")
        running = None
    if running is None:
        running = _start(state, vd, raw, stable, desired)
        if running is None:
            return
    _go_on(state, vd, running, stable, desired)


def _start(
    state: Pass, vd: VLLMDeployment, raw: str, stable: str | None, desired: str
) -> CalibrationStatus | None:
    wanted = requested_runs(raw)
    if isinstance(wanted, str):
        state.calibration = CalibrationStatus(
            request=request_key(raw), phase="Invalid", message=wanted
        )
        state.event("Warning", EventReason.CalibrationInvalid, wanted)
        return None
    slo = vd.spec.gate.thresholds.slo
    if slo is None or slo.is_empty or vd.spec.gate.workload.is_study:
        why = (
            f"annotation {CALIBRATE_ANNOTATION}: the gate has no gate.thresholds.slo limits "
            "(with a synthetic or dataset workload) to calibrate"
        )
        state.calibration = CalibrationStatus(
            request=request_key(raw), phase="Invalid", message=why
        )
        state.event("Warning", EventReason.CalibrationInvalid, why)
        return None
    if stable is None or desired != stable or not _copyable(state, stable):
        # Not answered yet (request unset): it starts once one revision serves alone.
        message = f"calibrate={wanted} waits until one revision serves alone"
        state.calibration = CalibrationStatus(request=None, phase="Waiting", message=message)
        return None  # the pass that ends the rollout starts it
    assert stable is not None
    # The previous calibration's stem too: one started again within the second differs.
    before = state.previous.calibration.token if state.previous.calibration else None
    seed = f"{raw}/{stable}/{state.observed.generation}/{ledger.timestamp(state.now)}/{before}"
    token = hashlib.sha256(seed.encode()).hexdigest()[:6]
    started = CalibrationStatus(
        request=request_key(raw),
        phase="Running",
        message=f"0 of {wanted} A/A runs of revision {stable} against its twin",
        runs_wanted=wanted,
        revision=stable,
        generation=state.observed.generation,
        token=token,
    )
    state.event(
        "Normal",
        EventReason.CalibrationStarted,
        f"{wanted} A/A gate Jobs of stable revision {stable} against its twin "
        "(no verdict, no traffic moved)",
    )
    state.calibration = started
    return started


def _copyable(state: Pass, stable: str) -> bool:
    """Whether the stable revision's Deployment is there to copy for a twin."""
    source = state.observed.deployment_of(stable)
    return source is not None and bool(source.template)


def _go_on(
    state: Pass, vd: VLLMDeployment, cur: CalibrationStatus, stable: str | None, desired: str
) -> None:
    if cur.generation != state.observed.generation:
        _abandon(state, cur, "the spec changed mid-calibration (a new generation)")
        return
    if stable != cur.revision or desired != stable:
        _abandon(state, cur, f"revision {desired} is rolling out")
        return
    assert stable is not None
    if not _copyable(state, stable):
        _abandon(state, cur, "the stable revision's Deployment cannot be copied for a twin")
        return
    twin.ensure(state, vd, stable, stable, purpose="the calibration")
    starting = twin.starting(state, vd, stable)
    if isinstance(starting, DeploymentView):
        why = _twin_unavailable(state, vd, stable, starting)
        if why is not None:
            state.twin = None  # the twin goes (twin.remove): a calibration has no fallback
            state.event("Warning", EventReason.TwinUnavailable, f"calibration: {why}")
            _abandon(state, cur, f"TwinUnavailable: {why}")
            return
    if starting is not None:
        state.after(WAIT_SECONDS)
        state.calibration = cur.model_copy(
            update={"message": f"{len(cur.runs)} of {cur.runs_wanted} runs; the twin starts"}
        )
        return
    assert cur.token is not None
    name = calibration_job_name(state.name, cur.token, len(cur.runs) + 1)
    job = next((j for j in state.observed.calibration_jobs if j.name == name), None)
    if job is not None and job.deleting:
        state.after(WAIT_SECONDS)  # a Job of this name going: never judged, never reused
    elif job is None:
        _create(state, vd, stable, name)
        say = f"{len(cur.runs)} of {cur.runs_wanted} runs; Job {name} started"
        state.calibration = cur.model_copy(update={"message": say})
    elif not job.finished:
        state.after(state.scaled(PROGRESS_SECONDS))
        say = f"{len(cur.runs)} of {cur.runs_wanted} runs; Job {name} running"
        state.calibration = cur.model_copy(update={"message": say})
    else:
        _collect(state, vd, cur, job)


def _twin_unavailable(
    state: Pass, vd: VLLMDeployment, stable: str, dep: DeploymentView
) -> str | None:
    """Why the twin of ``stable`` cannot be had, once it is overdue: not scheduled within
    ``gate.baseline.twinWaitSeconds`` or, scheduled, not Ready within
    ``rollout.progressDeadlineSeconds`` (both scaled); None while it may still come."""
    pods = state.observed.pods_of_twin(stable)
    want = vd.spec.rollout.candidate_replicas
    if sum(1 for p in pods if p.node_name) < want and dep.ready_replicas < want:
        seconds, what = vd.spec.gate.baseline.twin_wait_seconds, "scheduled"
    else:
        seconds, what = vd.spec.rollout.progress_deadline_seconds, "Ready"
    bound = state.scaled(seconds)
    elapsed = state.elapsed(dep.started_at)
    if elapsed < bound:
        state.after(bound - elapsed)
        return None
    cause = causes.pods_cause(pods)
    whole = f" (a whole group of {vd.spec.resources.nodes} pods)" if dep.group else ""
    return (
        f"the twin of revision {stable}{whole} was not {what} within "
        f"{seconds} s{f' ({cause})' if cause else ''}; a calibration measures the stable "
        "revision against a twin beside it, so it needs room for one more replica of it "
        f"(free it, then remove and set {CALIBRATE_ANNOTATION} again)"
    )


def _create(state: Pass, vd: VLLMDeployment, stable: str, name: str) -> None:
    manifest = render_calibration_job(
        vd,
        stable,
        name,
        image=state.settings.bench_image,
        baseline_url=twin.url(state, stable),
        extra_env=dict(state.settings.job_env),
        ttl_seconds=state.settings.job_ttl_seconds,
    )
    state.create(manifest)
    state.after(state.scaled(PROGRESS_SECONDS))


def _collect(state: Pass, vd: VLLMDeployment, cur: CalibrationStatus, job: JobView) -> None:
    """A finished Job: its runs kept, then the next Job, or the proposal after the last."""
    gate = vd.spec.gate
    plan = TrialPlan(min_trials=gate.trials, max_trials=gate.max_trials)
    judged = trust.judge(state.observed, job, gate.thresholds, None, require_paired=True, plan=plan)
    summary = judged.summary
    run = run_of(summary, job.name, gate.workload.load.seconds_per_level) if summary else None
    if judged.verdict.outcome == "Error" or run is None:
        why = judged.verdict.reasons[0] if judged.verdict.reasons else "no twin figures"
        _abandon(state, cur, f"Job {job.name}: {why}")
        return
    runs = [*cur.runs, run]
    if len(runs) < cur.runs_wanted:
        say = f"{len(runs)} of {cur.runs_wanted} runs done"
        state.calibration = cur.model_copy(update={"runs": runs, "message": say})
        state.after(0.0)
        return
    try:
        proposal = proposal_of(runs, gate)
    except VLLMOperatorError as exc:
        _abandon(state, cur.model_copy(update={"runs": runs}), f"cannot fit the runs: {exc}")
        return
    state.twin = None  # the calibration's twin goes (twin.remove)
    floors = ", ".join(f"{m} {v}%" for m, v in sorted(proposal.floors.items()))
    say = (
        f"{len(runs)} A/A runs of revision {cur.revision}: trials {proposal.trials}, "
        f"secondsPerLevel {proposal.seconds_per_level}, regressionFloorPercent {floors} "
        "(the fitted model's; confirm with `vllm-operator calibrate` on the Jobs' reports)"
    )
    state.calibration = cur.model_copy(
        update={"runs": runs, "phase": "Done", "message": say, "proposal": proposal}
    )
    state.event("Normal", EventReason.CalibrationDone, say)


def _abandon(state: Pass, cur: CalibrationStatus, why: str) -> None:
    for job in state.observed.calibration_jobs:
        if not job.finished and not job.deleting:
            state.delete("Job", job.name)
    done = f"{len(cur.runs)} of {cur.runs_wanted} runs done"
    message = f"calibration abandoned: {why} ({done}; nothing proposed)"
    state.calibration = cur.model_copy(update={"phase": "Abandoned", "message": message})
    state.event("Warning", EventReason.CalibrationAbandoned, message)
