"""A Ray group (vLLM 0.11.0) on the embedded cluster: the rendered Ray scripts run for real.

vLLM 0.10.2 and 0.11.0 span nodes through Ray (``engine.ray_group``): the leader runs the
Ray head, waits until the group's nodes are alive, then ``vllm serve ...
--distributed-executor-backend ray``; each worker waits for the head's port and execs
``ray start --address=<leader>:6379 --block``. The scripts run unchanged under ``/bin/sh``;
the simulator stands in for ``ray``, ``import ray`` and ``vllm`` as a vLLM image has them
(``sim.ray_cluster``), and the kubelet resolves the leader's DNS name to the leader pod's
own loopback address (``devcluster.pod_dns``), so every group dials port 6379 as Ray does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from vllm_operator.engine import ray_group
from vllm_operator.render import labels

from .harness import Rollout, resource
from .test_multinode import LWS_API, LWS_CRD, TIMEOUT, group_pods, kill_pod_processes


def ray_group_spec(version: str) -> dict[str, Any]:
    """A 2 x 1-GPU revision of a Ray release (TP 1 x PP 2 = 2 nodes x 1 GPU)."""
    return resource(
        image=f"vllm/vllm-openai:v{version}",
        engine={"tensorParallelSize": 1, "extraArgs": ["--pipeline-parallel-size", "2"]},
        resources={"gpus": 1, "nodes": 2},
    )


@pytest.fixture
def groups(tmp_path: Path) -> Iterator[Rollout]:
    r = Rollout(tmp_path, crds=(LWS_CRD,), multi_node=True)
    r.start_operator()
    yield r
    r.close()


def _log(r: Rollout, pod: str) -> str:
    logs = r.workdir / "kubelet" / "default" / pod / "logs"
    return "".join(p.read_text(errors="replace") for p in sorted(logs.glob("*.log")))


@pytest.mark.parametrize("version", ["0.11.0", "0.10.2"])
def test_a_ray_group_becomes_ready_serves_and_ends_with_a_lost_worker(
    groups: Rollout, version: str
) -> None:
    r = groups
    r.apply(ray_group_spec(version))
    status = r.wait_phase("Serving", gate="Passed", timeout=TIMEOUT)
    revision = status["stable"]["revision"]
    (lws,) = r.objects(LWS_API, "leaderworkersets")
    assert lws["metadata"]["labels"][labels.REVISION_LABEL] == revision
    name = lws["metadata"]["name"]
    pods = group_pods(r, name)
    assert sorted(pods) == [f"{name}-0", f"{name}-0-1"]
    # The rendered Ray scripts ran: the leader's head, the worker's `ray start --block`.
    leader, worker = pods[f"{name}-0"], pods[f"{name}-0-1"]
    assert leader["spec"]["containers"][0]["command"] == ray_group.leader_command()
    assert worker["spec"]["containers"][0]["command"] == ray_group.worker_command()
    assert "vllm-ray-leader: 2/2 Ray nodes alive" in _log(r, f"{name}-0")
    assert "joined the Ray cluster at 127." in _log(r, f"{name}-0-1")
    address = r.wait(r.service_address, what="the serving Service's proxy")
    assert httpx.get(f"http://{address}/health", timeout=10).status_code == 200
    history = len(status.get("history") or [])
    before = {n: p["metadata"]["uid"] for n, p in pods.items()}

    # A Ray worker lost mid-serve: the engine's Ray actors die with it, the leader's vLLM
    # exits, and the LeaderWorkerSet recreates the whole group.
    assert kill_pod_processes(r, f"{name}-0-1") >= 1

    def recreated() -> bool:
        now = group_pods(r, name)
        return sorted(now) == sorted(before) and all(
            now[n]["metadata"]["uid"] != uid for n, uid in before.items()
        )

    r.wait(
        lambda: "a Ray node left: its actors died and the engine fails" in _log(r, f"{name}-0"),
        TIMEOUT,
        "the leader's engine failing with its lost Ray node",
    )
    r.wait(recreated, TIMEOUT, "the whole Ray group recreated")
    r.wait(
        lambda: (
            (r.cluster.get(LWS_API, "leaderworkersets", name).get("status") or {}).get(
                "readyReplicas"
            )
            == 1
        ),
        TIMEOUT,
        "the new Ray group Ready",
    )
    after = r.wait_phase("Serving", timeout=TIMEOUT)
    assert after["stable"]["revision"] == revision
    assert len(after.get("history") or []) == history
    assert r.serving_revision() == revision
