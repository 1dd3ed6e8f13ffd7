"""Gates with a twin for real: kopf + the operator + DevCluster + the local kubelet.

The stable revision's twin is a real Deployment whose pod runs the simulator, the benchmark
Job is the real ``vllm-operator bench`` measuring candidate and twin interleaved, and the
operator reads where each ran from the pods and the Node. What must hold: the twin exists
only for the gate, the serving Service never selects it, and nothing survives the resource;
and on a node with no GPU left for a twin, mode auto (the default) gates against the stored
figures and promotes, where mode twin would stop for a person.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devcluster.kubelet_faults import Faults
from vllm_operator.render import labels

from .harness import API, GPU_PRODUCT, Rollout, resource

# Gates on a regression limit measured against the twin: in the timing phase, alone
# (conftest.py), each test that needs such a gate to pass.
TIMING = pytest.mark.timing

GATE: dict[str, Any] = {
    "iterations": 3,
    "concurrency": [1, 4],
    "timeoutSeconds": 120,
    "trials": 3,
    "thresholds": {
        "quality": {"minPassed": 12, "minIdenticalPercent": 100},
        "maxRegressionPercent": 50,
    },
}
# As in the published upgrade story: at 0.01 a short request is a few ms of model time and
# loopback jitter alone makes the interval straddle a limit.
SLOWER = {"VLLMOP_SIM_TIME_SCALE": "0.03"}


def _serving(r: Rollout, body: dict[str, Any]) -> str:
    r.apply(body)
    st = r.wait_phase("Serving", timeout=60, gate="Passed")
    return str(st["stable"]["revision"])


def _twins(r: Rollout) -> list[str]:
    return [
        o["metadata"]["name"]
        for o in r.objects("apps/v1", "deployments")
        if o["metadata"]["labels"].get(labels.COMPONENT_LABEL) == labels.COMPONENT_TWIN
    ]


def _twin_pod_labels(r: Rollout, stable: str) -> dict[str, str]:
    """The labels of the twin's pod, once it runs."""

    def found() -> dict[str, str] | None:
        for pod in r.objects("v1", "pods"):
            pod_labels = pod["metadata"].get("labels") or {}
            if pod_labels.get(labels.COMPONENT_LABEL) == labels.COMPONENT_TWIN:
                assert pod_labels[labels.REVISION_LABEL] == stable
                return dict(pod_labels)
        return None

    result: dict[str, str] = r.wait(found, timeout=30, what="a twin pod")
    return result


def _never_selected(r: Rollout, twin_pod: dict[str, str]) -> None:
    """No version of the serving or candidate Service ever selected the twin's pods."""
    for name in ("qwen", "qwen--candidate"):
        for version in r.cluster.history("v1", "services", name):
            selector = version["spec"]["selector"]
            assert selector[labels.COMPONENT_LABEL] == labels.COMPONENT_SERVER
            assert not selector.items() <= twin_pod.items(), (name, selector)


def _gone(r: Rollout) -> None:
    r.wait(
        lambda: not _twins(r) and not r.cluster.exists("v1", "services", "qwen--twin"),
        timeout=20,
        what="twin Deployment and Service removed",
    )


def _job_args(r: Rollout, job: str) -> list[str]:
    first = r.cluster.history("batch/v1", "jobs", job)[0]
    return list(first["spec"]["template"]["spec"]["containers"][0]["args"])


