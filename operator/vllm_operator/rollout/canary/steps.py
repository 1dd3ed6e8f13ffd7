"""A canary step once its pods are up: the reads, the early stop, the judgement and the
ways it fails. Pure; ``phase`` drives it.

A started step is read every ``analysis.intervalSeconds``; each read grows the step's counts
by every pod's ``increase()`` since its previous read (``metrics.accumulate``) and marks
progress. Between reads nothing is read. A clear breach fails at once
(``analysis.early_breach``); at the due time ``analysis.judge_step`` decides. Whatever waits
(pods Ready, the route, a read) fails once it made no progress for
``progressDeadlineSeconds`` (``stalled``), and every failure sends the traffic back in the
same pass (``fail``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import timedelta

from vllm_operator.api.canary import CanaryFigures, CanarySpec, CanaryStatus
from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.status import GateRecord
from vllm_operator.api.text import EVENT_CHARS, clip
from vllm_operator.render import labels
from vllm_operator.rollout import ledger
from vllm_operator.rollout.actions import Patch
from vllm_operator.rollout.canary import signals
from vllm_operator.rollout.canary import traffic as canary_traffic
from vllm_operator.rollout.canary.analysis import (
    LiveFigures,
    StepJudgement,
    early_breach,
    judge_step,
)
from vllm_operator.rollout.canary.metrics import (
    PodCounts,
    PodDelta,
    ScrapeError,
    ScrapeFailure,
    accumulate,
    parse_metrics,
    step_deltas,
)
from vllm_operator.rollout.canary.record import CanaryRecord
from vllm_operator.rollout.canary.traffic import pod_load_ratio, shares
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.observed import Observed
from vllm_operator.rollout.status import REASON_CHARS, Outcome
from vllm_operator.rollout.views import DeploymentView, PodView, parse_time

SCRAPE_RETRY_SECONDS = 1.0


@dataclasses.dataclass(frozen=True)
class Step:
    """The step under way, as one pass sees it."""

    vd: VLLMDeployment
    canary: CanarySpec
    record: CanaryRecord
    dep: DeploymentView
    candidate: str
    stable: str
    made: float | None = None
    """The share whole pods make of the step's weight (None: the weight itself)."""

    @property
    def where(self) -> str:
        weight = self.canary.steps[self.record.step].weight
        made = shares(weight, weight if self.made is None else self.made)
        return f"canary step {self.record.step + 1}/{len(self.canary.steps)} ({made})"


def after_read(
    state: Pass, canary: CanarySpec, record: CanaryRecord, counts: Mapping[str, PodCounts]
) -> CanaryRecord:
    """The record after a read of every pod: the step's counts grown by what each pod
    counted since its last read, the progress mark, the next read."""
    interval = state.scaled(canary.analysis.interval_seconds)
    return dataclasses.replace(
        record,
        counts=accumulate(record.counts, record.last, counts),
        last=dict(counts),
        progress_at=ledger.timestamp(state.now),
        next_read_at=ledger.timestamp(state.now + timedelta(seconds=interval)),
    )


def hold(state: Pass, step: Step, status: CanaryStatus, pods: list[PodView]) -> Outcome | None:
    """A started step: read the pods every intervalSeconds, fail early on a clear breach,
    judge when due."""
    record, where, candidate = step.record, step.where, step.candidate
    due = parse_time(record.due_at)
    next_read = parse_time(record.next_read_at)
    if due is not None and state.now < due and (next_read is None or state.now < next_read):
        until = min(due, next_read) if next_read is not None else due
        state.after((until - state.now).total_seconds())
        return Outcome(
            "Canary",
            f"revision {candidate}: {where}: holding until {record.due_at}",
            ConditionReason.Canary,
        )
    counts = read(state, pods)
    if counts is None:
        return stalled(state, step, "reading the pods' metrics", SCRAPE_RETRY_SECONDS)
    record = after_read(state, step.canary, record, counts)
    write(state, step.dep, record)
    step = dataclasses.replace(step, record=record)
    started = parse_time(record.started_at)
    seconds = max(state.elapsed(started), 1e-3)
    ours, theirs = sides(state.observed, record, candidate, step.stable)
    if due is not None and state.now < due:
        early = early_breach(step.canary.analysis, ours, theirs, seconds)
        if early is not None:
            return fail(state, step, "; ".join(f.text for f in early.failed_figures), early)
        state.after(min((due - state.now).total_seconds(), _interval(state, step)))
        return Outcome(
            "Canary",
            f"revision {candidate}: {where}: holding until {record.due_at}",
            ConditionReason.Canary,
        )
    canary = step.canary
    load = pod_load_ratio(
        canary.traffic.mode, canary.steps[record.step].weight, len(ours), len(theirs)
    )
    judged = judge_step(
        canary.analysis,
        ours,
        theirs,
        seconds,
        gate_slo=step.vd.spec.gate.thresholds.slo,
        pod_load=load,
    )
    state.canary_status = status.model_copy(
        update={
            "candidate": figures(candidate, judged.candidate),
            "stable": figures(step.stable, judged.stable),
            "last_judgement": [r[:1024] for r in judged.reasons()[:16]],
        }
    )
    return decide(
        state,
        step.vd,
        step.canary,
        record,
        judged,
        dep=step.dep,
        candidate=candidate,
        stable=step.stable,
        where=where,
        made=step.made,
    )


