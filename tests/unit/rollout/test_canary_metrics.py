"""rollout.canary.metrics: vLLM's /metrics page -> per-pod counts -> a step's counts, read
by read with Prometheus' increase() rule."""

from __future__ import annotations

import math

import pytest

from vllm_operator.rollout.canary.metrics import (
    PodCounts,
    ScrapeError,
    accumulate,
    increase,
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


def test_increase_subtracts_bucket_by_bucket() -> None:
    more, reset = increase(_counts(10, 12, 12), _counts(30, 40, 40))
    assert not reset
    assert more.histograms["ttft"] == ((0.5, 20.0), (math.inf, 28.0))
    assert more.finished == 28
    assert more.generation_tokens == 280


@pytest.mark.parametrize(
    "end",
    [
        _counts(3, 4, 4),  # the counters went down: a restart the pod status missed
        _counts(30, 40, 40, restarts=1),  # the restart count moved although counters grew
    ],
)
def test_after_a_reset_the_value_is_the_increase_since_it(end: PodCounts) -> None:
    more, reset = increase(_counts(10, 12, 12), end)
    assert reset
    assert more.finished == end.finished
    assert more.histograms == end.histograms


def test_a_reset_inside_the_step_loses_nothing_counted_before_it() -> None:
    """Reads 12 -> 40 (+28), a crash, 4 (+4), 9 (+5): the step counted 37, as increase()."""
    step: dict[str, PodCounts] = {}
    last: dict[str, PodCounts] = {}
    for now in (_counts(10, 12, 12), _counts(30, 40, 40), _counts(3, 4, 4, 1), _counts(6, 9, 9, 1)):
        step = accumulate(step, last, {"a": now})
        last = {"a": now}
    assert step["a"].finished == 37
    assert step["a"].histograms["ttft"] == ((0.5, 20.0 + 3.0 + 3.0), (math.inf, 37.0))
    deltas = step_deltas(step, last)
    assert deltas["a"].restarted  # restarts 0 at its first read, 1 now


def test_a_pod_first_seen_mid_step_counts_from_its_first_read() -> None:
    step = accumulate({}, {}, {"a": _counts(1, 1, 1)})
    last = {"a": _counts(1, 1, 1)}
    later = {"a": _counts(2, 3, 3), "new": _counts(400, 500, 500)}  # its whole history
    step = accumulate(step, last, later)
    assert step["new"].finished == 0
    step = accumulate(step, later, {"a": _counts(2, 3, 3), "new": _counts(404, 504, 504)})
    assert step["new"].finished == 4
    assert step["a"].finished == 2
    assert not step_deltas(step, later)["new"].restarted


MIXED = """vllm:time_to_first_token_seconds_bucket{le="+Inf"} 7
vllm:inter_token_latency_seconds_bucket{le="+Inf"} 70
vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 7
vllm:request_success_total{finished_reason="stop"} 7
http_requests_total{handler="/v1/chat/completions",method="POST",status="2xx"} 10
http_requests_total{handler="/v1/chat/completions",method="POST",status="5xx"} 1
http_requests_total{handler="/v1/models",method="GET",status="2xx"} 20000
http_requests_total{handler="/v1/embeddings",method="POST",status="4xx"} 1
http_requests_total{handler="/tokenize",method="POST",status="2xx"} 50
"""


def test_only_inference_requests_count_and_unfinished_streams_are_errors() -> None:
    counts = parse_metrics(MIXED)
    assert counts.http_requests == 12  # chat and embeddings; not the model list, not tokenize
    assert counts.http_errors == 2
    # 10 chat answers were 2xx but only 7 finished: 3 broke after their header or were
    # given up on by their clients.
    assert counts.unfinished == 3
    assert counts.errors == 5
    assert counts.requests == 12


def test_an_engine_that_counts_its_aborts_is_not_counted_twice() -> None:
    page = MIXED.replace(
        'vllm:request_success_total{finished_reason="stop"} 7',
        'vllm:request_success_total{finished_reason="stop"} 7\n'
        'vllm:request_success_total{finished_reason="abort"} 3',
    )
    counts = parse_metrics(page)
    assert counts.aborted == 3
    assert counts.unfinished == 3
    assert counts.errors == 5


def test_the_record_form_round_trips() -> None:
    counts = parse_metrics(PAGE, restarts=1)
    assert PodCounts.from_json(counts.to_json()) == counts
    with pytest.raises(ScrapeError, match="damaged"):
        PodCounts.from_json({"h": {"ttft": [["x", 1]]}})


def test_a_series_scraped_by_two_jobs_is_counted_once() -> None:
    """From Prometheus, the same pod's series under two jobs (or instances) is one series,
    not two: summed, 2,990 requests were read against 745 sent."""
    doubled = "\n".join(
        line.replace("{", '{job="a",', 1) + "\n" + line.replace("{", '{job="b",', 1)
        for line in MIXED.splitlines()
    )
    assert parse_metrics(doubled) == parse_metrics(MIXED)
    # Two engines of one pod are two series, and add up.
    engines = MIXED + 'vllm:request_success_total{engine="1",finished_reason="stop"} 5\n'
    assert parse_metrics(engines).finished == 12