@TIMING
def test_twin_is_benchmarked_beside_the_candidate_then_removed(rollout: Rollout) -> None:
    stable = _serving(rollout, resource(mode="interactivity", sim_env=SLOWER, gate=GATE))
    assert _twins(rollout) == []  # a first revision has nothing to pair with
    rollout.apply(resource(mode="throughput", sim_env=SLOWER, gate=GATE))
    twin_pod = _twin_pod_labels(rollout, stable)
    st = rollout.wait_phase("Serving", timeout=90, gate="Passed")
    candidate = st["stable"]["revision"]
    assert candidate != stable
    gate = st["lastGate"]  # the newest verdict in full; its figures are in its Job's log
    figures = rollout.judged_figures()
    assert gate["baselineMode"] == "twin"
    assert gate["baselineRevision"] == stable
    where = {"node": "devcluster", "gpuProduct": GPU_PRODUCT}
    assert gate["candidatePlacement"] == {**where, "vllmVersion": "0.17.0"}
    assert gate["baselinePlacement"] == {**where, "vllmVersion": "0.17.0"}
    assert figures["pairedBaseline"]["placement"]["node"] == "devcluster"
    assert any("interval" in r or "point comparison" in r for r in gate["reasons"]), gate
    # the candidate's quality answers, compared with the twin's by the bench and re-judged
    assert figures["quality"]["differential"]["identical"] == 13
    assert any("13/13 answers (100.0%) identical" in r for r in gate["reasons"]), gate
    args = _job_args(rollout, f"qwen--gate-{candidate}-1")
    assert args[args.index("--baseline-url") + 1] == "http://qwen--twin.default.svc:8000"
    assert args[args.index("--trials") + 1] == "3"
    assert "--baseline-json" not in args
    _gone(rollout)
    _never_selected(rollout, twin_pod)
    assert rollout.selector_changes() == [(stable, 1), (candidate, 1)]
    reasons = [e["reason"] for e in rollout.cluster.list("v1", "events", "default")]
    assert "TwinCreated" in reasons
    assert "TwinRemoved" in reasons


@pytest.mark.slow  # not timing: Failed on quality (it decides whatever the latency), then Error
def test_twin_is_removed_after_failed_and_after_error(rollout: Rollout) -> None:
    stable = _serving(rollout, resource(gate=GATE))
    rollout.apply(resource(mode="balanced", sim_env={"VLLMOP_SIM_DEGRADED": "1"}, gate=GATE))
    twin_pod = _twin_pod_labels(rollout, stable)
    st = rollout.wait_phase("Degraded", timeout=90)
    assert st["lastGate"]["outcome"] == "Failed", st["lastGate"]
    assert st["lastGate"]["baselineMode"] == "twin"
    assert any(
        r.startswith("quality differential: 6/13 answers (46.2%) identical to the paired")
        and "below minIdenticalPercent 100" in r
        for r in st["lastGate"]["reasons"]
    ), st["lastGate"]
    _gone(rollout)
    faulty = {"VLLMOP_SIM_ERROR_RATE": "1", "VLLMOP_SIM_ERROR_STATUS": "400"}
    rollout.apply(resource(mode="interactivity", sim_env=faulty, gate=GATE))
    rollout.wait(lambda: _twins(rollout), timeout=30, what="a twin for the second candidate")
    st = rollout.wait(
        lambda: (
            rollout.status()["lastGate"]["outcome"] == "Error"
            and rollout.wait_phase("Degraded", timeout=1)
        ),
        timeout=90,
        what="gate Error",
    )
    _gone(rollout)
    assert rollout.serving_revision() == stable
    assert rollout.selector_changes() == [(stable, 1)]
    _never_selected(rollout, twin_pod)


@pytest.mark.slow
@TIMING
def test_twin_after_a_restart_mid_gate_and_no_orphan_after_deletion(rollout: Rollout) -> None:
    stable = _serving(rollout, resource(gate=GATE))
    rollout.apply(resource(mode="balanced", gate=GATE))
    rollout.wait(lambda: rollout.names("batch/v1", "jobs"), timeout=60, what="a benchmark Job")
    (twin,) = _twins(rollout)
    rollout.stop_operator()
    rollout.start_operator()
    st = rollout.wait_phase("Serving", timeout=90, gate="Passed")
    promoted = st["stable"]["revision"]
    _gone(rollout)
    added = [
        v for v in rollout.cluster.history("apps/v1", "deployments", twin) if v["_event"] == "ADDED"
    ]
    assert len(added) == 1  # the restarted operator did not start a second twin
    assert len(st["history"]) == 2
    # Mid-gate again, then the resource goes: its children go with it, twin included.
    rollout.apply(resource(mode="interactivity", gate={**GATE, "iterations": 30}))
    rollout.wait(lambda: _twins(rollout) == [f"qwen--twin-{promoted}"], timeout=30, what="twin")
    rollout.cluster.delete(API, "vllmdeployments", "qwen")
    rollout.wait(
        lambda: (
            not rollout.names("apps/v1", "deployments")
            and not rollout.names("v1", "services")
            and not rollout.names("batch/v1", "jobs")
        ),
        timeout=30,
        what="children, twin included, garbage-collected",
    )
    assert stable != promoted


