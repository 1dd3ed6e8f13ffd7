"""The candidate and its twin are loaded at the same moments (issue 40, ``bench.load.sweep``).

On a shared machine a burst of someone else's load slows whichever server is being measured
while it lasts. Measured one after the other, each in its own window, the burst moved one
server's tail and not the other's, and an A/A gate read the difference as a regression
(docs/bench.md, "On a loaded machine"). Here a scripted pair of servers answers slowly for a
while (the "burst", in the event loop's own time, starting shortly after the first request):
both servers' requests of that moment must be slowed alike. The servers are httpx mock
transports over the real runner and sweep; the time is the real event loop's (short levels,
the burst far longer than any stall of a loaded test machine).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from test_bench_runner import server
from test_bench_sweep import Words

from vllm_operator.api.workload import WorkloadSpec
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.http.transport import HttpxTransport, Transport
from vllm_operator.bench.run_state import Clock, RunState
from vllm_operator.bench.runner import run

BURST_FROM, BURST_TO = 0.2, 0.6
"""The burst, in seconds after the first measured request reached a server."""
SLOW = 1.0
"""How long a request that arrives during the burst waits before its answer (s)."""


def config(mode: str = "rate") -> BenchConfig:
    load: dict[str, Any] = {"mode": mode, "secondsPerLevel": 1}
    load.update({"rates": [40]} if mode == "rate" else {"concurrency": [4]})
    workload = WorkloadSpec.model_validate(
        {"synthetic": {"inputTokens": {"mean": 8}, "outputTokens": {"mean": 3}}, "load": load}
    )
    return BenchConfig(
        url="http://cand:8000",
        baseline_url="http://base:8000",
        model="m",
        workload=workload,
        traffic=Words(),
        trials=1,
        max_trials=1,
        warmup=0,
        settle_max_passes=0,
    )


def with_burst(cfg: BenchConfig) -> RunState:
    """``cfg`` run against two servers that both answer ``SLOW`` s late during the burst."""
    first: list[float] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        if request.url.path == "/version":
            return httpx.Response(404)
        now = asyncio.get_running_loop().time()
        if not first:
            first.append(now)
        if BURST_FROM <= now - first[0] < BURST_TO:
            await asyncio.sleep(SLOW)
        return server(json.loads(request.content))

    def make(config: BenchConfig, clock: Clock) -> Transport:
        return HttpxTransport(clock=clock, transport=httpx.MockTransport(handler))

    return asyncio.run(run(cfg, transport_factory=make))


def slowed(state: RunState, role: str) -> int:
    """Requests of ``role``'s measured runs that the burst slowed."""
    chosen = state.candidate if role == "candidate" else state.baseline
    assert chosen is not None
    records = [r for run_ in chosen.load for r in run_.records]
    assert records
    assert all(r.ok for r in records), [r.detail for r in records if not r.ok][:3]
    return sum(1 for r in records if r.ttft >= SLOW / 2)


def test_a_load_burst_slows_the_candidate_and_its_twin_alike() -> None:
    state = with_burst(config())
    cand, twin = slowed(state, "candidate"), slowed(state, "baseline")
    # 40/s for the 0.4 s of the burst: about 16 requests of each server; measured one
    # after the other, the twin's window came after the burst and it had none
    assert cand >= 5
    assert twin >= 5
    assert abs(cand - twin) <= 3, (cand, twin)
    cand_run, twin_run = state.candidate.load[0], state.baseline.load[0]  # type: ignore[union-attr]
    assert cand_run.started == twin_run.started  # one start: the same arrival moments
    assert [r.offset for r in cand_run.records] == [r.offset for r in twin_run.records]


def test_closed_loop_streams_of_both_servers_run_at_the_same_moments() -> None:
    state = with_burst(config("concurrency"))
    cand, twin = slowed(state, "candidate"), slowed(state, "baseline")
    assert cand >= 1
    assert twin >= 1
    assert abs(cand - twin) <= 2, (cand, twin)


def test_a_dead_candidate_beside_a_healthy_twin_still_ends_the_run() -> None:
    # requests to both servers interleave: the twin's answers must not reset the
    # candidate's count of failures in a row
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        if request.url.path == "/version":
            return httpx.Response(404)
        return server(json.loads(request.content), fail=request.url.host == "cand")

    def make(config: BenchConfig, clock: Clock) -> Transport:
        return HttpxTransport(clock=clock, transport=httpx.MockTransport(handler))

    state = asyncio.run(run(config(), transport_factory=make))
    assert state.aborted is not None
    assert state.aborted.startswith("3 requests in a row failed"), state.aborted
