"""Which baseline a gate attempt measures against, and what its record says about it.

``gate.baseline.mode``:
- ``twin``: a replica of the stable revision starts with the candidate (``twin.py``) and the
  Job measures both; a twin not Ready within the progress deadline makes the gate an Error.
- ``stored``: the stable revision's summary from its own gate (``stored_summary``).
- ``auto``: the twin, started once the candidate's pods are scheduled (so on a cluster with
  GPUs for only one of them the twin never takes the candidate's), used when it is
  scheduled within ``twinWaitSeconds`` and Ready within the progress deadline; otherwise the
  twin is removed and the gate judges against the stored figures. No person is needed on a
  full GPU cluster, and the comparison is paired wherever GPUs allow it.

The choice is made once per attempt, when the candidate is Ready, and written on the
benchmark Job (``baseline-mode`` and ``baseline-reason`` annotations): every later pass, and
a restarted operator, judge that Job the same way and start no twin for it.

Fresh against settled (issue 19): a vLLM server ran ~10% slower than a settled one for
minutes of load on H200s (calibration runs aa3, aa5). A twin starts with the candidate, so
both are fresh; every other comparison is named in the record's reasons (``notes``): stored
figures always came from another run on another server, and a paired attempt can put a
server that served earlier attempts of this gate beside one that did not (a person's rerun
after Holding starts a new twin next to the measured candidate; a pod restarted mid-gate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.status import GateRecord
from vllm_operator.api.summary import BenchSummary
from vllm_operator.rollout import causes, figures, twin
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.status import Outcome
from vllm_operator.rollout.views import DeploymentView, JobView, PodView, parse_time

# What the H200 calibration measured, quoted where a comparison may be biased by it.
FRESH_SLOWER = "a fresh vLLM server ran ~10% slower than a settled one for minutes on H200s"


@dataclass(frozen=True)
class Fallback:
    """Mode auto gives up on the twin for this attempt: the stored figures, and why."""

    reason: str


@dataclass(frozen=True)
class Choice:
    """The baseline of one benchmark Job, as annotated on it."""

    mode: Literal["twin", "stored"]
    reason: str


def stored_summary(state: Pass, stable: str | None) -> BenchSummary | None:
    """The stable revision's stored benchmark: the baseline of a gate without a twin. Read
    from status where it still is (a status older than ``rollout.figures``, or figures not
    yet on the Deployment), else from the stable's Deployment under a digest status keeps."""
    if stable is None:
        return None
    sources: list[tuple[BenchSummary | None, str | None]] = []
    prev = state.previous.stable
    if prev is not None and prev.revision == stable:
        sources.append((prev.benchmark, prev.figures_digest))
    sources.extend(
        (entry.summary, entry.figures_digest)
        for entry in state.history
        if entry.revision == stable and entry.outcome == "Passed"
    )
    return figures.of_revision(state.observed, stable, sources)


def planted(state: Pass, stable: str | None) -> bool:
    """Whether the stable's Deployment holds figures that no digest status keeps matches
    (written by someone other than the operator): they are never used."""
    if stable is None or stored_summary(state, stable) is not None:
        return False
    dep = state.observed.deployment_of(stable)
    return dep is not None and dep.figures is not None


def figures_of(state: Pass, record: GateRecord) -> BenchSummary | None:
    """The figures a verdict judged: in its record while status keeps them, else on its
    revision's Deployment (a Passed revision's, under the record's digest)."""
    return figures.of_revision(
        state.observed, record.revision, [(record.summary, record.figures_digest)]
    )


def _scheduled(pods: Sequence[PodView]) -> int:
    return sum(1 for p in pods if p.node_name)


def candidate_scheduled(state: Pass, vd: VLLMDeployment, candidate: str) -> bool:
    """Whether every wanted candidate pod is bound to a node (holds its GPUs)."""
    dep = state.observed.deployment_of(candidate)
    want = vd.spec.rollout.candidate_replicas
    if dep is None or dep.deleting:
        return False
    if dep.ready_replicas >= want:
        return True
    return _scheduled(state.observed.pods_of_revision(candidate)) >= want


def keeps_twin(
    state: Pass, vd: VLLMDeployment, candidate: str, stable: str | None, job: JobView | None
) -> bool:
    """Whether this pass keeps (or starts) the twin for the gate on ``candidate``;
    ``job`` is the attempt's benchmark Job, if it exists (its annotation decided)."""
    if stable is None or not twin.wanted(state, vd, candidate, stable):
        return False
    mode = vd.spec.gate.baseline.mode
    if job is not None:
        return (job.baseline_mode or mode) == "twin"
    return mode == "twin" or candidate_scheduled(state, vd, candidate)


