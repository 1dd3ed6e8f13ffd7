"""The canary phase: steps of live traffic on a candidate that passed its gate. Pure.

A candidate whose gate Passed, under ``rollout.canary``, is not promoted at once. For each
step (a share of the serving traffic held for ``holdSeconds``):

    Scaling  -> the candidate's pods for the step's share are Ready (``traffic``),
                then the serving traffic is shared (replicas: the serving Service selects
                both revisions' pods; gatewayAPI: the HTTPRoute's weights)
    Started  -> the shell reads every pod's /metrics; the counts, the start time and the
                time the step is due go into the record on the candidate's Deployment
    Holding  -> until due
    Judging  -> the shell reads /metrics again; ``analysis.judge_step`` on the deltas:
                Passed  -> the next step (the last: promotion, as without a canary)
                Failed  -> a Failed verdict naming the figures; traffic back to the stable in
                           the same pass; the candidate is removed once no new connection
                           can reach it (``may_remove``)
                Waiting -> held another holdSeconds, up to ``maxExtensions``; then an
                           Inconclusive verdict (``rollout.onInconclusive`` decides) and the
                           traffic goes back

The promote and abort annotations work as before: a person's verdict ends the canary (an
abort sends the traffic back like a failure). Everything a pass needs is in the cluster
(``record``), so a restarted operator judges the step it finds at the time it finds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta

from vllm_operator.api.canary import CanaryFigures, CanarySpec, CanaryStatus
from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.status import GateRecord
from vllm_operator.render import labels, names
from vllm_operator.rollout import ledger
from vllm_operator.rollout.actions import Patch
from vllm_operator.rollout.canary import traffic as canary_traffic
from vllm_operator.rollout.canary.analysis import LiveFigures, StepJudgement, judge_step
from vllm_operator.rollout.canary.metrics import (
    PodCounts,
    PodDelta,
    ScrapeError,
    ScrapeFailure,
    parse_metrics,
    step_deltas,
)
from vllm_operator.rollout.canary.record import CanaryRecord
from vllm_operator.rollout.canary.traffic import candidate_replicas, shares
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.objects import patch_deployment
from vllm_operator.rollout.observed import Observed
from vllm_operator.rollout.status import Outcome
from vllm_operator.rollout.views import DeploymentView, PodView, parse_time

CANARY_PREFIX = "canary"
"""Every reason of a verdict the canary records starts so (``from_canary``)."""
DRAIN_SECONDS = 5.0
"""After the traffic went back to the stable, how long a removed candidate's pods keep
answering what was already sent to them (not scaled: a client's requests are as long as
they are)."""
SCRAPE_RETRY_SECONDS = 1.0


def wanted(vd: VLLMDeployment, decided: GateRecord, stable: str | None) -> CanarySpec | None:
    """The canary to run for a candidate with this verdict, or None: no canary configured,
    nothing serving to compare with, or a person decided."""
    canary = vd.spec.rollout.canary
    if canary is None or stable is None or decided.decided_by != "gate":
        return None
    return canary


def record_of(dep: DeploymentView | None) -> CanaryRecord | None:
    return CanaryRecord.from_annotation(dep.canary) if dep is not None else None


def in_canary(observed: Observed, revision: str) -> bool:
    """``revision`` (the candidate) is in a canary that has not passed yet."""
    record = record_of(observed.deployment_of(revision))
    return record is not None and not record.passed


def from_canary(decided: GateRecord) -> bool:
    return bool(decided.reasons) and decided.reasons[0].startswith(CANARY_PREFIX)


def run(
    state: Pass, vd: VLLMDeployment, canary: CanarySpec, candidate: str, stable: str
) -> Outcome | None:
    """One pass of the canary; None when it has nothing more to do this pass: every step
    passed (promote), or a verdict was just recorded (the caller reads it)."""
    observed = state.observed
    dep = observed.deployment_of(candidate)
    stable_dep = observed.deployment_of(stable)
    if dep is None or dep.deleting or stable_dep is None:
        return None  # the promotion path recreates or waits, as without a canary
    record = record_of(dep) or CanaryRecord()
    if record.passed:
        state.canary_traffic = True  # both keep serving while the promotion scales up
        return None
    if record.step >= len(canary.steps):
        record = CanaryRecord(step=len(canary.steps) - 1)
    _write(state, dep, record)  # from the first pass on: the shell reads the pods by it
    step = canary.steps[record.step]
    cap = max(vd.spec.replicas, vd.spec.rollout.candidate_replicas)
    want = candidate_replicas(step.weight, stable_dep.replicas, cap)
    patch_deployment(state, dep, want, labels.ROLE_CANDIDATE)
    mode = canary.traffic.mode
    share = canary_traffic.share_now(
        state, vd, step.weight, dep.ready_replicas, stable_dep.ready_replicas
    )
    status = CanaryStatus(
        step=record.step + 1,
        steps=len(canary.steps),
        weight=step.weight,
        share_percent=share,
        mode=mode,
        started_at=record.started_at,
        due_at=record.due_at,
        extensions=record.extensions,
        candidate=_kept(state, "candidate", record),
        stable=_kept(state, "stable", record),
        last_judgement=_kept_reasons(state, record),
    )
    state.canary_status = status
    made = canary_traffic.share(mode, step.weight, want, stable_dep.replicas)
    where = f"canary step {record.step + 1}/{len(canary.steps)} ({shares(step.weight, made)})"
    if dep.replicas != want or dep.ready_replicas < want:
        state.after(1.0)
        state.canary_traffic = record.step > 0 or canary_traffic.is_shared(state, vd, stable)
        return Outcome(
            "Canary",
            f"revision {candidate}: {where}: {dep.ready_replicas}/{want} candidate pods Ready",
            ConditionReason.Canary,
        )
    state.canary_traffic = True
    shifted = canary_traffic.ensure_shared(state, vd, stable, step.weight)
    if isinstance(shifted, str):
        state.after(5.0)  # the route may appear or be fixed: look again
        return Outcome(
            "Canary", f"revision {candidate}: {where}: {shifted}", ConditionReason.Canary
        )
    if not shifted:
        state.after(0.0)  # applied this pass; the step starts once the cache shows it
        return Outcome(
            "Canary", f"revision {candidate}: {where}: shifting traffic", ConditionReason.Canary
        )
    pods = scraped_pods(observed, candidate, stable)
    if record.started_at is None:
        counts = _read(state, pods)
        if counts is None:
            state.after(SCRAPE_RETRY_SECONDS)
            return Outcome(
                "Canary",
                f"revision {candidate}: {where}: reading the pods' metrics",
                ConditionReason.Canary,
            )
        hold = state.scaled(step.hold_seconds)
        record = CanaryRecord(
            step=record.step,
            started_at=ledger.timestamp(state.now),
            due_at=ledger.timestamp(state.now + timedelta(seconds=hold)),
            start=counts,
        )
        _write(state, dep, record)
        state.event(
            "Normal",
            EventReason.CanaryStepStarted,
            f"revision {candidate}: {where} started: {share:g}% of the serving traffic "
            f"({canary_traffic.how(mode, dep.ready_replicas, stable_dep.ready_replicas)}), "
            f"judged in {hold:g} s",
        )
        state.canary_status = status.model_copy(
            update={"started_at": record.started_at, "due_at": record.due_at}
        )
        state.after(hold)
        return Outcome("Canary", f"revision {candidate}: {where}: holding", ConditionReason.Canary)
    due = parse_time(record.due_at)
    if due is not None and state.now < due:
        state.after((due - state.now).total_seconds())
        return Outcome(
            "Canary",
            f"revision {candidate}: {where}: holding until {record.due_at}",
            ConditionReason.Canary,
        )
    counts = _read(state, pods)
    if counts is None:
        state.after(SCRAPE_RETRY_SECONDS)
        return Outcome("Canary", f"revision {candidate}: {where}: judging", ConditionReason.Canary)
    started = parse_time(record.started_at)
    seconds = max(state.elapsed(started), 1e-3)
    judged = _judge(
        vd,
        canary,
        record,
        counts,
        candidate=candidate,
        stable=stable,
        seconds=seconds,
        observed=state.observed,
    )
    state.canary_status = status.model_copy(
        update={
            "candidate": _figures(candidate, judged.candidate),
            "stable": _figures(stable, judged.stable),
            "last_judgement": [r[:1024] for r in judged.reasons()[:16]],
        }
    )
    return _decide(
        state, vd, canary, record, judged, dep=dep, candidate=candidate, stable=stable, where=where
    )


def _decide(
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
) -> Outcome | None:
    if judged.decision == "Failed":
        failed = "; ".join(f.text for f in judged.failed_figures)
        state.decide(
            GateRecord(
                revision=candidate,
                outcome="Failed",
                reasons=[f"{where} failed: {failed}", *judged.reasons()[1:]],
                baseline_revision=stable,
            ),
            None,  # its Event names the failed figure, below
        )
        state.event("Warning", EventReason.CanaryFailed, f"revision {candidate}: {where}: {failed}")
        _leave(state, vd, canary, candidate, stable)
        return None
    if judged.decision == "Passed":
        last = record.step + 1 >= len(canary.steps)
        state.event(
            "Normal",
            EventReason.CanaryPassed if last else EventReason.CanaryStepPassed,
            f"revision {candidate}: {where} passed ({judged.candidate.requests} candidate and "
            f"{judged.stable.requests} stable requests)" + ("; promoting" if last else ""),
        )
        if last:
            _write(state, dep, CanaryRecord(step=record.step, passed=True))
            return None
        _write(state, dep, record.next_step())
        state.after(0.0)
        return Outcome("Canary", f"revision {candidate}: {where} passed", ConditionReason.Canary)
    why = "too few requests" if not judged.enough_requests else "figures undecided"
    counts = f"{judged.candidate.requests} candidate, {judged.stable.requests} stable requests"
    if record.extensions < canary.analysis.max_extensions:
        hold = state.scaled(canary.steps[record.step].hold_seconds)
        due = parse_time(record.due_at) or state.now
        later = ledger.timestamp(max(due, state.now) + timedelta(seconds=hold))
        _write(state, dep, record.extended(later))
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
    _leave(state, vd, canary, candidate, stable)
    return None


def _leave(
    state: Pass, vd: VLLMDeployment, canary: CanarySpec, candidate: str, stable: str
) -> None:
    """Traffic back to the stable revision in this pass."""
    state.canary_traffic = False
    canary_traffic.restore(state, vd, canary.traffic.mode, stable, candidate)


def settle(state: Pass, vd: VLLMDeployment, stable: str | None) -> None:
    """After the steps of a pass: traffic a canary no longer holds goes back to the stable.

    Covers every way out of a canary (a failure, an abort, a new spec, a rejected or
    abandoned candidate) without each path knowing about it.
    """
    if stable is None:
        return
    if state.serving != stable and state.serving is not None:
        # Promoted in this pass: the serving Service now selects the candidate, so the
        # route's candidate backend (the same pods) goes back into the Service's.
        canary_traffic.restore_route(state, vd, f"revision {state.serving}, promoted")
        return
    if state.canary_traffic:
        return
    mode = vd.spec.rollout.canary.traffic.mode if vd.spec.rollout.canary is not None else None
    canary_traffic.restore(state, vd, mode, stable, None)


def may_remove(state: Pass, vd: VLLMDeployment, candidate: str) -> bool:
    """A candidate that served live traffic is deleted only once no new request reaches it:
    the serving traffic is back on the stable (as the cluster shows it), for DRAIN_SECONDS
    since its verdict. Requeues the pass when not yet."""
    dep = state.observed.deployment_of(candidate)
    if dep is None or dep.canary is None:
        return True
    if canary_traffic.still_shared(state, vd):
        state.after(0.5)
        return False
    decided = state.decision(candidate)
    since = parse_time(decided.finished_at) if decided is not None else None
    left = DRAIN_SECONDS - state.elapsed(since)
    if since is not None and left > 0:
        state.after(left)
        return False
    return True


def draining(state: Pass, vd: VLLMDeployment) -> set[str]:
    """Revisions with a canary record kept while the cluster still shows the serving traffic
    shared: an abandoned candidate (a new spec mid-canary) goes once no new request can
    reach it."""
    if not canary_traffic.still_shared(state, vd):
        return set()
    return {d.revision for d in state.observed.deployments if d.canary is not None}


def scraped_pods(observed: Observed, candidate: str, stable: str) -> list[PodView]:
    """The Ready server pods of both revisions: those the serving traffic reaches."""
    return [
        p
        for revision in (candidate, stable)
        for p in observed.pods_of_revision(revision)
        if p.ready and p.ip is not None
    ]


def scrape_targets(observed: Observed, now: datetime) -> list[PodView]:
    """What the shell must read before planning: the pods of both revisions when a canary
    step starts (no start counts yet) or is due. Empty otherwise, so a pass at rest, or in
    the middle of a step, reads nothing."""
    serving = observed.service(names.serving_service_name(observed.name))
    stable = serving.revision if serving is not None else None
    if stable is None:
        return []
    for dep in observed.deployments:
        if dep.role != labels.ROLE_CANDIDATE or dep.deleting or dep.revision == stable:
            continue
        record = record_of(dep)
        if record is None or record.passed:
            continue
        when = parse_time(record.due_at)
        if record.started_at is None or when is None or now >= when:
            return scraped_pods(observed, dep.revision, stable)
    return []


def _read(state: Pass, pods: list[PodView]) -> dict[str, PodCounts] | None:
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


def _judge(
    vd: VLLMDeployment,
    canary: CanarySpec,
    record: CanaryRecord,
    counts: Mapping[str, PodCounts],
    *,
    candidate: str,
    stable: str,
    seconds: float,
    observed: Observed,
) -> StepJudgement:
    deltas = step_deltas(record.start, counts)
    ours = {p.name for p in observed.pods_of_revision(candidate)}
    theirs = {p.name for p in observed.pods_of_revision(stable)}
    candidate_deltas: dict[str, PodDelta] = {p: d for p, d in deltas.items() if p in ours}
    stable_deltas: dict[str, PodDelta] = {p: d for p, d in deltas.items() if p in theirs}
    return judge_step(
        canary.analysis,
        candidate_deltas,
        stable_deltas,
        seconds,
        gate_slo=vd.spec.gate.thresholds.slo,
        pod_load=canary_traffic.pod_load_ratio(
            canary.traffic.mode,
            canary.steps[record.step].weight,
            len(candidate_deltas),
            len(stable_deltas),
        ),
    )


def _write(state: Pass, dep: DeploymentView, record: CanaryRecord) -> None:
    text = record.to_annotation()
    if dep.canary != text:
        state.actions.append(
            Patch(
                "Deployment",
                dep.name,
                {"metadata": {"annotations": {labels.CANARY_ANNOTATION: text}}},
            )
        )


def _figures(revision: str, live: LiveFigures) -> CanaryFigures:
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


def _kept(state: Pass, side: str, record: CanaryRecord) -> CanaryFigures | None:
    """The figures of the last judged step, carried from the previous status."""
    before = state.previous.canary
    if before is None:
        return None
    kept = before.candidate if side == "candidate" else before.stable
    return kept if isinstance(kept, CanaryFigures) else None


def _kept_reasons(state: Pass, record: CanaryRecord) -> list[str]:
    before = state.previous.canary
    return list(before.last_judgement) if before is not None else []
