"""Paired runs against two scripted servers: order, warm-up per shape, trials, the summary."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from test_bench_runner import config, counter, server, sse

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import Placement
from vllm_operator.bench import run_benchmark
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.http.request import RequestRecord
from vllm_operator.bench.http.transport import HttpxTransport, Transport
from vllm_operator.bench.human import render
from vllm_operator.bench.runner import Clock
from vllm_operator.bench.stats import MIN_DECODE_GAPS, decode_rate
from vllm_operator.bench.summary import LIMIT, size
from vllm_operator.gate.verdict import judge


def two_servers(log: list[tuple[str, int]]) -> Callable[[BenchConfig, Clock], Transport]:
    """Candidate at cand.test, baseline at base.test; ``log`` gets (host, max_tokens)."""

    def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        if request.url.path == "/version":
            return httpx.Response(
                200, json={"version": "0.22.0" if host == "cand.test" else "0.17.0"}
            )
        body = json.loads(request.content)
        log.append((host, body["max_tokens"]))
        return server(body)

    def make(cfg: BenchConfig, clock: Clock) -> Transport:
        return HttpxTransport(clock=clock, transport=httpx.MockTransport(handler))

    return make


def paired_config(**kw: object) -> BenchConfig:
    return config(
        url="http://cand.test",
        baseline_url="http://base.test/v1",
        trials=2,
        warmup=1,
        candidate_placement=Placement(node="n1", gpu_product="NVIDIA-H200"),
        baseline_placement=Placement(node="n2", gpu_product="NVIDIA-H200"),
        **kw,
    )


async def test_interleaved_trials_with_a_warm_up_per_shape() -> None:
    log: list[tuple[str, int]] = []
    report = await run_benchmark(
        paired_config(thresholds=Thresholds(max_regression_percent=10)),
        transport_factory=two_servers(log),
        clock=counter(),
    )
    hosts = [h[0] for h in log]
    c, b = "cand.test", "base.test"
    # trial 1, candidate first: short warm-up + 3, medium warm-up + 3, on each server
    assert hosts[:16] == [c] * 4 + [b] * 4 + [c] * 4 + [b] * 4
    # level 1: warm-up 1 + 2 requests; level 2: warm-up 2 + 4 (candidate, then baseline)
    assert hosts[16:34] == [c] * 3 + [b] * 3 + [c] * 6 + [b] * 6
    # trial 2, baseline first, no warm-up any more
    assert hosts[34:46] == [b] * 3 + [c] * 3 + [b] * 3 + [c] * 3
    assert hosts[46:58] == [b] * 2 + [c] * 2 + [b] * 4 + [c] * 4
    assert hosts[58:] == [c] * 2 + [b] * 2  # quality once per server
    summary = report.summary
    assert summary.paired_baseline is not None
    assert [len(f.trials) for f in summary.latency] == [2, 2]
    assert [len(f.trials) for f in summary.concurrency] == [2, 2]
    assert [f.requests for f in summary.concurrency] == [4, 8]  # warm-ups not counted
    assert summary.placement == Placement(
        node="n1", gpu_product="NVIDIA-H200", vllm_version="0.22.0"
    )
    assert summary.paired_baseline.placement is not None
    assert summary.paired_baseline.placement.vllm_version == "0.17.0"
    assert summary.paired_baseline.quality is not None
    assert summary.paired_baseline.quality.failed == []  # counts only
    assert summary.paired_baseline.quality.failed_omitted == 1
    assert size(summary) <= LIMIT
    data = report.to_json()
    assert data["baseline"]["url"] == "http://base.test/v1"
    per_request = data["concurrency"][1]["per_request"]
    assert len(per_request) == 8
    assert {r["trial"] for r in per_request} == {1, 2}
    assert len(data["baseline"]["latency"][0]["per_request"]) == 6
    # the scripted server answers at once, so the baseline's 2 streams never overlapped
    assert report.verdict.reasons[0] == "baseline at 2 streams: no steady window (0 tok/s)"
    assert report.verdict.outcome == "Inconclusive"
    # the three compared figures did not decide: a few words each, their full text in judge
    assert report.verdict.deciding == 1
    assert sum("vs baseline, limit" in r for r in report.verdict.reasons[1:]) == 3
    full = judge(report.summary, Thresholds(max_regression_percent=10), None).findings
    assert sum("paired, 2 trials), limit" in f.text for f in full) == 3
    text = render(report)
    assert "| baseline |" in text
    assert "candidate and baseline interleaved, 2 trial(s)" in text


async def test_short_answers_get_no_decode_rate_and_say_why() -> None:
    report = await run_benchmark(config(), transport_factory=two_servers([]), clock=counter())
    short, medium = report.to_json()["latency"]
    assert short["decode_tokens_per_second"] is None  # 2 tokens: one gap
    assert "fewer than 10 inter-token gaps" in short["decode_note"]
    assert medium["decode_tokens_per_second"] is None  # 10 tokens: 9 gaps < 10
    assert report.summary.latency[1].decode_tokens_per_second == 0
    assert "(decode tok/s '-': fewer than 10" in render(report)


async def test_unreachable_baseline_stops_the_run_and_names_it() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "base.test":
            raise httpx.ConnectError("refused")
        return httpx.Response(200, json={"data": [{"id": "m"}]})

    def make(cfg: BenchConfig, clock: Clock) -> Transport:
        return HttpxTransport(clock=clock, transport=httpx.MockTransport(handler))

    report = await run_benchmark(
        paired_config(thresholds=Thresholds(max_regression_percent=10)),
        transport_factory=make,
        clock=counter(),
    )
    assert report.state.aborted is not None
    assert report.state.aborted.startswith("baseline: cannot connect to http://base.test")
    assert report.summary.errors == {}  # the candidate did nothing wrong
    assert report.verdict.outcome == "Inconclusive"
    assert report.exit_code == 1


def test_decode_rate_needs_enough_gaps() -> None:
    def record(tokens: int) -> RequestRecord:
        r = RequestRecord(scheduled_at=0.0, sent_at=0.0, first_token_at=0.1)
        r.last_event_at = 0.1 + 0.005 * (tokens - 1)
        r.output_tokens = tokens
        return r

    assert decode_rate(record(2)) is None
    assert decode_rate(record(MIN_DECODE_GAPS)) is None
    assert decode_rate(record(MIN_DECODE_GAPS + 1)) == pytest.approx(200.0)


def baseline_says_no() -> Callable[[BenchConfig, Clock], Transport]:
    """Both servers as ``server``, but the baseline answers "Say no" right ("no")."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        if request.url.path == "/version":
            return httpx.Response(200, json={"version": "0.17.0"})
        body = json.loads(request.content)
        if request.url.host == "base.test" and body["messages"][-1]["content"] == "Say no":
            chunks = [
                sse({"choices": [{"index": 0, "delta": {"content": "no"}}]}),
                sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
                sse("[DONE]"),
            ]
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=b"".join(chunks)
            )
        return server(body)

    def make(cfg: BenchConfig, clock: Clock) -> Transport:
        return HttpxTransport(clock=clock, transport=httpx.MockTransport(handler))

    return make