def _interval(state: Pass, step: Step) -> float:
    return state.scaled(step.canary.analysis.interval_seconds)


def stalled(
    state: Pass, step: Step, what: str, retry: float, limit: float | None = None
) -> Outcome | None:
    """A step that waits on something (pods Ready, the route, a read): fails once it has
    made no progress for progressDeadlineSeconds (or ``limit``, scaled, when shorter)."""
    deadline = state.scaled(step.canary.progress_deadline_seconds)
    if limit is not None:
        deadline = min(deadline, state.scaled(limit))
    stalled = signals.stalled_for(step.record, state.now)
    if stalled > deadline:
        return fail(
            state, step, f"no progress for {stalled:.0f} s (deadline {deadline:g} s): {what}"
        )
    state.after(min(retry, max(deadline - stalled, 0.0) + 0.01))
    return Outcome(
        "Canary", f"revision {step.candidate}: {step.where}: {what}", ConditionReason.Canary
    )


def fail(state: Pass, step: Step, why: str, judged: StepJudgement | None = None) -> Outcome | None:
    """The step failed (a figure, a signal or the deadline): a Failed verdict naming why;
    traffic back to the stable in this pass."""
    where, candidate = step.where, step.candidate
    # The figures that decided nothing, a line each (the deciding one stays whole).
    extra = [clip(r, REASON_CHARS) for r in judged.reasons()[1:]] if judged is not None else []
    state.decide(
        GateRecord(
            revision=candidate,
            outcome="Failed",
            reasons=[f"{where} failed: {why}"[:4096], *extra],
            deciding=1,  # the failure named first; the other figures decided nothing
            baseline_revision=step.stable,
        ),
        None,  # its Event names the failure, below
    )
    state.event(
        "Warning",
        EventReason.CanaryFailed,
        clip(f"revision {candidate}: {where}: {why}", EVENT_CHARS),
    )
    leave(state, step.vd, step.canary, candidate, step.stable)
    return None


