"""analysis.prometheus: a step's counts read from a Prometheus on loopback, and its hostile
answers.

The fake Prometheus is a real HTTP server (aiohttp, 127.0.0.1) answering ``GET
/api/v1/query`` as Prometheus does: it holds each pod's samples as the simulator's /metrics
page gives them, keeps only the series the query's selector names (``__name__``, namespace
and pod regexes, parsed from the PromQL the reader sends), and answers an instant vector
with the pod and namespace labels a scrape adds. The counts must equal what reading the pods
directly gives, so the judge sees the same numbers either way.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

from vllm_operator.api.canary import CanaryAnalysis
from vllm_operator.api.canary_prometheus import PrometheusSource
from vllm_operator.errors import TransientError
from vllm_operator.kube.prometheus import PrometheusAnswerError, PrometheusReader, query
from vllm_operator.rollout.canary.metrics import (
    PodCounts,
    ScrapeFailure,
    _sample,
    accumulate,
    parse_metrics,
    step_deltas,
)
from vllm_operator.rollout.views import PodView
from vllm_operator.sim.metrics import SimMetrics

Handler = Callable[[web.Request], Any]


def _sim(requests: int, errors: int = 0, ttft: float = 0.03) -> SimMetrics:
    sim = SimMetrics("m", running=lambda: 0.0, waiting=lambda: 0.0, kv_usage=lambda: 0.0)
    for i in range(requests):
        sim.ttft.observe(ttft * (1 + (i % 10) / 20))
        sim.e2e.observe(1.0)
        sim.tokens.observe_itl(0.02)
        sim.tokens.generation_tokens += 50
        sim.success("abort" if i < errors else "stop")
    return sim


def _unquote(text: str) -> str:
    return text.replace('\\"', '"').replace("\\\\", "\\")


class FakePrometheus:
    """pod -> its /metrics page; answers instant queries over those samples."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        self.namespace = "ml"
        self.queries: list[dict[str, str]] = []
        self.override: Handler | None = None

    def vector(self, promql: str) -> list[dict[str, Any]]:
        matchers = dict(re.findall(r'(\w+)=~?"((?:[^"\\]|\\.)*)"', promql))
        names = re.compile(_unquote(matchers["__name__"]))
        pods = re.compile(_unquote(matchers["pod"]))
        out = []
        for pod, page in self.pages.items():
            if not pods.fullmatch(pod) or _unquote(matchers["namespace"]) != self.namespace:
                continue
            for line in page.splitlines():
                if not line or line.startswith("#"):
                    continue
                name, labels, value = _sample(line)
                if name is None or not names.fullmatch(name):
                    continue
                metric = {"__name__": name, **labels, "pod": pod, "namespace": self.namespace}
                out.append({"metric": metric, "value": [1.0, repr(value)]})
        return out

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.queries.append(dict(request.query))
        if self.override is not None:
            found: web.StreamResponse = await self.override(request)
            return found
        body = {
            "status": "success",
            "data": {"resultType": "vector", "result": self.vector(request.query["query"])},
        }
        return web.json_response(body)


