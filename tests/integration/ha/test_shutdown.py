"""SIGTERM with a reconcile in flight, on a real process: the reconcile finishes, then the
Lease is released, then the process exits 0.

The embedded API holds the operator's create of the candidate Deployment for a while (a
reaction that delays the request, then lets the API serve it), and SIGTERM arrives while
the request is held. The store's single resourceVersion counter orders the two writes: the
Deployment is stored before the Lease is released.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from typing import Any

import kmock
from rollout.harness import resource

from devcluster import DevCluster
from vllm_operator.render import labels

from .operators import Replicas

HOLD_SECONDS = 2.0


def test_sigterm_finishes_the_reconcile_in_flight_then_releases_the_lease(
    cluster: DevCluster, replicas: Replicas
) -> None:
    held = threading.Event()

    async def hold(request: Any) -> Any:
        held.set()
        await asyncio.sleep(HOLD_SECONDS)
        return StopIteration  # not a response: the API serves the create as usual

    replicas.start("op-a", "--shutdown-grace-seconds=15")
    assert replicas.wait_leader() == "op-a"
    replicas.start("op-b")
    assert cluster.server is not None
    cluster.server[kmock.resource("apps", "v1", "deployments"), "post"] << hold
    cluster.create(resource())
    assert held.wait(30), replicas.logs()
    replicas.kill("op-a", signal.SIGTERM)
    signalled = time.monotonic()
    assert replicas.wait_exit("op-a", timeout=20) == 0, replicas.logs()
    took = time.monotonic() - signalled
    assert took < 15, took

    (deployment,) = cluster.list(
        "apps/v1", "deployments", "default", label_selector=f"{labels.DEPLOYMENT_LABEL}=qwen"
    )
    stored_at = int(deployment["metadata"]["resourceVersion"])
    released = [
        int(v["metadata"]["resourceVersion"])
        for v in cluster.history("coordination.k8s.io/v1", "leases", "vllm-operator")
        if not v["spec"].get("holderIdentity")
    ]
    assert released, "the Lease was never released"
    assert stored_at < released[0]  # the reconcile's write landed first
    log = replicas.log("op-a")
    assert "released Lease" in log
    assert "were cancelled" not in log
    assert replicas.wait_leader(other_than="op-a", timeout=10) == "op-b"
