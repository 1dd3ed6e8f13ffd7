"""A counter reset between two reads of a step, read from Prometheus, loses nothing.

The operator reads a step every analysis interval, Prometheus scrapes more often: what a pod
counted between a read and its restart is in Prometheus' samples, not in the next instant
value. The reader reads the samples since the previous read (a range selector), sums what
each series held before each reset (``resets_by_pod``), and ``metrics.increase`` adds it, as
``increase()`` does. tests/integration/prometheus_real checks the same against a real
Prometheus.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web

from vllm_operator.api.canary_prometheus import PrometheusSource
from vllm_operator.kube.prometheus import (
    MAX_RANGE_SECONDS,
    PrometheusAnswerError,
    PrometheusReader,
    resets_by_pod,
)
from vllm_operator.render import labels
from vllm_operator.rollout.canary.metrics import PodCounts, increase
from vllm_operator.rollout.canary.phase import last_read_at
from vllm_operator.rollout.canary.record import CanaryRecord
from vllm_operator.rollout.observed import Observed
from vllm_operator.rollout.views import DeploymentView, PodView

HIST = "vllm:time_to_first_token_seconds_bucket"


def _matrix(*series: tuple[dict[str, str], list[float]]) -> bytes:
    result = [
        {"metric": metric, "values": [[1000.0 + i, repr(v)] for i, v in enumerate(values)]}
        for metric, values in series
    ]
    return json.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": result}}
    ).encode()


def _metric(name: str, pod: str = "c-0", job: str = "a", **more: str) -> dict[str, str]:
    return {"__name__": name, "pod": pod, "namespace": "ml", "job": job, **more}


def _pod_series(pod: str, finished: list[float], job: str = "a") -> list[Any]:
    success = _metric("vllm:request_success_total", pod, job, finished_reason="stop")
    out = [(success, finished)]
    for hist in ("time_to_first_token", "inter_token_latency", "e2e_request_latency"):
        bucket = _metric(f"vllm:{hist}_seconds_bucket", pod, job, le="+Inf")
        out.append((bucket, finished))
    return out


def test_the_values_before_each_reset_are_summed_per_pod() -> None:
    answer = _matrix(
        *_pod_series("c-0", [100, 150, 20, 40, 5]),  # two resets: 150 and 40 before them
        *_pod_series("s-0", [10, 20, 30]),  # none
    )
    found = resets_by_pod(answer, "pod")
    assert set(found) == {"c-0"}  # a pod without a reset has nothing to add
    values = {(n, lbl.get("le")): v for n, lbl, v in found["c-0"]}
    assert values[("vllm:request_success_total", None)] == 190
    assert values[("vllm:time_to_first_token_seconds_bucket", "+Inf")] == 190


def test_a_series_scraped_by_two_jobs_is_read_from_one() -> None:
    """The same series under jobs a and b: the one with the larger latest value, as the
    instant read keeps it, never the sum of both jobs' resets."""
    answer = _matrix(
        *_pod_series("c-0", [100, 150, 20], job="a"),
        *_pod_series("c-0", [90, 140, 160], job="b"),  # b has not seen the restart yet
    )
    assert resets_by_pod(answer, "pod") == {}
    answer = _matrix(
        *_pod_series("c-0", [100, 150, 20, 30], job="a"),
        *_pod_series("c-0", [150, 10, 25], job="b"),
    )
    found = resets_by_pod(answer, "pod")
    values = [v for n, _, v in found["c-0"] if n == "vllm:request_success_total"]
    assert values == [150]  # once, from job a (latest 30 > 25)


def test_increase_keeps_the_counts_before_the_reset() -> None:
    last = PodCounts(
        finished=100, http_requests=100, histograms={"ttft": ((1.0, 80), (float("inf"), 100))}
    )
    before = PodCounts(
        finished=150, http_requests=150, histograms={"ttft": ((1.0, 120), (float("inf"), 150))}
    )
    now = PodCounts(
        finished=30,
        http_requests=30,
        histograms={"ttft": ((1.0, 20), (float("inf"), 30))},
        before_reset=before,
    )
    more, reset = increase(last, now)
    assert reset
    assert more.finished == 80  # 50 up to the reset, 30 after it
    assert more.http_requests == 80
    assert dict(more.histograms["ttft"]) == {1.0: 60, float("inf"): 80}
    without, _ = increase(last, PodCounts(finished=30, http_requests=30))
    assert without.finished == 30  # a pod read without Prometheus' samples: after the reset only


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"status": "success", "data": {"resultType": "vector", "result": []}}, "range of samples"),
        (
            {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}}]}},
            "no values",
        ),
        (
            {
                "status": "success",
                "data": {
                    "resultType": "matrix",
                    "result": [{"metric": {"pod": "c"}, "values": [[1, 2]]}],
                },
            },
            "not \\[time",
        ),
    ],
)
def test_a_hostile_range_answer_is_a_named_error(body: dict[str, Any], error: str) -> None:
    with pytest.raises(PrometheusAnswerError, match=error):
        resets_by_pod(json.dumps(body).encode(), "pod")


