"""The live canary judged from a real Prometheus (``analysis.prometheus``), not the pods.

The embedded cluster's simulators serve live users through the serving Service; a real
Prometheus (Debian's, see tests/integration/prometheus_real) scrapes every server pod, with
the ``pod`` and ``namespace`` labels kube-prometheus adds, as a discovery loop finds them;
the operator reads each step's counts from it. A candidate failing 30% of live requests is
Failed with the traffic back; a healthy one (another performance mode, the same
simulator) is promoted.
"""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_real.real_prometheus import Prometheus, start_prometheus

from devcluster.pod_address import local_address
from vllm_operator.render import labels
from vllm_operator_demo.live_users import LiveUsers

from .harness import Rollout, resource
from .test_canary import CANARY, MODEL, _gate, _reasons, _serving, _step


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    with start_prometheus(tmp_path_factory.mktemp("prometheus")) as running:
        yield running


class Discovery:
    """Every server pod of the cluster as a scrape target of job ``a`` (what a
    PodMonitor does), refreshed until stopped."""

    def __init__(self, rollout: Rollout, prometheus: Prometheus) -> None:
        self.rollout = rollout
        self.prometheus = prometheus
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopped.wait(0.2):
            try:
                pods = self.rollout.cluster.list("v1", "pods", "default")
            except Exception:  # the cluster stopping
                continue
            for pod in pods:
                meta = pod["metadata"]
                where = local_address(pod)
                if meta["labels"].get(labels.COMPONENT_LABEL) != "server" or where is None:
                    continue
                if meta["name"] not in self.prometheus.targets["a"]:
                    self.prometheus.scrape("a", meta["name"], f"{where[0]}:{where[1]}", "default")

    def __enter__(self) -> Discovery:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=10)


def _spec(prometheus: Prometheus, mode: str, sim_env: dict[str, str] | None = None) -> Any:
    analysis = {**CANARY["analysis"], "prometheus": {"url": prometheus.url}}  # type: ignore[dict-item]
    canary = {**CANARY, "analysis": analysis}
    return resource(mode=mode, sim_env=sim_env, gate=_gate(), rollout={"canary": canary})


@pytest.fixture
def scraped(rollout: Rollout, prometheus: Prometheus) -> Iterator[Prometheus]:
    with Discovery(rollout, prometheus):
        yield prometheus


def test_a_failing_candidate_read_from_prometheus_is_failed(
    rollout: Rollout, scraped: Prometheus
) -> None:
    before = queried(scraped)
    with LiveUsers(rollout.service_address, model=MODEL, users=4):
        stable = _serving(rollout, _spec(scraped, "balanced"))
        rollout.apply(_spec(scraped, "throughput", {"VLLMOP_SIM_LIVE_ERROR_RATE": "0.3"}))
        rollout.wait(lambda: rollout.status().get("lastGate", {}).get("outcome") == "Failed"
                     and rollout.status()["lastGate"]["reasons"][0].startswith("canary"), 180,
                     "the canary failed")  # fmt: skip
    reason = rollout.status()["lastGate"]["reasons"][0]
    assert "error share beyond" in reason, reason
    assert rollout.serving_revision() == stable
    assert "TrafficRestored" in _reasons(rollout)
    assert queried(scraped) > before  # the verdict came from Prometheus' answers


def test_a_healthy_candidate_read_from_prometheus_is_promoted(
    rollout: Rollout, scraped: Prometheus
) -> None:
    before = queried(scraped)
    with LiveUsers(rollout.service_address, model=MODEL, users=4):
        stable = _serving(rollout, _spec(scraped, "balanced"))
        rollout.apply(_spec(scraped, "throughput"))
        _step(rollout, 1, timeout=120)
        st = rollout.wait_phase("Serving", timeout=180)
    assert st["stable"]["revision"] != stable
    assert "CanaryPassed" in _reasons(rollout)
    assert queried(scraped) > before  # the verdict came from Prometheus' answers


def queried(prometheus: Prometheus) -> float:
    """The queries this Prometheus answered (its own count; the operator's instant and
    range queries both go to /api/v1/query)."""
    with urllib.request.urlopen(prometheus.url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line
    )