async def test_the_differential_from_the_answers_both_servers_gave() -> None:
    limits = Thresholds.model_validate(
        {"quality": {"minIdenticalPercent": 50, "minStillPassingPercent": 100}}
    )
    report = await run_benchmark(
        paired_config(thresholds=limits), transport_factory=baseline_says_no(), clock=counter()
    )
    quality = report.summary.quality
    assert quality is not None
    assert quality.differential is not None
    assert quality.differential.to_wire() == {
        "compared": 2,
        "identical": 1,
        "baselinePassed": 2,
        "stillPassing": 1,
        "differing": ["no-1"],
        "lost": ["no-1"],
        "omitted": 0,
    }
    assert report.summary.verdict == "Failed"
    assert report.summary.reasons[0] == (
        "quality differential: 1 of the baseline's 2 passing test(s) (50.0%) still pass on the "
        "candidate, below minStillPassingPercent 100 (no longer passing: no-1)"
    )
    assert any(
        "1/2 answers (50.0%) identical" in r and "within" in r for r in report.summary.reasons
    )
    data = report.to_json()
    assert data["quality"]["differential"]["tests"] == [
        {"id": "yes-1", "identical": True, "baseline_passed": True, "candidate_passed": True},
        {"id": "no-1", "identical": False, "baseline_passed": True, "candidate_passed": False},
    ]
    assert data["baseline"]["quality"]["passed"] == 2
    text = render(report)
    assert "| Test | Category | Result | Baseline | Same answer | Why |" in text
    assert "| no-1 | c | ✗ FAIL | ✓ pass | differs | expected 'no', got 'maybe' |" in text
    assert "Against the baseline: 1/2 answers identical (50.0%); 1 of the baseline's 2" in text


async def test_no_differential_without_a_paired_baseline() -> None:
    report = await run_benchmark(config(), transport_factory=baseline_says_no(), clock=counter())
    assert report.summary.quality is not None
    assert report.summary.quality.differential is None
    assert report.to_json()["quality"]["differential"] is None
    assert "Same answer" not in render(report)