def decide(
    state: Pass,
    vd: VLLMDeployment,
    canary: CanarySpec,
    record: CanaryRecord,
    judged: StepJudgement,
    *,
    dep: DeploymentView,
    candidate: str,
    stable: str,
    where: str,
    made: float | None = None,
) -> Outcome | None:
    if judged.decision == "Failed":
        failed = "; ".join(f.text for f in judged.failed_figures)
        return fail(state, Step(vd, canary, record, dep, candidate, stable, made), failed, judged)
    if judged.decision == "Passed":
        last = record.step + 1 >= len(canary.steps)
        state.event(
            "Normal",
            EventReason.CanaryPassed if last else EventReason.CanaryStepPassed,
            f"revision {candidate}: {where} passed ({judged.candidate.requests} candidate and "
            f"{judged.stable.requests} stable requests)" + ("; promoting" if last else ""),
        )
        if last:
            write(state, dep, CanaryRecord(step=record.step, passed=True))
            return None
        write(state, dep, record.next_step())
        state.after(0.0)
        return Outcome("Canary", f"revision {candidate}: {where} passed", ConditionReason.Canary)
    why = "too few requests" if not judged.enough_requests else "figures undecided"
    counts = f"{judged.candidate.requests} candidate, {judged.stable.requests} stable requests"
    if record.extensions < canary.analysis.max_extensions:
        hold = state.scaled(canary.steps[record.step].hold_seconds)
        due = parse_time(record.due_at) or state.now
        later = ledger.timestamp(max(due, state.now) + timedelta(seconds=hold))
        write(state, dep, record.extended(later))
        if isinstance(state.canary_status, CanaryStatus):
            state.canary_status = state.canary_status.model_copy(
                update={"due_at": later, "extensions": record.extensions + 1}
            )
        state.event(
            "Normal",
            EventReason.CanaryStepExtended,
            f"revision {candidate}: {where}: {why} ({counts}; minRequests "
            f"{canary.analysis.min_requests}); held {hold:g} s more "
            f"({record.extensions + 1} of {canary.analysis.max_extensions})",
        )
        state.after(hold)
        return Outcome(
            "Canary", f"revision {candidate}: {where}: {why}; held longer", ConditionReason.Canary
        )
    state.decide(
        GateRecord(
            revision=candidate,
            outcome="Inconclusive",
            reasons=[
                f"{where} inconclusive: {why} after "
                f"{canary.analysis.max_extensions} extension(s) ({counts})",
                *judged.reasons(),
            ],
            baseline_revision=stable,
        ),
        None,  # its Event says what stayed undecided, below
    )
    state.event(
        "Warning",
        EventReason.CanaryInconclusive,
        f"revision {candidate}: {where}: {why} after {canary.analysis.max_extensions} "
        f"extension(s) ({counts})",
    )
    leave(state, vd, canary, candidate, stable)
    return None


def leave(state: Pass, vd: VLLMDeployment, canary: CanarySpec, candidate: str, stable: str) -> None:
    """Traffic back to the stable revision in this pass."""
    state.canary_traffic = False
    canary_traffic.restore(state, vd, canary.traffic.mode, stable, candidate)


def read(state: Pass, pods: list[PodView]) -> dict[str, PodCounts] | None:
    """Every pod's counts from this pass's scrapes; None (with one Event) when a pod of the
    step could not be read: a step is judged on all of its pods or not at all."""
    out: dict[str, PodCounts] = {}
    failures: list[str] = []
    for pod in pods:
        raw = state.observed.scrapes.get(pod.name)
        if raw is None:
            return None  # not read this pass (the shell reads at the next)
        if isinstance(raw, ScrapeFailure):
            failures.append(f"{pod.name}: {raw.reason}")
            continue
        if isinstance(raw, PodCounts):  # read from Prometheus (analysis.prometheus)
            out[pod.name] = dataclasses.replace(raw, restarts=pod.restarts)
            continue
        try:
            out[pod.name] = parse_metrics(str(raw), restarts=pod.restarts)
        except ScrapeError as exc:
            failures.append(f"{pod.name}: {exc}")
    if failures:
        state.event("Warning", EventReason.CanaryScrapeFailed, "; ".join(failures)[:1024])
        return None
    return out if out else None


def sides(
    observed: Observed, record: CanaryRecord, candidate: str, stable: str
) -> tuple[dict[str, PodDelta], dict[str, PodDelta]]:
    """Each revision's pods' counts over the step so far."""
    deltas = step_deltas(record.counts, record.last)
    ours = {p.name for p in observed.pods_of_revision(candidate)}
    theirs = {p.name for p in observed.pods_of_revision(stable)}
    return (
        {p: d for p, d in deltas.items() if p in ours},
        {p: d for p, d in deltas.items() if p in theirs},
    )


def write(state: Pass, dep: DeploymentView, record: CanaryRecord) -> None:
    text = record.to_annotation()
    if dep.canary != text:
        state.actions.append(
            Patch(
                dep.kind,
                dep.name,
                {"metadata": {"annotations": {labels.CANARY_ANNOTATION: text}}},
            )
        )


def figures(revision: str, live: LiveFigures) -> CanaryFigures:
    return CanaryFigures(
        revision=revision,
        pods=live.pods,
        restarted_pods=live.restarted_pods,
        requests=live.requests,
        error_percent=live.error_percent,
        tokens_per_second_per_replica=live.tokens_per_second_per_replica,
        ttft_p95_ms=live.ttft_p95_ms,
        itl_p95_ms=live.itl_p95_ms,
        e2e_p95_ms=live.e2e_p95_ms,
    )
