"""Rendered vLLM pods run the simulator through the real entrypoint: rendering bugs show."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
import yaml

from devcluster import DevCluster
from devcluster.kubelet import Kubelet
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.api.summary import BenchSummary
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import (
    render_candidate_service,
    render_deployment,
    render_serving_service,
)
from vllm_operator.render.job import render_job

from .helpers import condition, container_status, pods_of, status_of, wait

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "qwen3-30b-a3b-v0.17-throughput.yaml"


def _resource(name: str, fix: str) -> Any:
    cr = yaml.safe_load(EXAMPLE.read_text())
    cr = copy.deepcopy(cr)
    cr["metadata"]["name"] = name
    cr["spec"]["replicas"] = 1
    cr["spec"]["engine"]["libraryPathFix"] = fix
    cr["spec"]["engine"]["env"] = [{"name": "VLLMOP_SIM_TIME_SCALE", "value": "0.005"}]
    cr["spec"]["gate"] = {"iterations": 1, "concurrency": [1, 2], "suite": {"builtin": "none"}}
    return parse_vllm_deployment(cr)


def test_library_path_fix_decides_whether_017_starts(
    devcluster: DevCluster, kubelet: Kubelet
) -> None:
    # The kubelet gives 0.17 images their real LD_LIBRARY_PATH (CUDA toolkit included).
    fixed, broken = _resource("fixed", "auto"), _resource("broken", "none")
    for vd in (fixed, broken):
        devcluster.create(render_deployment(vd, plan_launch(vd.spec), "r1", 1))
    devcluster.create(render_serving_service(fixed, "r1"))

    wait(
        lambda: (
            status_of(devcluster, "apps/v1", "deployments", "fixed--r1").get("readyReplicas") == 1
        ),
        what="auto: the simulated 0.17 server is Ready",
    )
    address = kubelet.service_address("default", "fixed", 8000)
    models = httpx.get(f"http://{address}/v1/models", timeout=5).json()
    assert models["data"][0]["id"] == "qwen3-30b-a3b"  # --served-model-name from the render
    version = httpx.get(f"http://{address}/version", timeout=5).json()
    assert version["version"].startswith("0.17.0")  # VLLMOP_SIM_VERSION from the image tag

    def crashed() -> dict[str, Any] | None:
        pods = [p for p in pods_of(devcluster) if p["metadata"]["name"].startswith("broken-")]
        cs = container_status(pods[0]) if pods else {}
        return cs if cs.get("lastState", {}).get("terminated") else None

    cs = wait(crashed, what="none: the pod crashes")
    message = cs["lastState"]["terminated"]["message"]
    assert "CUBLAS_STATUS_INVALID_VALUE" in message
    assert cs["ready"] is False
    assert status_of(devcluster, "apps/v1", "deployments", "broken--r1").get("readyReplicas") == 0


def test_rendered_bench_job_measures_the_candidate(
    devcluster: DevCluster, kubelet: Kubelet
) -> None:
    vd = _resource("cand", "auto")
    devcluster.create(render_deployment(vd, plan_launch(vd.spec), "r1", 1))
    devcluster.create(render_candidate_service(vd, "r1"))
    wait(
        lambda: (
            status_of(devcluster, "apps/v1", "deployments", "cand--r1").get("readyReplicas") == 1
        ),
        what="candidate Ready",
    )
    job = render_job(vd, "r1", 1, image="ghcr.io/example/vllm-operator:0.1.0")
    devcluster.create(job)
    name = job["metadata"]["name"]
    wait(
        lambda: condition(status_of(devcluster, "batch/v1", "jobs", name), "Complete"),
        timeout=60,
        what="benchmark Job Complete",
    )
    (pod,) = pods_of(devcluster, **{"job-name": name})
    message = container_status(pod)["state"]["terminated"]["message"]
    summary = BenchSummary.model_validate_json(message)
    assert summary.model == "qwen3-30b-a3b"
    assert [f.prompt_class for f in summary.latency] == ["short", "medium", "long"]
    assert [c.concurrency for c in summary.concurrency] == [1, 2]
    assert summary.errors == {}
