"""The embedded cluster runs a rendered 2-node LeaderWorkerSet: the simulator plays the group.

The operator's own render (``render_leaderworkerset``) goes to a DevCluster serving the
vendored LWS v0.10.0 CRD; the kubelet's LWS controller makes the leader and worker pods
(LWS labels and env), the simulator runs the rendered leader and worker commands (the
worker joins the leader over loopback), and the set's status is what LWS writes.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from builders import minimal_spec, resource
from devcluster import DevCluster
from devcluster import lws_controller as lc
from devcluster.kubelet import Kubelet
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import render_candidate_service, revision_hash
from vllm_operator.render.leaderworkerset import render_leaderworkerset

from .helpers import condition, container_status, pods_of, wait

ROOT = Path(__file__).resolve().parents[3]
LWS_CRD = (
    ROOT / "tests" / "unit" / "render" / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
)
LWS_API = "leaderworkerset.x-k8s.io/v1"
TIMEOUT = 90.0


def two_node_revision() -> tuple[dict[str, Any], Any, str]:
    """The operator's LeaderWorkerSet for a 2 x 1-GPU revision (TP 1 x PP 2 = 2 nodes x 1)."""
    spec = minimal_spec(image="vllm/vllm-openai:v0.22.0", tensorParallelSize=1)
    spec["engine"]["extraArgs"] = ["--pipeline-parallel-size", "2"]
    spec["engine"]["env"] = [{"name": "VLLMOP_SIM_TIME_SCALE", "value": "0.005"}]
    spec["resources"] = {"gpus": 1, "nodes": 2}
    vd = parse_vllm_deployment(resource(spec, name="big", namespace="default"))
    launch = plan_launch(vd.spec)
    revision = revision_hash(vd.spec, launch)
    return render_leaderworkerset(vd, launch, revision, 1), vd, revision


@pytest.fixture
def lws_cluster(make_kubelet: Callable[..., Kubelet], devcluster: DevCluster) -> Kubelet:
    # The kubelet starts before LWS is installed and plays sets once the CRD is served.
    kubelet = make_kubelet()
    devcluster.create(yaml.safe_load(LWS_CRD.read_text().split("\n---\n", 1)[1]))
    return kubelet


def lws_status(cluster: DevCluster, name: str) -> dict[str, Any]:
    return cluster.get(LWS_API, "leaderworkersets", name).get("status") or {}


def group_ready(cluster: DevCluster, name: str) -> bool:
    status = lws_status(cluster, name)
    available = condition(status, "Available") or {}
    return status.get("readyReplicas") == 1 and available.get("status") == "True"


def test_a_rendered_two_node_group_serves_and_a_killed_worker_recreates_it(
    devcluster: DevCluster, lws_cluster: Kubelet
) -> None:
    lws, vd, revision = two_node_revision()
    name = lws["metadata"]["name"]
    wait(lambda: devcluster.create(lws), timeout=TIMEOUT, what="the LWS CRD is served")
    candidate = render_candidate_service(vd, revision)
    devcluster.create(candidate)
    svc, port = candidate["metadata"]["name"], candidate["spec"]["ports"][0]["port"]
    wait(lambda: group_ready(devcluster, name), timeout=TIMEOUT, what="the group is Ready")

    pods = {p["metadata"]["name"]: p for p in pods_of(devcluster, **{lc.NAME_LABEL: name})}
    assert sorted(pods) == [f"{name}-0", f"{name}-0-1"]
    leader, worker = pods[f"{name}-0"], pods[f"{name}-0-1"]
    assert leader["metadata"]["labels"][lc.WORKER_INDEX_LABEL] == "0"
    assert worker["metadata"]["labels"][lc.WORKER_INDEX_LABEL] == "1"
    env = {e["name"]: e.get("value") for e in worker["spec"]["containers"][0]["env"]}
    assert env["LWS_LEADER_ADDRESS"] == f"{name}-0.{name}.default"
    assert env["LWS_GROUP_SIZE"] == "2"
    # The worker ran the rendered worker command: it joined the leader, headless.
    log = lws_cluster.pod_log("default", f"{name}-0-1")
    assert "joined the group as node 1 of 2 (headless)" in log
    assert "worker node 1 joined (1 of 1)" in lws_cluster.pod_log("default", f"{name}-0")

    # The candidate Service (the gate's target) reaches the leader's API server only.
    address = lws_cluster.service_address("default", svc, port)
    assert address is not None
    models = httpx.get(f"http://{address}/v1/models", timeout=10).json()
    assert models["data"][0]["id"]
    status = lws_status(devcluster, name)
    assert status["replicas"] == 1
    assert status["hpaPodSelector"] == f"{lc.NAME_LABEL}={name},{lc.WORKER_INDEX_LABEL}=0"

    # Kill the worker's process mid-serve: the leader fails too, and LWS recreates the group.
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods.values()}
    worker_pid = lws_cluster.runtimes[("default", f"{name}-0-1")].pid
    assert worker_pid is not None
    os.killpg(worker_pid, signal.SIGKILL)

    def recreated() -> bool:
        now = {p["metadata"]["name"]: p for p in pods_of(devcluster, **{lc.NAME_LABEL: name})}
        fresh = sorted(now) == sorted(uids) and all(
            now[n]["metadata"]["uid"] != uids[n] for n in uids
        )
        return fresh and all(container_status(p).get("restartCount") == 0 for p in now.values())

    wait(recreated, timeout=TIMEOUT, what="both pods of the group recreated")
    wait(lambda: group_ready(devcluster, name), timeout=TIMEOUT, what="the new group is Ready")
    health = wait(
        lambda: httpx.get(f"http://{address}/health", timeout=10).status_code == 200,
        what="the new leader answers through the same Service",
    )
    assert health


def test_the_scale_subresource_scales_whole_groups_and_names_the_leaders(
    devcluster: DevCluster, lws_cluster: Kubelet
) -> None:
    lws, _, _ = two_node_revision()
    name = lws["metadata"]["name"]
    wait(lambda: devcluster.create(lws), timeout=TIMEOUT, what="the LWS CRD is served")
    wait(lambda: group_ready(devcluster, name), timeout=TIMEOUT, what="one group Ready")
    path = f"/apis/{LWS_API}/namespaces/default/leaderworkersets/{name}/scale"
    scale = devcluster.http.get(path).json()
    assert scale["spec"]["replicas"] == 1
    assert scale["status"]["selector"] == f"{lc.NAME_LABEL}={name},{lc.WORKER_INDEX_LABEL}=0"
    scale["spec"]["replicas"] = 2  # what an HPA does through the scale subresource
    assert devcluster.http.put(path, json=scale).status_code == 200

    def two_groups() -> bool:
        status = lws_status(devcluster, name)
        return status.get("readyReplicas") == 2 and status.get("replicas") == 2

    wait(two_groups, timeout=TIMEOUT, what="two groups Ready")
    pods = sorted(p["metadata"]["name"] for p in pods_of(devcluster, **{lc.NAME_LABEL: name}))
    assert pods == [f"{name}-0", f"{name}-0-1", f"{name}-1", f"{name}-1-1"]
    # Each group joined its own leader (one loopback address per leader, never shared).
    assert "worker node 1 joined (1 of 1)" in lws_cluster.pod_log("default", f"{name}-1")
    assert devcluster.http.get(path).json()["status"]["replicas"] == 2
