"""Pure parts of the kubelet: path, port and Service-URL rewrites; controller plans."""

from __future__ import annotations

from pathlib import Path

from devcluster.kubelet_controllers import deployment_plan, job_plan, template_hash
from devcluster.kubelet_launch import (
    PathMap,
    expand_vars,
    rewrite_port,
    rewrite_service_urls,
)


def test_paths_map_only_whole_container_roots() -> None:
    paths = PathMap(
        {"/dev/termination-log": Path("/p/fs/dev/termination-log"), "/cache": Path("/p/c")}
    )
    assert paths.apply("/dev/termination-log") == "/p/fs/dev/termination-log"
    assert (
        paths.apply("--summary-path=/dev/termination-log")
        == "--summary-path=/p/fs/dev/termination-log"
    )
    assert paths.apply("/cache/vllm") == "/p/c/vllm"
    assert paths.apply("/cached") == "/cached"
    assert paths.apply("/usr/local/cuda/lib64:/cache/x") == "/usr/local/cuda/lib64:/p/c/x"


def test_service_urls_and_ports() -> None:
    def resolve(ns: str, name: str, port: int) -> str | None:
        return "127.0.0.1:4000" if (ns, name, port) == ("team", "m-candidate", 8000) else None

    for host in (
        "m-candidate",
        "m-candidate.team",
        "m-candidate.team.svc",
        "m-candidate.team.svc.cluster.local",
    ):
        assert (
            rewrite_service_urls(f"http://{host}:8000/v1", "team", resolve)
            == "http://127.0.0.1:4000/v1"
        )
    assert (
        rewrite_service_urls("http://m-candidate.other:8000", "team", resolve)
        == "http://m-candidate.other:8000"
    )
    assert rewrite_service_urls("http://m-candidate.team.example:8000", "team", resolve).endswith(
        "example:8000"
    )
    assert rewrite_port(["m", "--port", "8000"], 5) == (["m", "--port", "5"], 8000)
    assert rewrite_port(["--port=8000"], 5) == (["--port=5"], 8000)
    assert expand_vars("$(A)-$$(A)-$(B)", {"A": "x"}) == "x-$(A)-$(B)"


def _deploy(replicas: int, image: str = "a") -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "n", "uid": "u1", "generation": 3},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"image": image}]},
            },
        },
    }


def test_deployment_plan_creates_replaces_and_scales() -> None:
    plan = deployment_plan(_deploy(2), [], 0.0, suffix=iter("xy").__next__)
    thash = template_hash(_deploy(2)["spec"]["template"])  # type: ignore[index]
    assert [p["metadata"]["name"] for p in plan.create] == [f"d-{thash}-x", f"d-{thash}-y"]
    assert plan.create[0]["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert plan.status
    assert plan.status["observedGeneration"] == 3
    # A new template deletes the old pods first and creates nothing until they are gone.
    changed = deployment_plan(_deploy(2, "b"), plan.create, 1.0)
    assert sorted(changed.delete) == sorted(p["metadata"]["name"] for p in plan.create)
    assert changed.create == []
    shrink = deployment_plan(_deploy(1), plan.create, 1.0)
    assert len(shrink.delete) == 1
    assert shrink.create == []


def test_job_plan_deadline_and_ttl() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "n", "uid": "u2"},
        "spec": {
            "activeDeadlineSeconds": 60,
            "ttlSecondsAfterFinished": 10,
            "template": {"spec": {}},
        },
        "status": {"startTime": "2026-01-01T00:00:00Z"},
    }
    start = 1767225600.0  # 2026-01-01T00:00:00Z
    running = job_plan(job, [], start + 1, suffix=lambda: "abcde")
    assert running.create[0]["metadata"]["labels"]["job-name"] == "j"
    late = job_plan(job, running.create, start + 61)
    assert late.status is not None
    failed = next(c for c in late.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert late.delete == [running.create[0]["metadata"]["name"]]
    done = dict(job, status=late.status)
    assert not job_plan(done, [], start + 65).delete_owner
    assert job_plan(done, [], start + 75).delete_owner


def test_rendered_bench_job_launches_locally(tmp_path: Path) -> None:
    import yaml

    from devcluster.kubelet_launch import LaunchContext, prepare_launch
    from vllm_operator.api import parse_vllm_deployment
    from vllm_operator.render.job import render_job

    cr = yaml.safe_load(
        (
            Path(__file__).resolve().parents[3] / "examples/qwen3-30b-a3b-v0.17-throughput.yaml"
        ).read_text()
    )
    vd = parse_vllm_deployment(cr)
    job = render_job(vd, "abc", 1, image="ghcr.io/x/vllm-operator:0.1.0")
    pod = {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": job["spec"]["template"]["spec"],
    }
    ctx = LaunchContext(
        workdir=tmp_path,
        shim_dir=tmp_path / "bin",
        python_bin=tmp_path / "py",
        secret=lambda ns, name: None,
        config_map=lambda ns, name: None,
        resolve_service=lambda ns, name, port: (
            "127.0.0.1:4567" if (name, port) == ("qwen3-30b-a3b--candidate", 8000) else None
        ),
        image_env=lambda image: {},
        extra_env={},
    )
    launch = prepare_launch(pod, tmp_path / "pod", ctx)
    argv = launch.argv
    assert argv[0] == "vllm-operator"
    assert argv[argv.index("--url") + 1] == "http://127.0.0.1:4567"
    summary = argv[argv.index("--summary-path") + 1]
    assert summary == str(launch.termination_path)
    assert summary.startswith(str(tmp_path / "pod"))
    # The Job sets no HOME (bench writes nothing there); the kubelet keeps it in the pod.
    assert launch.env["HOME"] == str(tmp_path / "pod/fs/root")
    assert launch.env["PATH"].split(":")[:2] == [str(tmp_path / "bin"), str(tmp_path / "py")]
    assert launch.port is None  # a client: no port to rewrite
    (sidecar,) = job["spec"]["template"]["spec"]["initContainers"]
    side = prepare_launch(pod, tmp_path / "pod", ctx, sidecar)
    exchange = side.argv[side.argv.index("--exchange") + 1]
    assert exchange == argv[argv.index("--sandbox-dir") + 1]  # one shared volume
    assert exchange.startswith(str(tmp_path / "pod/fs"))
    assert side.termination_path != launch.termination_path  # never bench's message
    assert side.log_path != launch.log_path
    assert "VLLM_API_KEY" not in side.env


def test_informer_ignores_events_older_than_its_own_writes() -> None:
    from typing import Any, cast

    from devcluster.kubelet_api import PODS, Informer, KubeAPI

    changes: list[int] = []
    informer = Informer(cast(KubeAPI, None), PODS, "n", lambda: changes.append(1))

    def pod(rv: int, phase: str = "Running") -> dict[str, Any]:
        return {
            "metadata": {"name": "p", "namespace": "n", "resourceVersion": str(rv)},
            "status": {"phase": phase},
        }

    informer.store(pod(5))
    informer._apply({"type": "MODIFIED", "object": pod(4, "Pending")})  # in flight before our write
    assert informer.get("n", "p")["status"]["phase"] == "Running"  # type: ignore[index]
    informer.forget("n", "p")  # we deleted it
    informer._apply({"type": "MODIFIED", "object": pod(5)})
    assert informer.get("n", "p") is None  # a late event does not resurrect a deleted pod
    informer._apply({"type": "MODIFIED", "object": pod(6)})  # e.g. deletionTimestamp set
    assert informer.get("n", "p") is not None
    informer._apply({"type": "DELETED", "object": pod(7)})
    assert informer.get("n", "p") is None