@pytest.fixture
async def prometheus() -> AsyncIterator[tuple[FakePrometheus, PrometheusSource]]:
    fake = FakePrometheus()
    app = web.Application()
    app.router.add_get("/api/v1/query", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield fake, PrometheusSource(url=f"http://127.0.0.1:{port}/", timeout_seconds=1)
    finally:
        await runner.cleanup()


def _pods(*names: str) -> list[PodView]:
    return [PodView(name=n, labels={}, ip="10.0.0.1") for n in names]


WHEN = datetime(2026, 12, 2, 4, 0, 0, tzinfo=UTC)


async def test_counts_equal_the_pods_own_pages_and_the_step_deltas_match(
    prometheus: tuple[FakePrometheus, PrometheusSource],
) -> None:
    fake, source = prometheus
    reader = PrometheusReader()
    fake.pages = {
        "qwen--c-0": _sim(40).exposition().decode(),
        "qwen--s-0": _sim(60).exposition().decode(),
    }
    start = await reader.read(source, "ml", _pods("qwen--c-0", "qwen--s-0"), WHEN)
    assert fake.queries[-1]["time"] == f"{WHEN.timestamp():.3f}"
    for pod, page in fake.pages.items():
        assert start[pod] == parse_metrics(page)
    fake.pages = {
        "qwen--c-0": _sim(240, errors=50).exposition().decode(),
        "qwen--s-0": _sim(260).exposition().decode(),
    }
    end = await reader.read(source, "ml", _pods("qwen--c-0", "qwen--s-0"), WHEN)
    assert all(isinstance(v, PodCounts) for v in (*start.values(), *end.values()))
    first = accumulate({}, {}, start)  # type: ignore[arg-type]
    deltas = step_deltas(accumulate(first, start, end), end)  # type: ignore[arg-type]
    assert deltas["qwen--c-0"].counts.finished == 200
    assert deltas["qwen--c-0"].counts.aborted == 50
    assert deltas["qwen--s-0"].counts.finished == 200
    assert deltas["qwen--s-0"].counts.histograms["ttft"][-1][1] == 200


async def test_only_the_steps_pods_and_namespace_are_asked_for(
    prometheus: tuple[FakePrometheus, PrometheusSource],
) -> None:
    fake, source = prometheus
    fake.pages = {
        "qwen--c-0": _sim(5).exposition().decode(),
        "qwen--c-00": _sim(7).exposition().decode(),
    }
    got = await PrometheusReader().read(source, "ml", _pods("qwen--c-0"), WHEN)
    assert set(got) == {"qwen--c-0"}
    assert isinstance(got["qwen--c-0"], PodCounts)
    assert got["qwen--c-0"].finished == 5  # not qwen--c-00's (the regex is anchored)
    other = await PrometheusReader().read(source, "other-ns", _pods("qwen--c-0"), WHEN)
    assert isinstance(other["qwen--c-0"], ScrapeFailure)
    assert "has no vllm:" in other["qwen--c-0"].reason


def test_the_query_escapes_names_and_uses_the_configured_labels() -> None:
    source = PrometheusSource(
        url="http://p:9090", pod_label="kubernetes_pod_name", namespace_label="kubernetes_namespace"
    )
    text = query(source, 'ns"x', ["a.b", "c"])
    assert 'kubernetes_namespace="ns\\"x"' in text
    assert 'kubernetes_pod_name=~"a\\\\.b|c"' in text
    assert "vllm:time_to_first_token_seconds_bucket" in text


def _answer(status: int = 200, body: Any = None, raw: bytes | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        if raw is not None:
            return web.Response(status=status, body=raw)
        return web.json_response(body, status=status)

    return handler


def _series(**metric: str) -> dict[str, Any]:
    return {"metric": metric, "value": [1.0, "1"]}


HOSTILE = [
    pytest.param(_answer(raw=b"<html>not prometheus</html>"), "not JSON", id="html"),
    pytest.param(_answer(raw=b"[" * 3000), "not JSON", id="deep-json"),
    pytest.param(_answer(body=[1, 2]), "not a JSON object", id="list"),
    pytest.param(
        _answer(503, {"status": "error", "errorType": "timeout", "error": "query timed out"}),
        "HTTP 503: Prometheus answered timeout: query timed out",
        id="503-envelope",
    ),
    pytest.param(_answer(502, raw=b"bad gateway"), "HTTP 502", id="502-proxy"),
    pytest.param(
        _answer(body={"status": "error", "errorType": "bad_data", "error": "parse error"}),
        "Prometheus answered bad_data: parse error",
        id="status-error",
    ),
    pytest.param(
        _answer(body={"status": "success", "data": {"resultType": "matrix", "result": []}}),
        "not an instant vector",
        id="matrix",
    ),
    pytest.param(
        _answer(body={"status": "success", "data": {"resultType": "vector", "result": {}}}),
        "not a list",
        id="result-object",
    ),
    pytest.param(
        _answer(
            body={
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [_series(__name__="vllm:request_success_total")],
                },
            }
        ),
        "has no pod label",
        id="no-pod-label",
    ),
    pytest.param(
        _answer(
            body={
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [{"metric": {"pod": "p"}, "value": [1.0, "lots"]}],
                },
            }
        ),
        "is no number",
        id="value-text",
    ),
    pytest.param(
        _answer(
            body={
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [{"metric": {"pod": 3}, "value": [1.0, "1"]}],
                },
            }
        ),
        "not a map of label strings",
        id="label-number",
    ),
    pytest.param(
        _answer(
            body={
                "status": "success",
                "data": {"resultType": "vector", "result": [_series(pod="p")] * 11},
            }
        ),
        "11 series, more than 10",
        id="too-many-series",
    ),
    pytest.param(_answer(raw=b" " * 5000), "over 4096 bytes", id="too-large"),
]


@pytest.mark.parametrize(("handler", "reason"), HOSTILE)
async def test_hostile_answers_are_a_named_failure_for_every_pod(
    prometheus: tuple[FakePrometheus, PrometheusSource], handler: Handler, reason: str
) -> None:
    fake, source = prometheus
    fake.override = handler
    reader = PrometheusReader(max_answer=4096, max_series=10)
    got = await reader.read(source, "ml", _pods("p", "q"), WHEN)
    assert set(got) == {"p", "q"}
    for failure in got.values():
        assert isinstance(failure, ScrapeFailure)
        assert reason in failure.reason, failure.reason
        assert failure.reason.startswith(f"Prometheus {source.url}: ")
        assert len(failure.reason) <= 300


async def test_a_slow_prometheus_is_cut_at_its_timeout(
    prometheus: tuple[FakePrometheus, PrometheusSource],
) -> None:
    fake, source = prometheus
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.wait_for(release.wait(), 10)
        return web.json_response({})

    fake.override = slow
    started = asyncio.get_running_loop().time()
    got = await PrometheusReader().read(source, "ml", _pods("p"), WHEN)
    took = asyncio.get_running_loop().time() - started
    release.set()
    assert isinstance(got["p"], ScrapeFailure)
    assert "TimeoutError" in got["p"].reason
    assert took < 5  # the source's 1 s, not the server's 10 s


async def test_nothing_listens_there() -> None:
    source = PrometheusSource(url="http://127.0.0.1:9/", timeout_seconds=1)
    got = await PrometheusReader().read(source, "ml", _pods("p"), WHEN)
    assert isinstance(got["p"], ScrapeFailure)


def test_the_error_is_in_the_hierarchy() -> None:
    assert issubclass(PrometheusAnswerError, TransientError)


@pytest.mark.parametrize(
    "url", ["prometheus:9090", "ftp://p", "http://p:9090/?x=1", "http://p#f", "http://a b"]
)
def test_the_url_must_be_a_plain_http_base(url: str) -> None:
    with pytest.raises(ValueError, match="url"):
        CanaryAnalysis.model_validate({"prometheus": {"url": url}})


def test_the_source_round_trips_in_the_spec() -> None:
    analysis = CanaryAnalysis.model_validate(
        {"prometheus": {"url": "https://prom.example:9090/prom", "podLabel": "kpod"}}
    )
    assert analysis.prometheus is not None
    assert analysis.prometheus.pod_label == "kpod"
    assert json.loads(analysis.model_dump_json(by_alias=True))["prometheus"]["timeoutSeconds"] == 10
