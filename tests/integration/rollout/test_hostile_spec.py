"""Resources the API accepts but the operator cannot run: InvalidSpec in status, no loop.

An affinity 300 levels deep once left the resource with an empty status, no Event and a
reconcile failing forever. Here it, a 30-digit integer and a planner that raises all end
in a status naming the problem, one Warning Event per generation, and a quiet operator.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from devcluster import DevCluster
from vllm_operator.config import OperatorConfig
from vllm_operator.handlers.caches import Caches
from vllm_operator.handlers.reconcile import Reconciler
from vllm_operator.kube.client import Kube, api_client_for
from vllm_operator.metrics import OperatorMetrics
from vllm_operator.rollout import Plan, Settings
from vllm_operator.rollout.observed import Observed

from .harness import API, CRD, Rollout, resource


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": "x"}
    for _ in range(levels):
        value = {"a": value}
    return value


def invalid_spec_events(cluster: DevCluster, name: str = "qwen") -> list[str]:
    return [
        e["message"]
        for e in cluster.list("v1", "events", "default")
        if e["reason"] == "InvalidSpec" and e["involvedObject"]["name"] == name
    ]


def stalled(status: dict[str, Any]) -> dict[str, Any] | None:
    for condition in status.get("conditions") or []:
        if condition["type"] == "Stalled" and condition["reason"] == "InvalidSpec":
            return dict(condition)
    return None


def test_deep_affinity_and_huge_integer_become_invalid_spec(rollout: Rollout) -> None:
    body = resource(scheduling={"affinity": nested(300)})
    rollout.apply(body)
    condition = rollout.wait(lambda: stalled(rollout.status()), 30, "InvalidSpec status")
    assert condition["message"].startswith("invalid spec: spec.scheduling.affinity.a.a")
    assert "deeper than 32 levels" in condition["message"]
    assert rollout.status()["phase"] == "Failed"
    assert rollout.names("apps/v1", "deployments") == []
    rollout.wait(lambda: len(invalid_spec_events(rollout.cluster)) == 1, 10, "one Event")

    # No hot loop: five more passes take at least one resync period, write nothing, count
    # no error and post no second Event. Of the passes counted from now, at most three
    # answer what happened before now (on a loaded machine they may all still be due): the
    # pass that wrote the InvalidSpec status, if it is still finishing; the pass that answers
    # that status write's own watch event (every event of the resource queues one); a resync
    # tick already due (a key running when it is added runs once more after, never twice at
    # once). The other two are resync ticks after now, one period apart.
    def passes() -> float:
        return rollout.prometheus.get_sample_value("vllm_operator_reconciliations_total") or 0

    version = rollout.get()["metadata"]["resourceVersion"]
    before, started = passes(), time.monotonic()
    rollout.wait(lambda: passes() >= before + 5, 30, "five passes")
    assert time.monotonic() - started >= 0.9 * rollout.config.resync_seconds
    assert rollout.get()["metadata"]["resourceVersion"] == version
    errors = [
        m
        for m in rollout.prometheus.collect()
        if m.name == "vllm_operator_reconcile_errors"
        for sample in m.samples
        if sample.name.endswith("_total") and sample.value
    ]
    assert errors == []
    assert len(invalid_spec_events(rollout.cluster)) == 1

    # A new generation with a 30-digit integer in the affinity: a new Event, naming it.
    huge: dict[str, Any] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10**30, "preference": {"matchExpressions": []}}
            ]
        }
    }
    huge["a"] = None  # a merge patch: null removes the deep part
    rollout.apply(resource(scheduling={"affinity": huge}))
    rollout.wait(lambda: len(invalid_spec_events(rollout.cluster)) == 2, 30, "second Event")
    field = (
        "spec.scheduling.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        "[0].weight"
    )
    (message,) = [m for m in invalid_spec_events(rollout.cluster) if field in m]
    assert f"{field}: is an integer outside the 64-bit range" in message
    assert "nested deeper" not in message
    assert rollout.names("apps/v1", "deployments") == []


def _raising_planner(observed: Observed, now: datetime, settings: Settings) -> Plan:
    raise ValueError("Maximum serialization depth exceeded")


def test_a_planner_exception_is_reported_in_status_once(tmp_path: Path) -> None:
    with DevCluster(crds=[CRD]) as cluster:
        cluster.create(resource())
        kube = Kube(api_client_for(cluster.url))
        metrics = OperatorMetrics(CollectorRegistry())
        reconciler = Reconciler(kube, OperatorConfig(), metrics, planner=_raising_planner)

        def reconcile() -> float | None:
            # What the watches would hold: the resource as stored now, no children yet.
            body = cluster.get(API, "vllmdeployments", "qwen")
            reconciler.caches = Caches.of(
                {"VLLMDeployment": [body], "Deployment": [], "Service": [], "Job": [], "Pod": []}
            )
            return asyncio.run(reconciler.reconcile("default", "qwen"))

        try:
            delays = [reconcile() for _ in range(3)]
        finally:
            kube.close()
        assert delays == [None, None, None]  # nothing asks to be retried
        status = cluster.get(API, "vllmdeployments", "qwen")["status"]
        assert status["phase"] == "Failed"
        condition = stalled(status)
        assert condition is not None
        assert "ValueError: Maximum serialization depth exceeded" in condition["message"]
        assert "vllm-operator render" in condition["message"]
        assert len(invalid_spec_events(cluster)) == 1
