"""Mode twin gates and automatic reruns, pass after pass, against the in-memory cluster."""

from __future__ import annotations

from typing import Any

import pytest
from rollout_world import World, spec, summary

from vllm_operator.api.summary import Placement
from vllm_operator.render import labels
from vllm_operator.rollout import observe
from vllm_operator.rollout.observed import nodes_needing_gpu_product

V16_EAGER = spec(image="vllm/vllm-openai:v0.16.0", mode="eager")
GATE = {"thresholds": {"maxRegressionPercent": 10}}
# Mode twin as it was before mode auto (the default since): the twin starts with the
# candidate, and a twin not Ready in time is an Error (test_rollout_baseline.py: mode auto).
TWIN = {**GATE, "baseline": {"mode": "twin"}}
V17_FAST = spec(image="vllm/vllm-openai:v0.17.0", mode="throughput", gate=TWIN)


def deployed() -> World:
    """v0.16 eager passed its first gate (no stable: no twin) and serves."""
    w = World(V16_EAGER)
    w.step()
    w.ready_all()
    w.step()
    assert "--baseline-url" not in w.job_args()  # nothing to pair with yet
    w.finish_job(summary(median_ms=4600, tokens=200))
    w.step()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"
    return w


def _selects(selector: dict[str, str], pod_labels: dict[str, str]) -> bool:
    return all(pod_labels.get(k) == v for k, v in selector.items())


def _twin_started(w: World, spec_doc: dict[str, Any] = V17_FAST) -> tuple[str, str]:
    stable = w.serving()
    assert stable is not None
    w.set_spec(spec_doc)
    p = w.step()
    cand = next(r for r in w.revisions() if r != stable)
    assert p.kinds() == [
        "patch Service qwen--candidate",
        "create Service qwen--twin",
        f"create Deployment qwen--twin-{stable}",
        f"create Deployment qwen--{cand}",
    ]
    assert w.twins() == [stable]
    return stable, cand


