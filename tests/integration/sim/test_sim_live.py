"""Faults only live traffic meets, and the HTTP counter a canary reads errors from."""

from __future__ import annotations

from typing import Any

import aiohttp

from vllm_operator.rollout.canary.metrics import parse_metrics
from vllm_operator.sim import Faults

BODY = {"prompt": "x y", "max_tokens": 4}
LIVE = {"x-sim-live": "1"}


async def _send(http: aiohttp.ClientSession, url: str, n: int, live: bool) -> list[int]:
    statuses = []
    for _ in range(n):
        async with http.post(url + "/v1/completions", json=BODY, headers=LIVE if live else {}) as r:
            await r.read()
            statuses.append(r.status)
    return statuses


async def test_live_errors_only_on_live_requests_and_counted_as_5xx(
    start_sim: Any, http: aiohttp.ClientSession
) -> None:
    async with start_sim(faults=Faults(live_error_rate=0.5), seed=3) as sim:
        assert set(await _send(http, sim.url, 30, live=False)) == {200}  # the benchmark's
        live = await _send(http, sim.url, 40, live=True)
        failed = live.count(500)
        assert 8 <= failed <= 32
        async with http.get(sim.url + "/metrics") as r:
            counts = parse_metrics(await r.text())
    assert counts.http_requests == 70  # /metrics itself is not counted
    assert counts.http_errors == failed
    assert counts.finished == 70 - failed
    assert counts.errors == failed


async def test_live_delay_shows_in_ttft_only_for_live_requests(
    start_sim: Any, http: aiohttp.ClientSession
) -> None:
    async with start_sim(faults=Faults(live_delay_seconds=0.3)) as sim:
        await _send(http, sim.url, 5, live=False)
        async with http.get(sim.url + "/metrics") as r:
            before = dict(parse_metrics(await r.text()).histograms["ttft"])
        await _send(http, sim.url, 5, live=True)
        async with http.get(sim.url + "/metrics") as r:
            after = dict(parse_metrics(await r.text()).histograms["ttft"])
    assert before[0.25] == 5  # synthetic requests: fast
    assert after[0.25] == 5  # the live ones all above 250 ms ...
    assert after[float("inf")] == 10
    assert after[0.5] == 10  # ... and below 500 ms
