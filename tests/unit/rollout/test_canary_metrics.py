"""rollout.canary.metrics: vLLM's /metrics page -> per-pod counts -> deltas over a step."""

from __future__ import annotations

import math

import pytest

from vllm_operator.rollout.canary.metrics import (
    PodCounts,
    ScrapeError,
    delta,
    parse_metrics,
    step_deltas,
)
from vllm_operator.sim.metrics import ITL_BUCKETS, LATENCY_BUCKETS, TTFT_BUCKETS, SimMetrics


def _sim() -> SimMetrics:
    return SimMetrics("m", running=lambda: 0.0, waiting=lambda: 0.0, kv_usage=lambda: 0.0)


def test_the_simulators_page_reads_with_vllms_buckets() -> None:
    sim = _sim()
    for ttft in (0.03, 0.07, 0.3):
        sim.ttft.observe(ttft)
    sim.e2e.observe(1.2)
    sim.tokens.observe_itl(0.02)
    sim.tokens.generation_tokens = 17
    sim.success("stop")
    sim.success("abort")
    counts = parse_metrics(sim.exposition().decode())
    ttft = counts.histograms["ttft"]
    assert [le for le, _ in ttft] == [*TTFT_BUCKETS, math.inf]
    assert [le for le, _ in counts.histograms["itl"]] == [*ITL_BUCKETS, math.inf]
    assert [le for le, _ in counts.histograms["e2e"]] == [*LATENCY_BUCKETS, math.inf]
    assert dict(ttft)[0.04] == 1
    assert dict(ttft)[0.08] == 2
    assert ttft[-1] == (math.inf, 3)
    assert (counts.finished, counts.aborted, counts.generation_tokens) == (2, 1, 17)


PAGE = """\
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 3
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 5
vllm:e2e_request_latency_seconds_bucket{engine="1",le="1.0",model_name="m"} 1
vllm:e2e_request_latency_seconds_bucket{engine="1",le="+Inf",model_name="m"} 2
vllm:time_to_first_token_seconds_bucket{le="+Inf"} 7
vllm:inter_token_latency_seconds_bucket{le="+Inf"} 70
vllm:request_success_total{finished_reason="stop",model_name="m"} 6
vllm:request_success_total{finished_reason="error",model_name="m"} 1
http_requests_total{handler="/v1/chat/completions",method="POST",status="2xx"} 5
http_requests_total{handler="/v1/chat/completions",method="POST",status="5xx"} 3
http_requests_total{handler="/metrics",method="GET",status="2xx"} 900
http_requests_total{handler="/health",method="GET",status="5xx"} 4
"""


def test_engines_are_summed_and_only_serving_handlers_count() -> None:
    counts = parse_metrics(PAGE, restarts=2)
    assert counts.histograms["e2e"] == ((1.0, 4.0), (math.inf, 7.0))
    assert (counts.http_requests, counts.http_errors) == (8, 3)
    assert (counts.finished, counts.aborted) == (7, 1)
    # The larger count of each: 3 answers were 5xx, 8 requests were answered.
    assert (counts.requests, counts.errors) == (8, 3)
    assert counts.restarts == 2


def test_a_page_without_vllms_histograms_is_an_error_naming_them() -> None:
    with pytest.raises(ScrapeError, match="vllm:time_to_first_token_seconds"):
        parse_metrics("process_cpu_seconds_total 3\n")
    with pytest.raises(ScrapeError, match="over"):
        parse_metrics("#" * (4 * 1024 * 1024 + 1))


def _counts(below: float, total: float, finished: float, restarts: int = 0) -> PodCounts:
    hist = ((0.5, below), (math.inf, total))
    return PodCounts(
        histograms={"ttft": hist, "itl": hist, "e2e": hist},
        finished=finished,
        generation_tokens=finished * 10,
        restarts=restarts,
    )


def test_delta_subtracts_bucket_by_bucket() -> None:
    step = delta(_counts(10, 12, 12), _counts(30, 40, 40))
    assert not step.restarted
    assert step.counts.histograms["ttft"] == ((0.5, 20.0), (math.inf, 28.0))
    assert step.counts.finished == 28
    assert step.counts.generation_tokens == 280


@pytest.mark.parametrize(
    "end",
    [
        _counts(3, 4, 4),  # the counters went down: a restart the pod status missed
        _counts(30, 40, 40, restarts=1),  # the restart count moved although counters grew
    ],
)
def test_a_restarted_pod_counts_only_since_its_restart(end: PodCounts) -> None:
    step = delta(_counts(10, 12, 12), end)
    assert step.restarted
    assert step.counts == end
    assert all(c >= 0 for _, c in step.counts.histograms["ttft"])


def test_a_pod_new_in_the_step_counts_everything_and_a_gone_pod_nothing() -> None:
    deltas = step_deltas(
        {"a": _counts(1, 1, 1), "gone": _counts(5, 5, 5)},
        {"a": _counts(2, 3, 3), "new": _counts(4, 4, 4)},
    )
    assert sorted(deltas) == ["a", "new"]
    assert deltas["new"].counts.finished == 4
    assert deltas["a"].counts.finished == 2


def test_the_record_form_round_trips() -> None:
    counts = parse_metrics(PAGE, restarts=1)
    assert PodCounts.from_json(counts.to_json()) == counts
    with pytest.raises(ScrapeError, match="damaged"):
        PodCounts.from_json({"h": {"ttft": [["x", 1]]}})