def test_twin_copies_the_stable_pods_but_is_never_selected_for_traffic() -> None:
    w = deployed()
    stable, _cand = _twin_started(w)
    twin = w.objects[("Deployment", f"qwen--twin-{stable}")]
    source = w.deployment(stable)
    assert source is not None
    assert twin["spec"]["replicas"] == 1  # candidateReplicas, not the stable's 2
    assert twin["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    # The stable's pod spec exactly; only the component label differs.
    assert twin["spec"]["template"]["spec"] == source["spec"]["template"]["spec"]
    pod_labels = twin["spec"]["template"]["metadata"]["labels"]
    assert pod_labels[labels.COMPONENT_LABEL] == labels.COMPONENT_TWIN
    assert pod_labels[labels.REVISION_LABEL] == stable
    assert _selects(twin["spec"]["selector"]["matchLabels"], pod_labels)
    for service in ("qwen", "qwen--candidate"):
        selector = w.objects[("Service", service)]["spec"]["selector"]
        assert not _selects(selector, pod_labels), service
    # Neither does the stable Deployment's own selector claim the twin's pods.
    assert not _selects(source["spec"]["selector"]["matchLabels"], pod_labels)
    twin_service = w.objects[("Service", "qwen--twin")]["spec"]["selector"]
    assert _selects(twin_service, pod_labels)
    assert not _selects(twin_service, source["spec"]["template"]["metadata"]["labels"])
    assert "TwinCreated" in w.events()


def test_benchmark_waits_for_the_twin_then_measures_both_with_placement() -> None:
    w = deployed()
    stable, cand = _twin_started(w)
    w.ready(cand, 1)
    w.step()
    assert w.kinds("Job") == []
    assert w.status["phase"] == "Progressing"
    assert "twin of stable revision" in w.status["message"]
    w.server_pod(cand, "cand-1", node="gpu-a")
    w.twin_pod(stable, "twin-1", node="gpu-b")
    w.node_gpu.update({"gpu-a": "NVIDIA-H200", "gpu-b": "NVIDIA-H200"})
    w.ready_all()
    w.step()
    assert w.arg("--baseline-url") == "http://qwen--twin.ml.svc:8000"
    assert "--baseline-json" not in w.job_args()
    assert w.arg("--trials") == "3"
    assert w.arg("--candidate-node") == "gpu-a"
    assert w.arg("--baseline-node") == "gpu-b"
    assert w.arg("--candidate-gpu-product") == w.arg("--baseline-gpu-product") == "NVIDIA-H200"
    w.finish_job(summary(median_ms=886, tokens=900), baseline=summary(median_ms=900, tokens=880))
    p = w.step()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Passed", gate["reasons"]
    assert gate["baselineMode"] == "twin"
    assert gate["baselineRevision"] == stable
    assert gate["attempt"] == 1
    assert gate["candidatePlacement"] == {
        "node": "gpu-a",
        "gpuProduct": "NVIDIA-H200",
        "vllmVersion": "0.17.0",
    }
    assert gate["baselinePlacement"]["node"] == "gpu-b"
    assert gate["baselinePlacement"]["vllmVersion"] == "0.16.0"
    assert any("interval" in r for r in gate["reasons"]), gate["reasons"]
    # The verdict is on record in this very pass, and the twin goes in it.
    assert f"delete Deployment qwen--twin-{stable}" in p.kinds()
    assert "delete Service qwen--twin" in p.kinds()
    w.ready_all()
    w.settle()
    assert w.serving() == cand
    assert w.twins() == []
    assert ("Service", "qwen--twin") not in w.objects


def _stable_untouched(w: World, stable: str) -> None:
    assert w.serving() == stable
    assert w.twins() == []
    assert ("Service", "qwen--twin") not in w.objects
    dep = w.deployment(stable)
    assert dep is not None
    assert dep["spec"]["replicas"] == 2


@pytest.mark.parametrize("end", ["failed", "error", "no-pair", "abort", "twin-stuck", "new-spec"])
def test_twin_is_removed_whatever_ends_the_gate(end: str) -> None:
    w = deployed()
    stable, cand = _twin_started(w)
    if end == "abort":
        w.annotate(labels.ABORT_ANNOTATION, cand)
    elif end == "twin-stuck":
        w.ready(cand, 1)
        w.step()
        w.advance(3601)
    elif end == "new-spec":
        w.set_spec(spec(image="vllm/vllm-openai:v0.17.0", mode="balanced", gate={"enabled": False}))
    else:
        w.ready_all()
        w.step()
        if end == "failed":
            slow = summary(median_ms=1400, tokens=500)
            w.finish_job(slow, baseline=summary(median_ms=886, tokens=900), exit_code=1)
        elif end == "error":
            w.finish_job(None, exit_code=2, failed_reason="DeadlineExceeded")
        else:
            w.finish_job(summary(), pair=False)  # a bench that did not measure the twin
    w.settle()
    if end == "new-spec":
        w.ready_all()
        w.settle()
        assert w.twins() == []  # a gate-less revision needs no twin
        return
    expected = {"failed": "Failed", "abort": "Failed"}.get(end, "Error")
    assert w.status["lastGate"]["outcome"] == expected, w.status["lastGate"]
    if end == "twin-stuck":
        assert "TwinStuck" in w.events()
        assert any("not Ready within" in r for r in w.status["lastGate"]["reasons"])
    if end == "no-pair":
        assert any("paired" in r for r in w.status["lastGate"]["reasons"])
    assert w.status["phase"] == "Degraded"
    assert w.revisions() == [stable]
    _stable_untouched(w, stable)
    assert "TwinRemoved" in w.events()


def test_stored_mode_starts_no_twin_and_sends_the_stored_figures() -> None:
    w = World(V16_EAGER)
    w.step()
    w.ready_all()
    w.step()
    where = Placement(node="gpu-a", gpu_product="NVIDIA-H200", vllm_version="0.16.0")
    w.finish_job(summary(median_ms=4600, tokens=200).model_copy(update={"placement": where}))
    w.step()
    w.ready_all()
    w.settle()
    stable = w.serving()
    w.set_spec(
        spec(image="vllm/vllm-openai:v0.17.0", gate={**GATE, "baseline": {"mode": "stored"}})
    )
    w.step()
    assert w.twins() == []
    w.ready_all()
    w.step()
    assert "--baseline-url" not in w.job_args()
    assert w.arg("--baseline-json") is not None
    w.finish_job(summary(median_ms=886, tokens=900))
    w.step()
    assert w.status["lastGate"]["baselineMode"] == "stored"
    assert w.status["lastGate"]["baselineRevision"] == stable
    # Where the stored figures were measured: the stable revision's own gate.
    assert w.status["lastGate"]["baselinePlacement"] == where.to_wire()


def _inconclusive() -> Any:
    """Too few latency samples to call: the gate says Inconclusive, never Passed."""
    thin = summary()
    return thin.model_copy(
        update={"latency": [x.model_copy(update={"requests": 1}) for x in thin.latency]}
    )


def test_rerun_on_inconclusive_runs_new_attempts_then_holds() -> None:
    w = deployed()
    rerun = {"onInconclusive": "rerun", "maxReruns": 2}
    stable, cand = _twin_started(w, {**V17_FAST, "rollout": rerun})
    w.ready_all()
    w.step()
    for attempt in (1, 2, 3):
        assert w.job()["metadata"]["name"] == f"qwen--gate-{cand}-{attempt}"
        w.finish_job(_inconclusive())
        w.step()
        w.ready_all()
        w.step()
        if attempt < 3:
            assert w.status["phase"] == "Benchmarking"
            assert w.twins() == [stable]  # kept for the next attempt
    events = [e for p in w.plans for e in p.events]
    reruns = [e.message for e in events if e.reason == "GateRerun"]
    assert len(reruns) == 2
    assert "running attempt 2 (rerun 1 of 2" in reruns[0]
    assert [e.reason for e in events].count("GateHolding") == 1
    w.settle()
    assert w.status["phase"] == "Holding"
    assert "after 2 rerun(s)" in w.status["message"]
    assert w.kinds("Job") == []
    assert w.twins() == []  # holding for a person costs no twin GPUs
    assert [h["attempt"] for h in w.status["history"][:3]] == [3, 2, 1]
    # A person's re-run starts the count again, with a twin again; then promote.
    w.advance(1)
    w.annotate(labels.RERUN_ANNOTATION, "again")
    w.step()
    assert w.twins() == [stable]
    w.ready_all()
    w.step()
    assert w.job()["metadata"]["name"] == f"qwen--gate-{cand}-4"
    w.annotate(labels.PROMOTE_ANNOTATION, cand)
    w.settle()
    w.ready_all()
    w.settle()
    assert w.serving() == cand
    assert w.twins() == []


def test_rerun_that_becomes_conclusive_decides() -> None:
    w = deployed()
    _stable, cand = _twin_started(w, {**V17_FAST, "rollout": {"onInconclusive": "rerun"}})
    w.ready_all()
    w.step()
    w.finish_job(_inconclusive())
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary(median_ms=886, tokens=900))
    w.step()
    assert w.status["lastGate"]["outcome"] == "Passed"
    assert w.status["lastGate"]["attempt"] == 2
    w.ready_all()
    w.settle()
    assert w.serving() == cand


def test_shell_reads_only_the_nodes_of_a_gate_it_does_not_know_yet() -> None:
    w = deployed()
    stable, cand = _twin_started(w)
    w.server_pod(stable, "stable-1", node="serving-node")  # serves: not compared, not read
    w.server_pod(cand, "cand-1", node="gpu-a")
    w.twin_pod(stable, "twin-1", node="gpu-b")
    objs = w.objects
    observed = observe(
        w.body,
        deployments=[o for (k, _), o in objs.items() if k == "Deployment"],
        pods=[o for (k, _), o in objs.items() if k == "Pod"],
        node_gpu={"gpu-b": "NVIDIA-H200"},
    )
    assert nodes_needing_gpu_product(observed) == ["gpu-a"]
