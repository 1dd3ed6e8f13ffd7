"""Extra trials go first to the levels that can still be decided (issue 29, ``bench.load.sweep``):
a level whose tail limit cannot be shown met by the rounds that still fit gets no extra
round, and the levels after it run; a level that can be decided keeps getting them."""

from __future__ import annotations

import asyncio
from typing import Any

from test_bench_runner import counter, factory
from test_bench_sweep import config, trials

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.run_state import RunState
from vllm_operator.bench.runner import run


def sweep(cfg: BenchConfig, open_level: str) -> RunState:
    """The sweep on a slower counter clock (4 ms a reading): about 60 requests a trial."""

    def open_figures(state: RunState) -> set[tuple[str, str]]:
        return {("load", open_level)}

    return asyncio.run(
        run(cfg, transport_factory=factory(), clock=counter(0.004), open_figures=open_figures)
    )


def thresholds(**slo: Any) -> Thresholds:
    return Thresholds.model_validate({"slo": slo})


def test_a_level_that_cannot_be_decided_gets_no_extra_round() -> None:
    # a p99 needs hundreds of requests; four 1 s trials of one stream bring fewer
    state = sweep(
        config(warmup=0, thresholds=thresholds(ttftMs={"p99": 1000})),
        open_level="1",
    )
    runs = state.candidate.load_runs(1.0)
    assert 4 * sum(len(r.records) for r in runs) / len(runs) < 630  # cannot reach it
    assert trials(state, "candidate") == [(lv, t) for lv in (1.0, 2.0, 4.0) for t in range(2)]


def test_a_level_that_can_be_decided_keeps_its_extra_rounds() -> None:
    # a median needs a handful of requests: level 1 gets its 4 trials as before
    state = sweep(
        config(warmup=0, thresholds=thresholds(ttftMs={"p50": 1000})),
        open_level="1",
    )
    expected = [(1.0, t) for t in range(4)] + [(lv, t) for lv in (2.0, 4.0) for t in range(2)]
    assert trials(state, "candidate") == expected


def test_the_last_level_is_not_held_back() -> None:
    state = sweep(
        config(warmup=0, thresholds=thresholds(ttftMs={"p99": 1000})),
        open_level="4",
    )
    assert [t for lv, t in trials(state, "candidate") if lv == 4.0] == [0, 1, 2, 3]