def await_twin(
    state: Pass, vd: VLLMDeployment, candidate: str, stable: str
) -> Outcome | Fallback | None:
    """None once the twin is Ready; else where it stands: waiting, or (mode twin) an Error
    past the deadline, or (mode auto) a fallback to the stored figures."""
    if vd.spec.gate.baseline.mode == "twin":
        return twin.wait(state, vd, candidate, stable)
    dep = twin.starting(state, vd, stable)
    if not isinstance(dep, DeploymentView):
        return dep
    want = vd.spec.rollout.candidate_replicas
    pods = state.observed.pods_of_twin(stable)
    scheduled = min(max(_scheduled(pods), dep.ready_replicas), want)
    cause = causes.pods_cause(pods)
    elapsed = state.elapsed(dep.started_at)
    wait_seconds = vd.spec.gate.baseline.twin_wait_seconds
    deadline_seconds = vd.spec.rollout.progress_deadline_seconds
    if scheduled < want:
        bound, seconds, what = state.scaled(wait_seconds), wait_seconds, "scheduled"
        counted = f"{scheduled}/{want} pods scheduled"
    else:
        bound, seconds, what = state.scaled(deadline_seconds), deadline_seconds, "Ready"
        counted = f"{dep.ready_replicas}/{want} Ready"
    detail = counted + (f"; {cause}" if cause else "")
    if elapsed < bound:
        state.after(bound - elapsed)
        return Outcome(
            "Progressing",
            f"waiting for the twin of stable revision {stable} to be {what} ({detail}); "
            f"gate.baseline.mode auto uses the stored baseline if it is not {what} within "
            f"{seconds} s",
            ConditionReason.TwinStarting,
        )
    return Fallback(
        f"gate.baseline.mode auto: the twin of stable revision {stable} was not {what} "
        f"within {seconds} s ({detail})"
    )


def choose(
    vd: VLLMDeployment,
    stable: str | None,
    with_twin: bool,
    stored: BenchSummary | None,
    fallback: Fallback | None,
    *,
    planted: bool = False,
) -> Choice:
    """The baseline of a new benchmark Job, and the words that say why."""
    mode = vd.spec.gate.baseline.mode
    if with_twin:
        assert stable is not None
        how = "scheduled and Ready" if mode == "auto" else "started with the candidate"
        return Choice(
            "twin",
            f"gate.baseline.mode {mode}: the twin of stable revision {stable}, {how}, "
            "measured in the same Job",
        )
    if stable is None:
        return Choice("stored", "no stable revision: absolute limits only")
    why = fallback.reason if fallback is not None else f"gate.baseline.mode {mode}"
    if stored is None and planted:
        return Choice(
            "stored",
            f"{why}; revision {stable}'s Deployment holds figures that do not match the digest "
            "in status (written by someone other than the operator), so they are not used: "
            "absolute limits only",
        )
    if stored is None:
        return Choice(
            "stored",
            f"{why}; revision {stable} has no stored figures (promoted by a person or with "
            "the gate disabled): absolute limits only",
        )
    return Choice("stored", f"{why}: revision {stable}'s stored figures from its own gate")


def announce(state: Pass, candidate: str, choice: Choice) -> None:
    """The Event of a fallback (the twin goes in this pass: ``twin.remove``)."""
    state.event(
        "Warning",
        EventReason.TwinUnavailable,
        f"revision {candidate}: the twin is removed and the gate runs without it: {choice.reason}",
    )


def _server_started(pods: Sequence[PodView]) -> datetime | None:
    """When the newest server process among ``pods`` started (None: unknown)."""
    starts = [c.started_at for p in pods for c in p.containers if c.started_at is not None]
    return max(starts) if starts else None


def _attempts_served(
    history: Sequence[GateRecord], candidate: str, attempt: int, since: datetime
) -> int:
    """Earlier benchmarked attempts on ``candidate`` that ended after ``since``."""
    served = 0
    for entry in history:
        measured = entry.summary is not None or entry.figures_digest is not None
        if entry.revision != candidate or not measured or entry.attempt is None:
            continue
        finished = parse_time(entry.finished_at)
        if entry.attempt < attempt and finished is not None and finished > since:
            served += 1
    return served


def notes(
    state: Pass,
    job: JobView,
    stable: str | None,
    *,
    paired: bool,
    stored: BenchSummary | None,
    reason: str,
) -> list[str]:
    """What the record's reasons must say about the baseline beside the gate's verdict."""
    if stable is None:
        return []
    if not paired:
        if stored is None:
            return [f"no baseline ({reason})"]
        where = stored.placement.node if stored.placement is not None else None
        on = f" on node {where}" if where else ""
        return [
            f"baseline measured earlier: {reason}, measured then{on}, not beside this "
            f"candidate's server, which started for this gate; {FRESH_SLOWER}, so server age "
            "and node count as the revision's"
        ]
    observed = state.observed
    cand = _server_started(observed.pods_of_revision(job.revision))
    base = _server_started(observed.pods_of_twin(stable))
    if cand is None or base is None:
        return []
    served_cand = _attempts_served(state.history, job.revision, job.attempt, cand)
    served_twin = _attempts_served(state.history, job.revision, job.attempt, base)
    if served_cand == served_twin:
        return []
    return [
        f"servers of different age: the candidate's server had served {served_cand} and "
        f"the twin's {served_twin} earlier gate attempt(s) of this revision (a twin "
        f"started again, or a restarted pod); {FRESH_SLOWER}, so part of a difference can "
        "be the servers' age"
    ]
