"""What fails a canary step besides its figures: the candidate's server dying, and time. Pure.

vLLM's counters see only the requests a live server answered. A crash, an OOM kill or a
restart of the server container resets them and loses the requests in flight; a pod that
goes NotReady leaves the Service's endpoints and its figures with it. So a step fails at
once when a candidate pod's *server* container restarted since the pod's first read in the
step (its restart count, from the pod's status: init containers and sidecars do not count),
naming an OOM kill when the kubelet says so. A candidate pod that is NotReady holds the step
(a short blip: the step is judged later, on counts that still hold everything) for at most
``NOT_READY_SECONDS`` since the step's last complete read (at most one analysis interval
before the pod went NotReady); longer, the step fails.

A multi-node candidate (a LeaderWorkerSet) is a group per replica, and the step's counts
are its leaders' (the only pods that serve and export metrics). A group cannot lose a
member: LeaderWorkerSet recreates the whole group (``RecreateGroupOnPodRestart``), its pods
under the same names, so a leader's restart count says nothing of it. ``group_failures``
fails the step at once instead, as for a crashed server: a leader read in the step that is
gone, a member of a candidate group whose server started after the step began (its group
was recreated), or a worker whose server restarted (the recreation under way).

And nothing may hold shared traffic forever: a step that makes no progress (its pods never
Ready, its route missing, its pods' metrics unreadable) for ``progressDeadlineSeconds``
since it was entered or since every pod was last read, fails, and the traffic goes back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from vllm_operator.render import labels
from vllm_operator.rollout.canary.metrics import PodCounts
from vllm_operator.rollout.canary.record import CanaryRecord
from vllm_operator.rollout.views import PodView, parse_time

NOT_READY_SECONDS = 60.0
"""Longest a candidate pod of a started step may be NotReady before the step fails (scaled
like holdSeconds): long enough for a readiness probe's blip, far shorter than a restart of
vLLM (which fails the step anyway)."""
OOM_REASON = "OOMKilled"


def server_failures(pods: Iterable[PodView], counts: Mapping[str, PodCounts]) -> list[str]:
    """Why each candidate pod failed during the step: its server container restarted (or
    was OOM-killed) since the pod's first read of the step. Empty when none did."""
    out: list[str] = []
    for pod in pods:
        first = counts.get(pod.name)
        server = pod.server
        if first is None or server is None:
            continue
        killed = OOM_REASON in (server.last_reason, server.terminated_reason)
        if pod.restarts <= first.restarts and server.terminated_reason != OOM_REASON:
            continue
        how = "was OOM-killed" if killed else "restarted"
        detail = f"restarts {first.restarts} -> {pod.restarts}"
        if server.last_exit_code is not None:
            detail += f", last exit code {server.last_exit_code}"
        if server.last_reason and not killed:
            detail += f" ({server.last_reason})"
        out.append(f"candidate pod {pod.name}: its server container {how} ({detail})")
    return out


def group_failures(
    lws: str, pods: Iterable[PodView], counts: Mapping[str, PodCounts], since: datetime
) -> list[str]:
    """Why a group of the candidate LeaderWorkerSet ``lws`` failed during the step begun at
    ``since`` (the step's counts are keyed by pod name: its leaders are ``<lws>-<group>``).
    A leader's own restart is ``server_failures``'s to name, not repeated here."""
    out: list[str] = []
    by_name = {p.name: p for p in pods}
    prefix = f"{lws}-"
    for name in sorted(n for n in counts if n.startswith(prefix) and n not in by_name):
        out.append(f"candidate leader {name} is gone (its group is being recreated)")
    for pod in sorted(by_name.values(), key=lambda p: p.name):
        server = pod.server
        first = counts.get(pod.name)
        if server is None or (first is not None and pod.restarts > first.restarts):
            continue
        worker = pod.component == labels.COMPONENT_WORKER
        if server.started_at is not None and server.started_at > since:
            out.append(
                f"candidate pod {pod.name}: started after the step began (its group was "
                "recreated: a member was lost)"
            )
        elif worker and pod.restarts > 0:
            out.append(
                f"candidate worker {pod.name}: its server container restarted (restarts "
                f"{pod.restarts}): its group is recreated"
            )
    return out


def stalled_for(record: CanaryRecord, now: datetime) -> float:
    """Seconds since the step last made progress (entered, or every pod read)."""
    marks = [parse_time(record.progress_at), parse_time(record.entered_at)]
    latest = max((m for m in marks if m is not None), default=None)
    return 0.0 if latest is None else max((now - latest).total_seconds(), 0.0)