def test_a_range_answer_with_too_many_samples_is_refused() -> None:
    answer = _matrix(*_pod_series("c-0", [float(i) for i in range(100)]))
    with pytest.raises(PrometheusAnswerError, match="more than 50 samples"):
        resets_by_pod(answer, "pod", max_samples=50)


def test_the_shell_reads_since_the_steps_previous_read() -> None:
    at = "2026-12-07T18:00:00Z"
    record = CanaryRecord(step=1, started_at=at, progress_at=at, last={"c-0": PodCounts()})
    dep = DeploymentView(
        name="m-c", revision="c", replicas=1, role=labels.ROLE_CANDIDATE,
        canary=record.to_annotation(),
    )  # fmt: skip
    observed = Observed(body={}, deployments=(dep,))
    assert last_read_at(observed) == datetime(2026, 12, 7, 18, 0, tzinfo=UTC)
    fresh = DeploymentView(
        name="m-c", revision="c", replicas=1, role=labels.ROLE_CANDIDATE,
        canary=CanaryRecord(step=2).to_annotation(),
    )  # fmt: skip
    assert last_read_at(Observed(body={}, deployments=(fresh,))) is None  # a step's first read


def _vector(*series: tuple[dict[str, str], float]) -> dict[str, Any]:
    result = [{"metric": m, "value": [1000.0, repr(v)]} for m, v in series]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


@pytest.fixture
async def fake() -> AsyncIterator[tuple[list[str], dict[str, Any], str]]:
    """A Prometheus answering the instant query with the pod's latest values and a range
    query with ``answers["range"]``; ``asked`` holds each query's PromQL."""
    asked: list[str] = []
    answers: dict[str, Any] = {}

    async def handle(request: web.Request) -> web.Response:
        promql = request.query["query"]
        asked.append(promql)
        if promql.endswith("ms]"):
            return web.json_response(answers["range"])
        latest = [(m, values[-1]) for m, values in _pod_series("c-0", [100, 150, 20, 30])]
        return web.json_response(_vector(*latest))

    app = web.Application()
    app.router.add_get("/api/v1/query", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield asked, answers, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_the_reader_adds_what_came_before_a_reset_since_the_last_read(
    fake: tuple[list[str], dict[str, Any], str],
) -> None:
    asked, answers, url = fake
    source = PrometheusSource(url=url, timeout_seconds=2)
    pods = [PodView(name="c-0", labels={}, ip="10.0.0.1")]
    when = datetime(2026, 12, 7, 18, 0, 30, tzinfo=UTC)
    answers["range"] = json.loads(_matrix(*_pod_series("c-0", [100, 150, 20, 30])))
    got = await PrometheusReader().read(
        source, "ml", pods, when, since=when - timedelta(seconds=30)
    )
    counts = got["c-0"]
    assert isinstance(counts, PodCounts)
    assert counts.finished == 30
    assert counts.before_reset is not None
    assert counts.before_reset.finished == 150
    assert asked[-1].endswith("[30000ms]")
    more, reset = increase(PodCounts(finished=100), counts)
    assert reset
    assert more.finished == 80  # 50 before the restart, 30 after it
    # A read after a long gap looks back no further than MAX_RANGE_SECONDS ...
    await PrometheusReader().read(source, "ml", pods, when, since=when - timedelta(hours=1))
    assert asked[-1].endswith(f"[{MAX_RANGE_SECONDS * 1000}ms]")
    # ... and samples it cannot use refine nothing but fail nothing: the plain counts stand.
    answers["range"] = {"status": "error", "errorType": "bad_data", "error": "too many"}
    got = await PrometheusReader().read(
        source, "ml", pods, when, since=when - timedelta(seconds=30)
    )
    plain = got["c-0"]
    assert isinstance(plain, PodCounts)
    assert plain.finished == 30
    assert plain.before_reset is None
    success = _metric("vllm:request_success_total", finished_reason="stop")
    answers["range"] = json.loads(_matrix((success, [100, 150, 20, 30])))  # no histograms
    got = await PrometheusReader().read(
        source, "ml", pods, when, since=when - timedelta(seconds=30)
    )
    partial = got["c-0"]
    assert isinstance(partial, PodCounts)
    assert partial.before_reset is None  # not a pod's counts: the plain ones stand
    first = await PrometheusReader().read(source, "ml", pods, when)  # a step's first read
    assert not asked[-1].endswith("ms]")
    assert isinstance(first["c-0"], PodCounts)
