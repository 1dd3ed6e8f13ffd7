"""The settling warm-up and the extra rounds of undecided figures, against scripted servers.

The clock is a ``FakeTime``: it ticks 1 ms per read, and the scripted server moves it on by
the delay a test gives each request, so a request's latency (and so each warm-up pass's
figures and each round's duration) is exactly what the test chose.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from test_bench_runner import config, server

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import TrialPlan, Warmup
from vllm_operator.bench import run_benchmark
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.http.transport import HttpxTransport, Transport
from vllm_operator.bench.quality.suite import EMPTY_SUITE
from vllm_operator.bench.run_state import RESERVE_FRACTION, Clock, RunState, SettlePass
from vllm_operator.bench.runner import run
from vllm_operator.bench.settle import agree
from vllm_operator.gate.budget import REPORT_RESERVE_FRACTION
from vllm_operator.gate.finding import FigureKey

QUALITY_PROMPTS = {"Say yes", "Say no"}
Delay = Callable[[str, int], float]
"""(host, how many chat requests that host had answered before) -> seconds this one takes."""


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


class Servers:
    """Scripted servers at cand.test and base.test; records every prompt each one saw."""

    def __init__(self, delay: Delay | None = None) -> None:
        self.time = FakeTime()
        self.delay = delay or (lambda host, n: 0.0)
        self.prompts: dict[str, list[str]] = {"cand.test": [], "base.test": []}

    def handler(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        if request.url.path == "/version":
            return httpx.Response(200, json={"version": "0.17.0"})
        body = json.loads(request.content)
        seen = self.prompts[host]
        self.time.now += self.delay(host, len(seen))
        seen.append(body["messages"][-1]["content"])
        return server(body)

    def factory(self, cfg: BenchConfig, clock: Clock) -> Transport:
        return HttpxTransport(clock=clock, transport=httpx.MockTransport(self.handler))


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def emit(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [f for e, f in self.events if e == name]


def passed(latency: dict[str, float], tps: dict[int, float] | None = None) -> SettlePass:
    return SettlePass(number=1, latency_ms=latency, tokens_per_second=tps or {}, seconds=1.0)


def settle_config(**kw: Any) -> BenchConfig:
    base: dict[str, Any] = {
        "url": "http://cand.test",
        "concurrency": (),
        "warmup": 1,
        "settle_max_passes": 4,
        "thresholds": Thresholds(max_regression_percent=10),
    }
    return config(**{**base, **kw})


# ---------------------------------------------------------------- agree()


def test_agree_within_the_tolerance_and_not_a_hair_beyond() -> None:
    cfg = settle_config(settle_tolerance=0.25)  # 25% of 100 is exactly 25.0
    assert agree(passed({"short": 100.0}), passed({"short": 125.0}), cfg)
    assert agree(passed({"short": 100.0}), passed({"short": 75.0}), cfg)
    assert not agree(passed({"short": 100.0}), passed({"short": 125.001}), cfg)
    assert not agree(passed({"short": 100.0}), passed({"short": 74.999}), cfg)
    assert agree(passed({}, {8: 100.0}), passed({}, {8: 125.0}), cfg)
    assert not agree(passed({}, {8: 100.0}), passed({}, {8: 125.001}), cfg)
    assert not agree(passed({}, {8: 100.0}), passed({}, {8: 74.999}), cfg)


def test_agree_allows_the_gates_floors_for_small_figures() -> None:
    cfg = settle_config()  # tolerance 15%; floors 5 ms and 5 tok/s (the defaults)
    assert cfg.settle_tolerance == 0.15
    assert agree(passed({"short": 20.0}), passed({"short": 25.0}), cfg)  # +25% but 5 ms
    assert agree(passed({"short": 20.0}), passed({"short": 15.0}), cfg)
    assert not agree(passed({"short": 20.0}), passed({"short": 25.001}), cfg)
    assert agree(passed({}, {1: 20.0}), passed({}, {1: 25.0}), cfg)
    assert not agree(passed({}, {1: 20.0}), passed({}, {1: 14.999}), cfg)
    floors = Thresholds(max_regression_percent=10, regression_floor_ms=8)
    assert agree(passed({"short": 20.0}), passed({"short": 28.0}), settle_config(thresholds=floors))
    no_gate = settle_config(thresholds=None)  # no floors without a gate: 15% only
    assert not agree(passed({"short": 20.0}), passed({"short": 25.0}), no_gate)
    assert agree(passed({"short": 100.0}), passed({"short": 110.0}), no_gate)


def test_agree_needs_every_figure_and_nothing_at_zero() -> None:
    cfg = settle_config()
    both = {"short": 100.0, "medium": 300.0}
    assert agree(passed(both), passed(both), cfg)
    assert not agree(passed(both), passed({"short": 100.0, "medium": 400.0}), cfg)
    assert not agree(passed({"short": 100.0}), passed(both), cfg)  # medium new: no agreement
    assert not agree(passed({"short": 0.0}), passed({"short": 0.0}), cfg)
    assert not agree(passed({}, {2: 0.0}), passed({}, {2: 0.0}), cfg)  # no steady window


# ---------------------------------------------------------------- the warm-up in a run


async def test_the_warm_up_stops_once_two_passes_agree_on_every_server() -> None:
    # two requests per pass per server (short and medium, one each); the baseline's first
    # pass is twice as slow as the rest, so only its third pass agrees with the one before
    def delay(host: str, n: int) -> float:
        return 0.1 if host == "base.test" and n < 2 else 0.05

    servers = Servers(delay)
    report = await run_benchmark(
        settle_config(baseline_url="http://base.test", settle_max_passes=6),
        transport_factory=servers.factory,
        clock=servers.time,
    )
    state = report.state
    assert state.settled is True
    assert [p.agreed for p in state.candidate.settle] == [False, True, True]
    assert state.baseline is not None
    assert [p.agreed for p in state.baseline.settle] == [False, False, True]
    assert state.baseline.settle[0].latency_ms["short"] == pytest.approx(100, abs=2)
    assert report.summary.warmup == Warmup(candidate_passes=3, baseline_passes=3, settled=True)
    assert report.summary.to_wire()["warmup"] == {
        "candidatePasses": 3,
        "baselinePasses": 3,
        "settled": True,
    }
    assert not any("warm-up did not settle" in r for r in report.verdict.reasons)


async def test_passes_that_never_agree_stop_at_the_pass_cap_and_say_so() -> None:
    servers = Servers(lambda host, n: 0.05 * 1.5 ** (n // 2))  # each pass 50% slower
    progress = Recorder()
    report = await run_benchmark(
        settle_config(settle_max_passes=3),
        transport_factory=servers.factory,
        clock=servers.time,
        progress=progress,
    )
    state = report.state
    assert state.settled is False
    assert len(state.candidate.settle) == 3
    assert not any(p.agreed for p in state.candidate.settle)
    assert report.summary.warmup == Warmup(candidate_passes=3, settled=False)
    assert any(
        r.startswith("the warm-up did not settle (3 pass(es)") for r in report.verdict.reasons
    )
    assert progress.named("unsettled")[0]["passes"] == 3
    assert [f["settle_pass"] for f in progress.named("warmup")] == [1, 2, 3]


async def test_no_pass_starts_after_the_time_cap() -> None:
    servers = Servers(lambda host, n: 0.6 * 1.5 ** (n // 2))  # 1.2 s, then 1.8 s a pass
    report = await run_benchmark(
        settle_config(settle_max_passes=10, settle_max_seconds=2.5),
        transport_factory=servers.factory,
        clock=servers.time,
    )
    assert len(report.state.candidate.settle) == 2  # 1.2 s < 2.5 s, 3.0 s >= 2.5 s
    assert report.state.settled is False


async def test_without_settle_passes_there_is_no_warmup_record() -> None:
    servers = Servers()
    report = await run_benchmark(
        settle_config(settle_max_passes=0), transport_factory=servers.factory, clock=servers.time
    )
    assert report.state.settled is None
    assert report.summary.warmup is None
    assert report.state.candidate.settle == []


# ---------------------------------------------------------------- extra rounds


def run_config(**kw: Any) -> BenchConfig:
    base: dict[str, Any] = {"url": "http://cand.test", "concurrency": (1, 2), "trials": 2}
    return config(**{**base, **kw})


async def test_extra_rounds_measure_only_the_figures_still_open() -> None:
    answers = [
        {FigureKey.latency("medium")},
        {
            FigureKey.latency("medium"),
            FigureKey.concurrency(2),
            FigureKey.latency("long"),
        },  # long: not run
        set(),
    ]
    seen: list[int] = []

    def open_figures(state: RunState) -> set[FigureKey]:
        seen.append(len(state.rounds))
        return answers[len(seen) - 1]

    servers = Servers()
    state = await run(
        run_config(max_trials=6),
        transport_factory=servers.factory,
        clock=servers.time,
        open_figures=open_figures,
    )
    assert seen == [2, 3, 4]  # asked after the first two rounds, then after each extra one
    assert [(r.number, r.classes, r.levels) for r in state.rounds] == [
        (1, ("short", "medium"), (1, 2)),
        (2, ("short", "medium"), (1, 2)),
        (3, ("medium",), ()),
        (4, ("medium",), (2,)),
    ]
    cand = state.candidate
    assert {k: len(v) for k, v in cand.latency.items()} == {"short": 2, "medium": 4}
    assert {k: len(v) for k, v in cand.concurrency.items()} == {1: 2, 2: 3}


async def test_extra_rounds_stop_at_max_trials() -> None:
    calls: list[int] = []

    def always(state: RunState) -> set[FigureKey]:
        calls.append(len(state.rounds))
        return {FigureKey.latency("short")}

    servers = Servers()
    state = await run(
        run_config(max_trials=5), transport_factory=servers.factory, clock=servers.time,
        open_figures=always,
    )  # fmt: skip
    assert len(state.rounds) == 5
    assert calls == [2, 3, 4]
    assert len(state.candidate.latency["short"]) == 5
    assert len(state.candidate.latency["medium"]) == 2
    fixed = await run(
        run_config(), transport_factory=Servers().factory, clock=FakeTime(), open_figures=always
    )
    assert len(fixed.rounds) == 2  # max_trials defaults to trials: no extra round


async def test_no_round_starts_that_would_run_into_the_reserve() -> None:
    # one second a request; round 1 (a warm-up and 3 requests of each class) takes 8 s:
    # 4 s a class, so another round of short is estimated at 1.5 x 4 = 6 s
    assert RESERVE_FRACTION == 0.25
    servers = Servers(lambda host, n: 1.0)
    progress = Recorder()
    state = await run(
        run_config(trials=1, max_trials=10, concurrency=(), deadline_seconds=21.0),
        transport_factory=servers.factory,
        clock=servers.time,
        progress=progress,
        open_figures=lambda state: {FigureKey.latency("short")},
    )
    # after round 1 at about 8 s: 8 + 6 <= 15.75 (three quarters of 21), so round 2 runs
    # (3 s); at about 11 s: 11 + 6 > 15.75, so round 3 does not (an estimate of 1.0 x 4 s, or
    # a reserve of 10%, would let it start)
    assert [r.classes for r in state.rounds] == [("short", "medium"), ("short",)]
    assert state.rounds[0].seconds == pytest.approx(8.0, abs=0.1)
    budget = progress.named("budget")
    assert budget == [{"trial": 3, "open": ["latency:short"]}]
    assert not state.deadline_hit


async def test_without_a_suite_to_run_after_only_the_reports_reserve_is_kept() -> None:
    # as above, with no quality suite: 11 + 6 <= 19.95 (95% of 21) lets round 3 run; at about
    # 14 s, 14 + 6 > 19.95 stops round 4
    servers = Servers(lambda host, n: 1.0)
    progress = Recorder()
    cfg = run_config(trials=1, max_trials=10, concurrency=(), deadline_seconds=21.0)
    cfg = dataclasses.replace(cfg, suite=EMPTY_SUITE, suite_ref="builtin:none")
    assert cfg.budget_reserve == REPORT_RESERVE_FRACTION == 0.05
    state = await run(
        cfg,
        transport_factory=servers.factory,
        clock=servers.time,
        progress=progress,
        open_figures=lambda state: {FigureKey.latency("short")},
    )
    assert [r.classes for r in state.rounds] == [("short", "medium"), ("short",), ("short",)]
    assert progress.named("budget") == [{"trial": 4, "open": ["latency:short"]}]


async def test_the_summary_records_the_plan_and_the_warm_up() -> None:
    servers = Servers()
    report = await run_benchmark(
        settle_config(trials=2, max_trials=5), transport_factory=servers.factory,
        clock=servers.time,
    )  # fmt: skip
    assert report.summary.trial_plan == TrialPlan(min_trials=2, max_trials=5)
    wire = report.summary.to_wire()
    assert wire["trialPlan"] == {"minTrials": 2, "maxTrials": 5}
    assert wire["warmup"] == {"candidatePasses": 2, "settled": True}
    assert report.to_json()["config"]["max_trials"] == 5


async def test_no_prompt_is_sent_twice_to_one_server() -> None:
    # 34 requests a class and round: measured latency indices reach past 2100, where the
    # settling passes' would start if they began at 2000 instead of 5000
    servers = Servers()  # its streams never overlap: 0 tok/s, so no two passes agree
    state = await run(
        run_config(
            baseline_url="http://base.test",
            trials=2,
            max_trials=4,
            iterations=34,
            warmup=2,
            settle_max_passes=3,
            requests_per_stream=2,
            thresholds=Thresholds(max_regression_percent=10),
        ),
        transport_factory=servers.factory,
        clock=servers.time,
        open_figures=lambda state: {FigureKey.latency("short"), FigureKey.concurrency(2)},
    )
    assert len(state.candidate.settle) == 3
    assert len(state.rounds) == 4
    for host, prompts in servers.prompts.items():
        measured = [p for p in prompts if p not in QUALITY_PROMPTS]
        # settle: 3 passes x (2 + 2 latency, 1x2 + 2x2 concurrency); rounds 1-2: 34 + 34
        # latency, 1x2 + 2x2 concurrency; rounds 3-4: 34 short and 2x2 at two streams
        assert len(measured) == 3 * (4 + 6) + 2 * (68 + 6) + 2 * (34 + 4), host
        assert len(set(measured)) == len(measured), host
    assert servers.prompts["cand.test"] == servers.prompts["base.test"]  # paired: same prompts
