"""Hostile ends and hostile neighbours on the embedded cluster (issue 10).

Real kopf + operator + DevCluster + the local kubelet, as in ``test_rollout``: a benchmark pod
that wrote a Passed summary but did not exit as documented, a second resource whose name
looks like another's child, and a foreign object squatting on a child name.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from devcluster.kubelet_faults import Faults, Match
from vllm_operator.render import labels

from .harness import API, Rollout, resource

QUALITY = {"thresholds": {"quality": {"minPassed": 12}}}


def _gate(**extra: Any) -> dict[str, Any]:
    return {"iterations": 3, "concurrency": [1, 4], "timeoutSeconds": 120, **extra}


def test_passed_summary_from_an_interrupted_bench_is_an_error(tmp_path: Path) -> None:
    bench_pods = Match(labels={labels.COMPONENT_LABEL: labels.COMPONENT_BENCHMARK})
    r = Rollout(tmp_path, faults=Faults(interrupted=(bench_pods,)))
    r.start_operator()
    try:
        r.apply(resource(gate=_gate(**QUALITY)))
        st = r.wait_phase("Failed", timeout=60)
        gate = st["lastGate"]  # the newest verdict in full; its figures are in its Job's log
        figures = r.judged_figures()
        assert gate["outcome"] == "Error", gate
        assert "exited with code 130" in gate["reasons"][0], gate
        # The bench really measured and wrote a Passed summary; it is kept, not believed.
        assert figures["verdict"] == "Passed"
        assert figures["identity"]["attempt"] == 1
        assert r.serving_revision() is None
        events = [e["reason"] for e in r.cluster.list("v1", "events", "default")]
        assert "Promoted" not in events
    finally:
        r.close()


def _events(r: Rollout, name: str) -> list[str]:
    return [
        e["reason"]
        for e in r.cluster.list("v1", "events", "default")
        if e["involvedObject"]["name"] == name
    ]


def test_a_resource_named_like_anothers_candidate_is_not_benchmarked_for_it(
    tmp_path: Path,
) -> None:
    """Issue 10: beta (6/13) was promoted on beta-candidate's 12/13."""
    r = Rollout(tmp_path)
    r.start_operator()
    try:
        r.apply(resource("beta-candidate", gate=_gate(**QUALITY)))
        r.wait_phase("Serving", name="beta-candidate", timeout=60)
        r.apply(resource("beta", sim_env={"VLLMOP_SIM_DEGRADED": "1"}, gate=_gate(**QUALITY)))
        st = r.wait_phase("Failed", name="beta", timeout=60)
        assert st["lastGate"]["outcome"] == "Failed", st["lastGate"]
        quality = r.judged_figures("beta")["quality"]
        assert quality["passed"] < 12, quality  # beta's own (degraded) pods were measured
        assert r.serving_revision("beta") is None
        assert r.status("beta-candidate")["phase"] == "Serving"
        assert "Promoted" not in _events(r, "beta")
    finally:
        r.close()


def test_foreign_service_at_the_serving_name_stalls_without_a_hot_loop(tmp_path: Path) -> None:
    r = Rollout(tmp_path)
    r.start_operator()
    try:
        squatter = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "qwen", "namespace": "default"},
            "spec": {"selector": {"app": "other"}, "ports": [{"port": 80}]},
        }
        r.cluster.create(squatter)
        r.apply(resource(gate=_gate(**QUALITY)))

        def stalled() -> dict[str, Any] | None:
            st = r.status()
            cond = next((c for c in st.get("conditions", []) if c["type"] == "Stalled"), {})
            return cond if cond.get("reason") == "NameConflict" else None

        cond = r.wait(stalled, timeout=60, what="Stalled NameConflict")
        assert cond["status"] == "True"
        assert "Service qwen is held by no owner" in cond["message"]
        assert r.status()["phase"] == "Failed"
        # No hot loop: over a window of several resyncs (2 s) nothing is written to the
        # resource, no Event is posted, the squatter is untouched.
        versions = len(r.cluster.history(API, "vllmdeployments", "qwen"))
        events = _events(r, "qwen")
        time.sleep(3.0)  # longer than a resync (2 s): a window to see no writes happen
        assert len(r.cluster.history(API, "vllmdeployments", "qwen")) == versions
        assert _events(r, "qwen") == events
        assert events.count("NameConflict") == 1
        assert "Promoted" not in events
        assert r.cluster.get("v1", "services", "qwen")["spec"]["selector"] == {"app": "other"}
        # The squatter leaves: the resource goes on and serves.
        r.cluster.delete("v1", "services", "qwen")
        st = r.wait_phase("Serving", timeout=60)
        assert r.serving_revision() == st["stable"]["revision"]
    finally:
        r.close()
