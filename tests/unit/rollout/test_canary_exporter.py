"""The canary's own metrics, read as Prometheus reads them: the operator's /metrics endpoint.

``vllm-operator run`` serves its registry with prometheus_client's ``start_http_server``;
here the same server, on a free loopback port, serves an ``OperatorMetrics`` fed the status
of a pass in a canary step, and the page is parsed as text. A canary that ends removes its
series (a dashboard must not show a finished canary at 50 %).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from vllm_operator.api.canary import CanaryFigures, CanaryStatus
from vllm_operator.api.status import RevisionSummary, VLLMDeploymentStatus
from vllm_operator.metrics import CANARY_FIGURES, OperatorMetrics


@pytest.fixture
def served() -> Iterator[tuple[OperatorMetrics, str]]:
    registry = CollectorRegistry()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        yield OperatorMetrics(registry), f"http://127.0.0.1:{port}/metrics"
    finally:
        server.shutdown()
        thread.join(5)


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(url, timeout=5).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("vllm_operator_canary")
    }


def _revision(revision: str) -> RevisionSummary:
    return RevisionSummary(
        revision=revision,
        image="vllm/vllm-openai:v0.17.0",
        version="0.17.0",
        performance_mode="throughput",
    )


def _status(step: int, share: float, judged: bool) -> VLLMDeploymentStatus:
    figures = (
        {
            "candidate": CanaryFigures(
                revision="cand",
                pods=1,
                requests=412,
                error_percent=24.5,
                tokens_per_second_per_replica=310.0,
                ttft_p95_ms=250.0,
                itl_p95_ms=25.0,
                e2e_p95_ms=500.0,
            ),
            "stable": CanaryFigures(
                revision="stab",
                pods=1,
                requests=430,
                error_percent=0.0,
                tokens_per_second_per_replica=320.0,
                ttft_p95_ms=100.0,
                itl_p95_ms=None,
                e2e_p95_ms=None,
            ),
        }
        if judged
        else {}
    )
    return VLLMDeploymentStatus(
        phase="Canary",
        stable=_revision("stab"),
        candidate=_revision("cand"),
        canary=CanaryStatus(step=step, steps=2, weight=25, share_percent=share, **figures),
    )


def test_the_endpoint_shows_step_shares_and_live_figures(
    served: tuple[OperatorMetrics, str],
) -> None:
    metrics, url = served
    metrics.canary("ml", "qwen", _status(1, 50.0, judged=False))
    page = _scrape(url)
    res = (("name", "qwen"), ("namespace", "ml"))
    step_key = ("vllm_operator_canary_step", (*res, ("revision", "cand"), ("steps", "2")))
    assert page[step_key] == 1
    share = "vllm_operator_canary_traffic_share_percent"
    assert page[(share, (*res, ("revision", "cand"), ("role", "candidate")))] == 50.0
    assert page[(share, (*res, ("revision", "stab"), ("role", "stable")))] == 50.0
    assert not any(k[0] == "vllm_operator_canary_live_figure" for k in page)  # none judged yet

    metrics.canary("ml", "qwen", _status(2, 66.7, judged=True))
    page = _scrape(url)
    assert page[(step_key[0], (*res, ("revision", "cand"), ("steps", "2")))] == 2
    assert page[(share, (*res, ("revision", "stab"), ("role", "stable")))] == pytest.approx(33.3)
    live = {
        (dict(k[1])["role"], dict(k[1])["figure"]): v
        for k, v in page.items()
        if k[0] == "vllm_operator_canary_live_figure"
    }
    assert live[("candidate", "error_percent")] == 24.5
    assert live[("stable", "error_percent")] == 0.0
    assert live[("candidate", "requests")] == 412
    assert live[("stable", "ttft_p95_ms")] == 100.0
    assert {f for r, f in live if r == "candidate"} == set(CANARY_FIGURES)
    assert ("stable", "itl_p95_ms") not in live  # no figure, no series (not a 0)


def test_a_canary_that_ends_leaves_no_series(served: tuple[OperatorMetrics, str]) -> None:
    metrics, url = served
    metrics.canary("ml", "qwen", _status(2, 50.0, judged=True))
    metrics.canary("ml", "other", _status(1, 50.0, judged=False))
    metrics.canary("ml", "qwen", VLLMDeploymentStatus(phase="Serving"))
    page = _scrape(url)
    assert page  # the other resource's canary is still shown
    assert all(dict(k[1])["name"] == "other" for k in page), page
    metrics.forget("ml", "other")
    assert _scrape(url) == {}
