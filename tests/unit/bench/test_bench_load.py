"""The load loops (``bench.load.send``) and their figures (``bench.load.figures``), no network.

The loops get a fake ``send_one`` (the runner's seam): it fills the record as a stream
would, so what is tested is the scheduling (arrivals, slots, cancellation, streams) and the
arithmetic, not HTTP (the simulator tests do that).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from vllm_operator.api.summary import BenchSummary, LoadSweep, PairedBaseline
from vllm_operator.api.workload import SloLimits
from vllm_operator.bench import summary as summary_mod
from vllm_operator.bench.http.request import ChatRequest
from vllm_operator.bench.load.figures import (
    MAX_SAMPLES,
    level_figures,
    run_figures,
    run_json,
    samples,
)
from vllm_operator.bench.load.send import (
    MAX_RUN_REQUESTS,
    LoadRecord,
    LoadRun,
    arrival_seed,
    arrivals,
    closed_loop,
    fold,
    open_loop,
)


class Numbered:
    """A Traffic whose request i says i (so tests can see which requests were sent)."""

    def request(self, index: int) -> ChatRequest:
        return ChatRequest(prompt=f"request {index}", max_tokens=4)

    def describe(self) -> dict[str, Any]:
        return {"kind": "numbered"}


def finish(record: LoadRecord, at: float, *, ttft: float = 0.05, gap: float = 0.01) -> None:
    """Fill ``record`` as a 4-token stream sent at ``at`` would."""
    record.sent_at = at
    record.first_token_at = at + ttft
    record.chunk_times = [at + ttft + k * gap for k in range(4)]
    record.last_event_at = record.chunk_times[-1]
    record.output_tokens = 4


def test_arrivals_are_fixed_by_the_seed_and_exact_in_number() -> None:
    a = arrivals(50, 30, arrival_seed(7, 50, 0))
    assert a == arrivals(50, 30, arrival_seed(7, 50, 0))
    assert len(a) == 1500
    assert a == sorted(a)
    assert a[0] >= 0
    assert a[-1] < 30
    assert a != arrivals(50, 30, arrival_seed(7, 50, 1))  # a new trial, new arrivals
    assert a != arrivals(50, 30, arrival_seed(8, 50, 0))
    # exponential gaps: mean 1/rate, standard deviation about the mean too
    gaps = [b - x for x, b in itertools.pairwise(a)]
    mean = sum(gaps) / len(gaps)
    assert mean == pytest.approx(0.02, rel=0.01)
    var = sum((g - mean) ** 2 for g in gaps) / len(gaps)
    assert var**0.5 == pytest.approx(0.02, rel=0.1)
    with pytest.raises(ValueError, match="lower secondsPerLevel"):
        arrivals(10_000, MAX_RUN_REQUESTS / 10_000 + 1, "s")


async def test_open_loop_sends_every_arrival_at_its_time_and_bounds_the_slots() -> None:
    loop = asyncio.get_running_loop()
    clock = loop.time
    gate = asyncio.Event()
    in_flight = most = 0
    sent: list[str] = []

    async def send_one(request: ChatRequest, record: LoadRecord) -> None:
        nonlocal in_flight, most
        sent.append(request.prompt)
        in_flight += 1
        most = max(most, in_flight)
        try:
            if len(sent) <= 3:
                await gate.wait()  # the first three hang until the test lets them go
            finish(record, clock())
        finally:
            in_flight -= 1

    run = LoadRun("candidate", 200, 0, "rate", 0.1)
    task = asyncio.create_task(
        open_loop(
            run, Numbered(), send_one, clock, rate=200, seed="s", first_index=100, max_in_flight=3
        )
    )
    # the fourth arrival finds every slot taken (no hook there: poll the counter)
    while run.waited_for_slot == 0:  # noqa: ASYNC110
        await asyncio.sleep(0.001)
    assert len(run.records) == 3
    gate.set()
    await task
    assert most <= 3
    assert sent == [f"request {i}" for i in range(100, 120)]
    assert len(run.records) == 20
    assert all(r.dispatched_at is not None for r in run.records)
    assert all(r.dispatched_at >= r.scheduled_at for r in run.records)  # type: ignore[operator]
    # the wait for a slot counts in the latency (measured from the intended arrival)
    waited = run.records[3]
    assert waited.dispatched_at is not None
    figures = run_figures(run, None)
    assert figures.requests == figures.completed == 20
    assert waited.first_token_at is not None
    assert waited.first_token_at - waited.scheduled_at >= waited.dispatched_at - waited.scheduled_at


async def test_open_loop_stops_arriving_after_a_failure_and_raises_it() -> None:
    clock = asyncio.get_running_loop().time

    async def send_one(request: ChatRequest, record: LoadRecord) -> None:
        if request.prompt == "request 2":
            record.fail("http_5xx", "boom")
            raise RuntimeError("three in a row")
        finish(record, clock())

    run = LoadRun("candidate", 500, 0, "rate", 0.2)
    with pytest.raises(RuntimeError, match="three in a row"):
        await open_loop(run, Numbered(), send_one, clock, rate=500, seed="s", first_index=0)
    assert 3 <= len(run.records) < 100  # stopped early, not all 100 arrivals
    assert run.records[2].error == "http_5xx"


async def test_a_cancelled_open_loop_cancels_every_request_in_flight() -> None:
    clock = asyncio.get_running_loop().time
    started = asyncio.Event()

    async def send_one(request: ChatRequest, record: LoadRecord) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            record.fail("timeout", "cancelled")
            raise

    run = LoadRun("candidate", 100, 0, "rate", 10)
    task = asyncio.create_task(
        open_loop(run, Numbered(), send_one, clock, rate=100, seed="s", first_index=0)
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert run.records
    assert all(r.error == "timeout" for r in run.records)
    assert run.ended >= run.started


async def test_closed_loop_streams_send_back_to_back_until_the_time_is_up() -> None:
    now = [0.0]
    sent: list[str] = []

    async def send_one(request: ChatRequest, record: LoadRecord) -> None:
        sent.append(request.prompt)
        finish(record, now[0])
        now[0] += 0.125  # each request takes 0.125 s of the fake clock (exact in binary)
        await asyncio.sleep(0)

    run = LoadRun("candidate", 2, 0, "concurrency", 1.0)
    await closed_loop(run, Numbered(), send_one, lambda: now[0], streams=2, first_index=50)
    assert len(run.records) == 8  # 1 s / 0.125 s per request, either stream
    assert sent == [f"request {i}" for i in range(50, 58)]  # numbered in the order sent
    assert [r.offset for r in run.records] == [k * 0.125 for k in range(8)]
    assert run.achieved_rate == 8


def record(
    at: float,
    *,
    ttft: float,
    gap: float,
    tokens: int = 5,
    late: float = 0.0,
    error: str | None = None,
) -> LoadRecord:
    r = LoadRecord(scheduled_at=at, offset=at, dispatched_at=at + late)
    if error is not None:
        r.fail(error, "x")
        return r
    r.sent_at = at + late
    r.first_token_at = at + ttft
    r.chunk_times = [at + ttft + k * gap for k in range(tokens)]
    r.last_event_at = r.chunk_times[-1]
    r.output_tokens = tokens
    r.prompt_tokens = 100
    return r


def made_run(records: list[LoadRecord], seconds: float = 10.0) -> LoadRun:
    run = LoadRun("candidate", 20, 0, "rate", seconds, asked_rate=2.0)
    for r in records:
        fold(r, run)
        run.records.append(r)
    run.ended = seconds
    return run


def test_run_figures_measure_from_the_intended_arrival() -> None:
    run = made_run(
        [
            record(0.0, ttft=0.100, gap=0.010),
            record(1.0, ttft=0.200, gap=0.020, late=0.150),  # sent late: still 200 ms TTFT
            record(2.0, ttft=0.300, gap=0.030),
            record(3.0, ttft=0.0, gap=0.0, error="timeout"),
        ]
    )
    f = run_figures(run, None)
    assert (f.requests, f.completed, f.errors) == (4, 3, {"timeout": 1})
    assert f.error_percent == 25.0
    assert f.percentiles["ttft"]["p50"] == pytest.approx(200.0)
    assert f.percentiles["ttft"]["p99"] == pytest.approx(298.0)  # linear between 200 and 300
    assert f.percentiles["e2e"]["p50"] == pytest.approx(200 + 4 * 20)
    assert f.percentiles["tpot"]["p50"] == pytest.approx(20.0)
    # ITL: every gap of every request (4 each): 10, 20, 30 ms, four times each
    assert f.percentiles["itl"]["p50"] == pytest.approx(20.0)
    assert f.percentiles["itl"]["p90"] == pytest.approx(30.0)
    assert f.send_lag_ms["max"] == pytest.approx(150.0)
    assert f.request_throughput == pytest.approx(0.3)
    assert f.output_tokens_per_second == pytest.approx(1.5)


def test_goodput_holds_each_request_to_its_metrics_highest_limited_percentile() -> None:
    run = made_run(
        [record(float(i), ttft=t / 1000, gap=0.010) for i, t in enumerate((100, 250, 499, 501))]
    )
    limits = SloLimits.model_validate({"ttftMs": {"p50": 200, "p99": 500}})
    f = run_figures(run, limits)
    assert f.goodput_percent == 75.0  # 501 ms broke the p99 limit; p50's 200 is not per request
    assert f.goodput_rps == pytest.approx(0.3)
    tight = SloLimits.model_validate({"ttftMs": {"p99": 500}, "itlMs": {"p99": 9.99}})
    assert run_figures(run, tight).goodput_percent == 0.0  # every mean gap is 10 ms
    loose = SloLimits.model_validate({"ttftMs": {"p99": 500}, "itlMs": {"p99": 10.001}})
    assert run_figures(run, loose).goodput_percent == 75.0
    got = samples(run, limits)
    assert [s["met_slo"] for s in got] == [True, True, True, False]
    assert got[1] == {
        "t": 1.0,
        "ttft_ms": 250.0,
        "itl_ms": 10.0,
        "tpot_ms": 10.0,
        "e2e_ms": 290.0,
        "input_tokens": 100,
        "output_tokens": 5,
        "ok": True,
        "met_slo": True,
        "gaps": 4,
        "slow_gaps_ms": [],  # every gap is the run's p90 gap: none above it
    }


def test_samples_are_thinned_evenly_to_the_cap() -> None:
    run = made_run([record(i / 1000, ttft=0.05, gap=0.01) for i in range(5000)])
    got = samples(run, None)
    assert len(got) == MAX_SAMPLES
    assert got[0]["t"] == 0.0
    assert [g["t"] for g in got[1:3]] == [0.002, 0.005]  # every 2.5th request
    assert got[-1]["t"] == 4.997
    entry = run_json(run, None)
    assert entry["requests"] == 5000
    assert len(entry["samples"]) == MAX_SAMPLES


def test_level_figures_carry_only_the_limited_percentiles_per_trial() -> None:
    runs = [
        made_run([record(float(i), ttft=t / 1000, gap=0.01) for i, t in enumerate((100, 200))])
        for _ in range(3)
    ]
    limits = SloLimits.model_validate({"ttftMs": {"p99": 500}, "minGoodputPercent": 90})
    fig = level_figures(20, runs, limits)
    assert fig.requests == 6
    assert fig.percentiles == {"ttft.p99": [199.0, 199.0, 199.0]}
    assert fig.goodput_percent == [100.0, 100.0, 100.0]
    assert fig.error_percent == [0.0, 0.0, 0.0]
    assert level_figures(40, [], limits).requests == 0


def test_a_large_sweep_is_cut_from_its_highest_level_to_fit_4096_bytes() -> None:
    keys = [f"{m}.{p}" for m in ("ttft", "itl", "tpot", "e2e") for p in ("p50", "p99")]
    counts = {"limit": 500.0, "total": [300] * 10, "above": [1] * 10}
    levels = [
        {
            "level": float(n + 1),
            "requests": 3000,
            "percentiles": {k: [1234.5] * 10 for k in keys},
            "pooled": dict.fromkeys(keys, 1234.5),
            "tails": dict.fromkeys(keys, counts),
            "goodputPercent": [99.5] * 10,
            "errorPercent": [0.25] * 10,
        }
        for n in range(16)
    ]
    sweep = LoadSweep.model_validate({"mode": "rate", "levels": levels})
    big = BenchSummary(model="m", load=sweep, paired_baseline=PairedBaseline(load=sweep))
    assert summary_mod.size(big) > 4095
    fitted = summary_mod.fit(big)
    assert summary_mod.size(fitted) <= 4095
    assert fitted.load is not None
    assert fitted.paired_baseline is not None
    # the baseline's sweep goes first (the candidate's counts carry the comparison), then
    # the candidate's per-trial percentiles (the pooled ones stay), then its highest levels
    assert fitted.paired_baseline.load is None
    assert all(not lv.percentiles for lv in fitted.load.levels)
    kept = [lv for lv in fitted.load.levels if lv.tails]
    assert [lv.tails for lv in kept] == [lv.tails for lv in sweep.levels[: len(kept)]]
    assert all(lv.pooled == levels[0]["pooled"] for lv in kept)
    assert 1 <= len(kept) < 16
    assert [lv.level for lv in fitted.load.levels] == [float(n + 1) for n in range(16)]
    assert all(lv.requests == 3000 for lv in fitted.load.levels)
