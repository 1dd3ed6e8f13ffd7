"""Hostile ends and hostile neighbours on the embedded cluster (issue 10).

Real kopf + operator + DevCluster + the local kubelet, as in ``test_rollout``: a benchmark pod
that wrote a Passed summary but did not exit as documented, a second resource whose name
looks like another's child, and a foreign object squatting on a child name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_operator.devcluster.kubelet_faults import Faults, Match
from vllm_operator.render import labels

from .harness import Rollout, resource

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
        gate = st["lastGate"]
        assert gate["outcome"] == "Error", gate
        assert "exited with code 130" in gate["reasons"][0], gate
        # The bench really measured and wrote a Passed summary; it is kept, not believed.
        assert gate["summary"]["verdict"] == "Passed"
        assert gate["summary"]["identity"]["attempt"] == 1
        assert r.serving_revision() is None
        events = [e["reason"] for e in r.cluster.list("v1", "events", "default")]
        assert "Promoted" not in events
    finally:
        r.close()
