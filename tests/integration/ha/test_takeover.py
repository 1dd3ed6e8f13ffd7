"""Two operator processes, one Lease: the leader is SIGKILLed in each rollout step.

The standby takes over, the rollout completes, and nothing is created twice (counted from
the embedded API's own change log, replayed by a watch from the first resourceVersion).
SIGTERM: the leader releases the Lease and exits 0, and the other takes over at once.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from rollout.harness import API, KubeletProcess, resource

from devcluster import DevCluster
from vllm_operator.render import labels

from .conftest import RUN_ENV
from .operators import Replicas

# Takeover within a lease and a retry period, a hand-over within one retry period: verdicts
# on measured time, in the timing phase, alone (conftest.py).
pytestmark = pytest.mark.timing

Obj = dict[str, Any]


def _status(cluster: DevCluster) -> Obj:
    try:
        return cluster.get(API, "vllmdeployments", "qwen").get("status") or {}
    except Exception:
        return {}


def _owned(cluster: DevCluster, api: str, plural: str) -> list[Obj]:
    selector = f"{labels.DEPLOYMENT_LABEL}=qwen"
    return cluster.list(api, plural, "default", label_selector=selector)


def _wait(what: str, predicate: Callable[[], Any], replicas: Replicas, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.02)
    raise TimeoutError(f"{what} not reached in {timeout}s\n{replicas.logs()}")


def _added(cluster: DevCluster, api: str, plural: str) -> Counter[str]:
    """How often each name was ADDED since the cluster started (its change log)."""
    added: Counter[str] = Counter()
    for event in cluster.watch(api, plural, "default", resource_version="1", timeout=1):
        obj = event.get("object") or {}
        if (
            event.get("type") == "ADDED"
            and obj.get("metadata", {}).get("labels", {}).get(labels.DEPLOYMENT_LABEL) == "qwen"
        ):
            added[obj["metadata"]["name"]] += 1
    return added


@pytest.mark.slow
def test_leader_killed_in_each_rollout_step_the_standby_completes_it(
    cluster: DevCluster, kubelet: KubeletProcess, replicas: Replicas
) -> None:
    replicas.start("op-1", env=RUN_ENV)
    replicas.start("op-2", env=RUN_ENV)
    replicas.wait_leader()
    cluster.create(resource(replicas=2, gate={"iterations": 3, "concurrency": [1, 4]}))

    steps: list[tuple[str, Callable[[], Any]]] = [
        ("candidate creating", lambda: _owned(cluster, "apps/v1", "deployments")),
        ("benchmarking", lambda: _owned(cluster, "batch/v1", "jobs")),
        ("promoting", lambda: _status(cluster).get("phase") == "Promoting"),
    ]
    spare = 3
    takeovers: list[float] = []
    for step, reached in steps:
        _wait(step, reached, replicas, timeout=60)
        leader = replicas.holder()
        phase = _status(cluster).get("phase")
        replicas.kill(leader)
        killed = time.monotonic()
        successor = replicas.wait_leader(other_than=leader, timeout=15)
        takeovers.append(time.monotonic() - killed)
        assert successor != leader
        replicas.start(f"op-{spare}", env=RUN_ENV)  # the Deployment replaces the dead pod
        spare += 1
        print(f"{step}: killed {leader} in phase {phase}; {successor} took over")

    final = _wait("Serving", lambda: _status(cluster).get("phase") == "Serving", replicas, 90)
    status = _status(cluster)
    assert final
    assert status["lastGate"]["outcome"] == "Passed"
    revision = status["stable"]["revision"]
    service = cluster.get("v1", "services", "qwen")
    assert service["spec"]["selector"][labels.REVISION_LABEL] == revision
    assert max(takeovers) < 3 + 0.5 + 3, takeovers  # lease + one retry period + slack

    # Nothing created twice: every name was ADDED once, and there was one gate, one Job.
    deployments = _added(cluster, "apps/v1", "deployments")
    services = _added(cluster, "v1", "services")
    jobs = _added(cluster, "batch/v1", "jobs")
    for kind, added in (("Deployment", deployments), ("Service", services), ("Job", jobs)):
        assert added, kind
        assert max(added.values()) == 1, (kind, added)
    assert len(jobs) == 1, jobs
    assert len(deployments) == 1, deployments
    reasons = Counter(e["reason"] for e in cluster.list("v1", "events", "default"))
    for reason in ("CandidateCreated", "BenchmarkStarted", "GatePassed", "Promoted"):
        assert reasons[reason] <= 1, reasons


def test_only_the_leader_reconciles_and_sigterm_hands_over_at_once(
    cluster: DevCluster, replicas: Replicas
) -> None:
    # Default-length lease: without the release the standby would wait 15 s.
    slow = Replicas(cluster, replicas.workdir / "slow", timings=())
    try:
        slow.start("op-a")
        first = slow.wait_leader()
        slow.start("op-b")
        _wait("standby", lambda: "standing by" in slow.log("op-b"), slow, 30)
        other = "op-b" if first == "op-a" else "op-a"
        cluster.create(resource())  # no kubelet: the candidate just never gets Ready
        _wait("a candidate", lambda: _owned(cluster, "apps/v1", "deployments"), slow, 30)
        _wait("reconciled", lambda: slow.reconciliations(first) >= 1, slow, 10)
        assert slow.reconciliations(other) == 0  # the standby watched, but did not reconcile
        assert (
            slow.metric(first, "vllm_operator_leader"),
            slow.metric(other, "vllm_operator_leader"),
        ) == (1, 0)
        slow.kill(first, signal.SIGTERM)
        stopped = time.monotonic()
        assert slow.wait_exit(first, timeout=25) == 0
        assert slow.wait_leader(other_than=first, timeout=10) == other
        took = time.monotonic() - stopped
        assert took < 2 + 2, took  # one retry period (2 s) and the exit, not 15 s
        assert "released Lease" in slow.log(first)
        lease = slow.lease()["spec"]
        assert lease["leaseTransitions"] == 1
        # The new leader reconciles what its watches saw, without any new event.
        _wait("standby reconciles", lambda: slow.reconciliations(other) >= 1, slow, 10)
        assert slow.metric(other, "vllm_operator_leader") == 1
    finally:
        slow.stop_all()


def test_a_frozen_leader_wakes_up_fenced_and_does_not_fight_back(
    cluster: DevCluster, replicas: Replicas
) -> None:
    replicas.start("op-a", env=RUN_ENV)
    assert replicas.wait_leader() == "op-a"
    replicas.start("op-b", env=RUN_ENV)
    _wait("standby", lambda: "standing by" in replicas.log("op-b"), replicas, 30)
    cluster.create(resource())  # no kubelet: the candidate just never gets Ready
    _wait("reconciled", lambda: replicas.reconciliations("op-a") >= 1, replicas, 10)
    replicas.kill("op-a", signal.SIGSTOP)  # a GC pause, a stalled node: not dead
    try:
        assert replicas.wait_leader(other_than="op-a", timeout=10) == "op-b"
        _wait("b reconciles", lambda: replicas.reconciliations("op-b") >= 1, replicas, 10)
    finally:
        replicas.kill("op-a", signal.SIGCONT)
    _wait("a sees it lost", lambda: "stopped leading" in replicas.log("op-a"), replicas, 10)
    before = replicas.reconciliations("op-a")
    time.sleep(2.5)  # a window longer than one resync period (2 s) of both replicas
    assert replicas.reconciliations("op-a") == before  # its resync ran, its guard dropped it
    assert replicas.holder() == "op-b"
    assert replicas.lease()["spec"]["leaseTransitions"] == 1
