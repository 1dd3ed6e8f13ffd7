"""The load sweep's order (``bench.load.sweep``) against a scripted server: no sockets, no sleeps.

Closed-loop levels on a counter clock (1 ms a reading), so a level's "seconds" pass after a
fixed number of clock readings; the gate's callbacks are stand-ins that say which level is
open or breached, so the test sees exactly which rounds the sweep runs and in which order.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from test_bench_runner import counter, factory, server

from vllm_operator.api.workload import WorkloadSpec
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.http.request import ChatRequest
from vllm_operator.bench.http.transport import HttpxTransport, Transport
from vllm_operator.bench.load.send import MAX_RUN_REQUESTS
from vllm_operator.bench.run_state import Clock, RunState
from vllm_operator.bench.runner import run
from vllm_operator.gate.finding import FigureKey


class Words:
    def request(self, index: int) -> ChatRequest:
        return ChatRequest(prompt=f"request {index}", max_tokens=3)

    def describe(self) -> dict[str, Any]:
        return {"kind": "words"}


def config(**more: Any) -> BenchConfig:
    workload = WorkloadSpec.model_validate(
        {
            "synthetic": {"inputTokens": {"mean": 8}, "outputTokens": {"mean": 3}},
            "load": {"mode": "concurrency", "concurrency": [1, 2, 4], "secondsPerLevel": 1},
        }
    )
    return BenchConfig(
        url="http://cand:8000",
        baseline_url="http://base:8000",
        model="m",
        workload=workload,
        traffic=Words(),
        trials=2,
        max_trials=4,
        **more,
    )


def sweep(cfg: BenchConfig, open_level: str | None, breach: float | None) -> RunState:
    def open_figures(state: RunState) -> set[FigureKey]:
        return set() if open_level is None else {FigureKey("load", open_level)}

    def breached(state: RunState, level: float) -> bool:
        return level == breach

    return asyncio.run(
        run(
            cfg,
            transport_factory=factory(),
            clock=counter(),
            open_figures=open_figures,
            breached=breached,
        )
    )


def trials(state: RunState, role: str) -> list[tuple[float, int]]:
    server = state.candidate if role == "candidate" else state.baseline
    assert server is not None
    return [(r.level, r.trial) for r in server.load]


def test_open_levels_get_more_trials_and_the_sweep_stops_at_the_breach() -> None:
    state = sweep(config(), open_level="1", breach=2)
    expected = [(1.0, t) for t in range(4)] + [(2.0, 0), (2.0, 1)]
    assert trials(state, "candidate") == expected
    assert trials(state, "baseline") == expected
    assert state.load_stopped_at == 2
    assert not state.deadline_hit
    assert state.aborted is None
    # paired rounds load both servers from one start (issue 40), and alternate which one
    # the client serves first: candidate in even trials, baseline in odd
    cand, base = state.candidate.load, state.baseline.load  # type: ignore[union-attr]
    assert all(c.started == b.started for c, b in zip(cand, base, strict=True))
    order = [
        c.records[0].dispatched_at < b.records[0].dispatched_at  # type: ignore[operator]
        for c, b in zip(cand, base, strict=True)
    ]
    assert order == [True, False, True, False, True, False]
    # one warm-up run per server before each level it reached (a level brings new shapes)
    warm = state.candidate.load_warmup
    assert [(r.level, len(r.records) > 0) for r in warm] == [(1.0, True), (2.0, True)]
    for run_ in warm:  # each level's warm-up comes after the trials below it, before its own
        below = [t for t in cand if t.level < run_.level]
        own = [t for t in cand if t.level == run_.level]
        assert all(t.started < run_.started for t in below)
        assert all(run_.started < t.started for t in own)
    every = [r for s in state.servers for run_ in (*s.load_warmup, *s.load) for r in run_.records]
    assert all(r.ok for r in every), [r.detail for r in every if not r.ok][:3]


def test_without_a_breach_every_level_runs_and_nothing_open_means_trials_only() -> None:
    state = sweep(config(warmup=0), open_level=None, breach=None)
    assert trials(state, "candidate") == [(lv, t) for lv in (1.0, 2.0, 4.0) for t in range(2)]
    assert state.load_stopped_at is None
    assert state.candidate.load_warmup == []
    # a breach at the last level stops nothing: it is not recorded as an early stop
    last = sweep(config(warmup=0), open_level=None, breach=4)
    assert last.load_stopped_at is None
    assert len(last.candidate.load) == 6


def test_both_servers_get_the_same_requests_numbered_per_level_and_trial() -> None:
    sent: dict[str, list[int]] = {"cand": [], "base": []}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        if request.url.path == "/version":
            return httpx.Response(404)
        body = json.loads(request.content)
        sent[request.url.host].append(int(body["messages"][-1]["content"].split()[-1]))
        return server(body)

    def make(cfg: BenchConfig, clock: Clock) -> Transport:
        return HttpxTransport(clock=clock, transport=httpx.MockTransport(handler))

    cfg = config(warmup=0)
    asyncio.run(run(cfg, transport_factory=make, clock=counter()))
    blocks: dict[str, dict[int, list[int]]] = {"cand": {}, "base": {}}
    for host, indices in sent.items():
        for i in indices:
            blocks[host].setdefault(i // MAX_RUN_REQUESTS, []).append(i)
    assert blocks["cand"].keys() == blocks["base"].keys()
    assert len(blocks["cand"]) == 6  # 3 levels x 2 trials, each its own block
    for block, cand in blocks["cand"].items():
        base = blocks["base"][block]
        first = block * MAX_RUN_REQUESTS
        # each server sent requests first, first + 1, ... of its block: the same requests
        assert sorted(cand) == list(range(first, first + len(cand)))
        assert sorted(base) == list(range(first, first + len(base)))