@TIMING
def test_auto_without_a_gpu_for_the_twin_gates_on_stored_figures_and_promotes(
    tmp_path: Path,
) -> None:
    # Two GPUs: the stable revision's pod and the candidate's. The twin (started only once
    # the candidate's pod is bound) finds none: the scheduler says Insufficient nvidia.com/gpu.
    r = Rollout(tmp_path, faults=Faults(gpu_capacity=2))
    # Unpaired figures from two runs on a loaded machine are noisy (a 10 ms short-prompt
    # median at time scale 0.03 with one slow trial spans +-100%): the same performance mode
    # on both sides, ten times the model time, the widest limit and automatic reruns keep
    # this test about the baseline, not about the gate's noise.
    gate = {**GATE, "thresholds": {**GATE["thresholds"], "maxRegressionPercent": 100}}
    slow = {"VLLMOP_SIM_TIME_SCALE": "0.1"}
    reruns = {"onInconclusive": "rerun", "maxReruns": 2}
    r.start_operator()
    try:
        stable = _serving(r, resource(sim_env=slow, gate=gate, rollout=reruns))
        # Another pod template (one more environment variable), the same server.
        again = {**slow, "VLLMOP_TEST_REVISION": "2"}
        r.apply(resource(sim_env=again, gate=gate, rollout=reruns))

        def unschedulable_twin() -> tuple[str, str] | None:
            for pod in r.objects("v1", "pods"):
                if pod["metadata"]["labels"].get(labels.COMPONENT_LABEL) != labels.COMPONENT_TWIN:
                    continue
                for cond in (pod.get("status") or {}).get("conditions") or []:
                    if cond["type"] == "PodScheduled" and cond["status"] == "False":
                        return pod["metadata"]["name"], str(cond.get("message"))
            return None

        twin_pod, message = r.wait(unschedulable_twin, timeout=60, what="an unschedulable twin")
        assert "Insufficient nvidia.com/gpu" in message
        st = r.wait_phase("Serving", timeout=240, gate="Passed")
        candidate = st["stable"]["revision"]
        assert candidate != stable
        record = st["lastGate"]
        assert record["baselineMode"] == "stored", record
        assert record["baselineRevision"] == stable
        why = record["baselineReason"]
        assert f"gate.baseline.mode auto: the twin of stable revision {stable} was not " in why
        assert "scheduled within 300 s" in why
        assert "Insufficient nvidia.com/gpu" in why
        assert any(x.startswith("baseline measured earlier") for x in record["reasons"]), record
        args = _job_args(r, f"qwen--gate-{candidate}-{record['attempt']}")
        assert "--baseline-url" not in args
        assert "--baseline-json" in args
        _gone(r)
        versions = r.cluster.history("v1", "pods", twin_pod)
        assert not any((v.get("spec") or {}).get("nodeName") for v in versions), "scheduled"
        events = {e["reason"]: e["message"] for e in r.cluster.list("v1", "events", "default")}
        assert {"TwinCreated", "TwinUnavailable", "TwinRemoved"} <= events.keys()
        assert "GateError" not in events
        assert why in events["TwinUnavailable"]
        # The serving Service went from the stable revision to the candidate, never elsewhere.
        assert r.selector_changes() == [(stable, 1), (candidate, 1)]
    finally:
        r.close()
