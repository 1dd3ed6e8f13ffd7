"""The canary phase: steps of live traffic on a candidate that passed its gate. Pure.

A candidate whose gate Passed, under ``rollout.canary``, is not promoted at once. For each
step (a share of the serving traffic held for ``holdSeconds``):

    Scaling  -> the candidate's pods for the step's share are Ready (``traffic``),
                then the serving traffic is shared (replicas: the serving Service selects
                both revisions' pods; gatewayAPI: the HTTPRoute's weights)
    Started  -> the shell reads every pod's /metrics; the counts, the start time and the
                time the step is due go into the record on the candidate's Deployment
    Holding  -> until due, the pods read every ``analysis.intervalSeconds``: the step's
                counts grow by each pod's ``increase()`` since its last read (a reset
                loses nothing); a clear breach (``analysis.early_breach``) fails at once
    Judging  -> the shell reads /metrics again; ``analysis.judge_step`` on the step's counts:
                Passed  -> the next step (the last: promotion, as without a canary)
                Failed  -> a Failed verdict naming the figures; traffic back to the stable in
                           the same pass; the candidate is removed once no new connection
                           can reach it (``may_remove``)
                Waiting -> held another holdSeconds, up to ``maxExtensions``; then an
                           Inconclusive verdict (``rollout.onInconclusive`` decides) and the
                           traffic goes back

In any state, ``signals`` fail the step: a candidate pod's server container restarted or
OOM-killed since the step started, a candidate pod NotReady for over
``signals.NOT_READY_SECONDS``, or no progress (pods Ready, route, reads) for
``progressDeadlineSeconds``; the traffic goes back as for a failed figure.

The promote and abort annotations work as before: a person's verdict ends the canary (an
abort sends the traffic back like a failure). Everything a pass needs is in the cluster
(``record``), so a restarted operator judges the step it finds at the time it finds.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from vllm_operator.api.canary import CanaryFigures, CanarySpec, CanaryStatus
from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.status import GateRecord
from vllm_operator.api.text import EVENT_CHARS, clip
from vllm_operator.render import labels, names
from vllm_operator.rollout import ledger
from vllm_operator.rollout.canary import signals, steps
from vllm_operator.rollout.canary import traffic as canary_traffic
from vllm_operator.rollout.canary.record import CanaryRecord
from vllm_operator.rollout.canary.traffic import candidate_replicas
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
    if record.entered_at is None:
        record = dataclasses.replace(record, entered_at=ledger.timestamp(state.now))
    steps.write(state, dep, record)  # from the first pass on: the shell reads the pods by it
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
    step_ = steps.Step(vd, canary, record, dep, candidate, stable, made)
    where = step_.where
    died = _failures(observed, dep, record)
    if record.started_at is not None and died:
        return steps.fail(state, step_, "; ".join(died))
    if dep.replicas != want or dep.ready_replicas < want:
        state.canary_traffic = record.step > 0 or canary_traffic.is_shared(state, vd, stable)
        ready = f"{dep.ready_replicas}/{want} candidate {_unit(dep)} Ready"
        limit = signals.NOT_READY_SECONDS if record.started_at is not None else None
        return steps.stalled(state, step_, ready, 1.0, limit)
    state.canary_traffic = True
    shifted = canary_traffic.ensure_shared(state, vd, stable, step.weight)
    if isinstance(shifted, str):
        return steps.stalled(state, step_, shifted, 5.0)  # the route may appear or be fixed
    if not shifted:
        state.after(0.0)  # applied this pass; the step starts once the cache shows it
        return Outcome(
            "Canary", f"revision {candidate}: {where}: shifting traffic", ConditionReason.Canary
        )
    pods = scraped_pods(observed, candidate, stable)
    if record.started_at is None:
        counts = steps.read(state, pods)
        if counts is None:
            return steps.stalled(
                state, step_, "reading the pods' metrics", steps.SCRAPE_RETRY_SECONDS
            )
        hold = state.scaled(step.hold_seconds)
        record = dataclasses.replace(
            record,
            started_at=ledger.timestamp(state.now),
            due_at=ledger.timestamp(state.now + timedelta(seconds=hold)),
        )
        record = steps.after_read(state, canary, record, counts)
        steps.write(state, dep, record)
        stable_ready = stable_dep.ready_replicas
        state.event(
            "Normal",
            EventReason.CanaryStepStarted,
            clip(
                f"revision {candidate}: {where} started "
                f"({canary_traffic.how(mode, dep.ready_replicas, stable_ready, _unit(dep))}), "
                f"judged in {hold:g} s",
                EVENT_CHARS,
            ),
        )
        state.canary_status = status.model_copy(
            update={"started_at": record.started_at, "due_at": record.due_at}
        )
        state.after(min(hold, state.scaled(canary.analysis.interval_seconds)))
        return Outcome("Canary", f"revision {candidate}: {where}: holding", ConditionReason.Canary)
    return steps.hold(state, dataclasses.replace(step_, record=record), status, pods)


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


def _unit(dep: DeploymentView) -> str:
    """What one replica of the candidate is: a pod, or (a LeaderWorkerSet) a group."""
    return "groups" if dep.kind == "LeaderWorkerSet" else "pods"


def _failures(observed: Observed, dep: DeploymentView, record: CanaryRecord) -> list[str]:
    """Why the candidate failed since the step started: a server restarted, and for a
    multi-node candidate a group recreated (``signals.group_failures``)."""
    pods = observed.pods_of_revision(dep.revision)
    died = signals.server_failures(pods, record.counts)
    since = parse_time(record.started_at)
    if dep.kind == "LeaderWorkerSet" and since is not None:
        died += signals.group_failures(dep.name, pods, record.counts, since)
    return died


def scraped_pods(observed: Observed, candidate: str, stable: str) -> list[PodView]:
    """The Ready server pods of both revisions: those the serving traffic reaches (of a
    multi-node revision, its leaders: the workers serve no HTTP and export no metrics)."""
    return [
        p
        for revision in (candidate, stable)
        for p in observed.pods_of_revision(revision)
        if p.ready and p.ip is not None and p.component != labels.COMPONENT_WORKER
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
        read = parse_time(record.next_read_at)
        if record.started_at is None or when is None or now >= when:
            return scraped_pods(observed, dep.revision, stable)
        if read is not None and now >= read:
            return scraped_pods(observed, dep.revision, stable)
    return []


def last_read_at(observed: Observed) -> datetime | None:
    """When the step under way last read every pod (its record's ``progressAt``); None
    before its first read. A Prometheus read looks at what was scraped since then, so a
    counter reset in between loses nothing (``analysis.prometheus``)."""
    for dep in observed.deployments:
        if dep.role != labels.ROLE_CANDIDATE or dep.deleting:
            continue
        record = record_of(dep)
        if record is not None and record.last and not record.passed:
            return parse_time(record.progress_at)
    return None


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
