"""The operator's shell: declared API calls, configuration, metrics, the work queue."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry
from rollout_world import summary

from vllm_operator.api.status import GateRecord
from vllm_operator.commands import main as cli_main
from vllm_operator.config import OperatorConfig, config_from_args
from vllm_operator.handlers.queue import WorkQueue
from vllm_operator.handlers.reconcile import Reconciler
from vllm_operator.kube.client import Kube, KubeError, api_client_for
from vllm_operator.kube.permissions import PERMISSIONS, PermissionNotDeclared, require
from vllm_operator.metrics import OperatorMetrics


def test_permissions_are_least_privilege() -> None:
    resources = {p.resource for p in PERMISSIONS}
    assert "secrets" not in resources
    assert "configmaps" not in resources
    assert not any("*" in (p.resource, p.verb, p.api_group) for p in PERMISSIONS)
    assert {p.verb for p in PERMISSIONS if p.resource == "events"} == {"create"}
    assert len(set(PERMISSIONS)) == len(PERMISSIONS)


async def test_undeclared_calls_are_refused_before_the_network() -> None:
    kube = Kube(api_client_for("http://127.0.0.1:9"))  # nothing listens there
    try:
        with pytest.raises(PermissionNotDeclared):
            require("", "nodes", "list")  # the nodes of a gate are read one by one
        with pytest.raises(PermissionNotDeclared):
            await kube.patch("Job", "ns", "j", {})  # jobs are never patched
        with pytest.raises(PermissionNotDeclared):
            require("", "secrets", "get")
    finally:
        kube.close()


def test_config_flags_then_environment_then_defaults() -> None:
    env = {
        "VLLM_OPERATOR_NAMESPACES": "a, b",
        "VLLM_OPERATOR_METRICS_PORT": "9100",
        "VLLM_OPERATOR_BENCH_IMAGE": "reg/op:2",
    }
    cfg = config_from_args(["--liveness-port", "0"], env, "run")
    assert cfg.namespaces == ("a", "b")
    assert cfg.metrics_port == 9100
    assert cfg.liveness_port is None
    assert cfg.liveness_endpoint is None
    assert cfg.bench_image == "reg/op:2"
    flags = config_from_args(["-n", "x", "--metrics-port", "8000", "--job-env", "A=1"], env, "run")
    assert flags.namespaces == ("x",)
    assert flags.metrics_port == 8000
    assert flags.job_env == (("A", "1"),)
    everything = config_from_args(["--all-namespaces"], env, "run")
    assert everything.clusterwide
    default = config_from_args([], {}, "run")
    assert default == OperatorConfig()
    assert default.liveness_endpoint == "http://0.0.0.0:8081/healthz"


@pytest.mark.parametrize("argv", [["--api-url", "http://127.0.0.1:1"], ["--deadline-scale", "0.1"]])
def test_run_refuses_the_dev_cluster_knobs(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # The embedded cluster's seams (OperatorConfig.api_url, deadline_scale) are set in code
    # by the demo and test harnesses; `run` carries only what a real cluster needs.
    with pytest.raises(SystemExit) as exc:
        config_from_args(argv, {}, "vllm-operator run")
    assert exc.value.code == 2
    assert f"unrecognized arguments: {' '.join(argv)}" in capsys.readouterr().err
    scaled = config_from_args([], {"VLLM_OPERATOR_DEADLINE_SCALE": "0.1"}, "run")
    assert scaled.deadline_scale == 1.0  # nor through the environment
    assert scaled.api_url is None
    with pytest.raises(SystemExit):
        config_from_args(["--help"], {}, "vllm-operator run")
    assert argv[0] not in capsys.readouterr().out


def test_run_help_is_complete(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli_main(["run", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for flag in (
        "--namespace",
        "--all-namespaces",
        "--metrics-port",
        "--liveness-port",
        "--bench-image",
    ):
        assert flag in text


def test_metrics_record_verdicts_figures_and_phase_and_forget() -> None:
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry)
    record = GateRecord(revision="r1", outcome="Passed", summary=summary(median_ms=800, tokens=100))
    metrics.verdict("ml", "qwen", record)
    metrics.set_phase("ml", "qwen", "Serving")
    labels = {"namespace": "ml", "name": "qwen", "revision": "r1"}
    assert (
        registry.get_sample_value(
            "vllm_operator_gate_verdicts_total", {"outcome": "Passed", "decided_by": "gate"}
        )
        == 1
    )
    assert (
        registry.get_sample_value(
            "vllm_operator_benchmark_latency_median_ms", {**labels, "prompt_class": "medium"}
        )
        == 800
    )
    assert (
        registry.get_sample_value(
            "vllm_operator_benchmark_tokens_per_second", {**labels, "concurrency": "8"}
        )
        == 800
    )
    assert registry.get_sample_value("vllm_operator_benchmark_quality_passed", labels) == 13
    phase = {"namespace": "ml", "name": "qwen"}
    assert registry.get_sample_value("vllm_operator_phase", {**phase, "phase": "Serving"}) == 1
    assert registry.get_sample_value("vllm_operator_phase", {**phase, "phase": "Failed"}) == 0
    metrics.forget("ml", "qwen")
    assert registry.get_sample_value("vllm_operator_phase", {**phase, "phase": "Serving"}) is None
    assert registry.get_sample_value("vllm_operator_benchmark_quality_passed", labels) is None


async def test_queue_coalesces_and_never_runs_one_key_twice_at_once() -> None:
    running: set[tuple[str, str]] = set()
    overlaps = 0
    calls: list[tuple[str, str]] = []
    gate = asyncio.Event()
    second_done = asyncio.Event()

    async def worker(key: tuple[str, str]) -> float | None:
        nonlocal overlaps
        if key in running:
            overlaps += 1
        running.add(key)
        calls.append(key)
        await gate.wait()
        running.discard(key)
        if len(calls) == 2:
            second_done.set()
        return None

    queue = WorkQueue(worker, workers=4)
    queue.start()
    try:
        for _ in range(5):
            queue.add(("ns", "a"))
        await asyncio.sleep(0.01)
        assert calls == [("ns", "a")]
        for _ in range(5):
            queue.add(("ns", "a"))  # arrives mid-pass: one more pass afterwards
        gate.set()
        async with asyncio.timeout(2):
            await second_done.wait()
        await asyncio.sleep(0.05)  # nothing else may follow
        assert calls == [("ns", "a"), ("ns", "a")]
        assert overlaps == 0
    finally:
        await queue.stop()


async def test_queue_requeues_after_the_plan_delay_and_backs_off_errors() -> None:
    calls: list[str] = []
    both_twice = asyncio.Event()

    async def worker(key: tuple[str, str]) -> float | None:
        calls.append(key[1])
        if calls.count("later") >= 2 and calls.count("boom") >= 2:
            both_twice.set()
        if key[1] == "boom" and calls.count("boom") == 1:
            raise RuntimeError("api down")
        return 0.05 if calls.count(key[1]) == 1 else None

    queue = WorkQueue(worker, workers=2)
    queue.start()
    try:
        queue.add(("ns", "later"))
        queue.add(("ns", "boom"))
        async with asyncio.timeout(3):
            await both_twice.wait()
    finally:
        await queue.stop()


class _Nodes(Kube):
    """A Kube whose Node reads answer from a table (403 for the forbidden ones)."""

    def __init__(self, labels: dict[str, dict[str, str]], forbidden: set[str]) -> None:
        super().__init__(api_client_for("http://127.0.0.1:9"), workers=1)
        self.table, self.forbidden, self.asked = labels, forbidden, []

    async def node_labels(self, name: str) -> dict[str, str] | None:
        self.asked.append(name)
        if name in self.forbidden:
            raise KubeError(403, "Forbidden", f'nodes "{name}" is forbidden')
        return self.table.get(name)


async def test_gpu_product_is_read_once_per_node_and_unknown_when_forbidden() -> None:
    kube = _Nodes({"a": {"nvidia.com/gpu.product": "NVIDIA-H200"}, "b": {}}, {"c"})
    try:
        reconciler = Reconciler(kube, OperatorConfig(), OperatorMetrics(CollectorRegistry()))
        await reconciler._read_gpu_products(["a", "b", "c", "gone"])
        assert reconciler.node_gpu == {"a": "NVIDIA-H200", "b": "", "c": "", "gone": ""}
        assert kube.asked == ["a", "b", "c", "gone"]
    finally:
        kube.close()


class _Discovery(Kube):
    """A Kube whose API discovery answers from ``served`` and counts the questions."""

    def __init__(self, served: bool) -> None:
        super().__init__(api_client_for("http://127.0.0.1:9"), workers=1)
        self.served, self.asked = served, 0

    async def serves(self, kind: str) -> bool:
        assert kind == "LeaderWorkerSet"
        self.asked += 1
        return self.served


def _body(nodes: int) -> dict[str, object]:
    return {"spec": {"resources": {"gpus": 1, "nodes": nodes}}}


async def test_leaderworkersets_are_asked_of_discovery_only_for_a_multi_node_spec() -> None:
    kube = _Discovery(served=False)
    try:
        off = Reconciler(kube, OperatorConfig(), OperatorMetrics(CollectorRegistry()))
        assert await off._groups_served(_body(2))  # no --multi-node: refused elsewhere
        on = Reconciler(kube, OperatorConfig(multi_node=True), OperatorMetrics(CollectorRegistry()))
        assert await on._groups_served(_body(1))  # one node: no LeaderWorkerSet needed
        assert kube.asked == 0
        assert not await on._groups_served(_body(2))
        assert not await on._groups_served(_body(2))
        assert kube.asked == 2  # a "no" is asked again on every pass
        kube.served = True
        assert await on._groups_served(_body(2))
        assert await on._groups_served(_body(2))
        assert kube.asked == 3  # a "yes" is trusted (GROUPS_SERVED_SECONDS)
    finally:
        kube.close()
