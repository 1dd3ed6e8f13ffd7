"""Faults only live traffic meets, and the HTTP counter a canary reads errors from."""

from __future__ import annotations

import asyncio
import os
import subprocess
from typing import Any

import aiohttp
import pytest

from vllm_operator.rollout.canary.metrics import parse_metrics
from vllm_operator.sim import Faults, SimProcess

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


STREAM = {"prompt": "x y", "max_tokens": 8, "stream": True}


async def _stream(http: aiohttp.ClientSession, url: str) -> tuple[int, list[str]]:
    async with http.post(url + "/v1/completions", json=STREAM, headers=LIVE) as r:
        lines = [ln.strip() for ln in (await r.text()).splitlines() if ln.startswith("data:")]
        return r.status, lines


async def _counts(http: aiohttp.ClientSession, url: str) -> Any:
    async with http.get(url + "/metrics") as r:
        return parse_metrics(await r.text())


async def test_a_stream_breaks_after_its_header_as_vllm_s_does(
    start_sim: Any, http: aiohttp.ClientSession
) -> None:
    async with start_sim(faults=Faults(live_stream_error_rate=1.0)) as sim:
        status, lines = await _stream(http, sim.url)
        counts = await _counts(http, sim.url)
        async with http.post(sim.url + "/v1/completions", json=BODY, headers=LIVE) as r:
            assert r.status == 500  # without streaming, the error is the answer
    assert status == 200
    assert len(lines) == 3, lines  # one token, the error chunk, [DONE]
    assert '"error"' in lines[1]
    assert lines[2] == "data: [DONE]"
    # What vLLM's own counters show: a 2xx, and no finished request.
    assert counts.http_requests == 1
    assert counts.http_errors == 0
    assert counts.finished == 0


async def test_a_hung_request_holds_until_the_client_gives_up(
    start_sim: Any, http: aiohttp.ClientSession
) -> None:
    async with start_sim(faults=Faults(live_hang_rate=1.0)) as sim:
        timeout = aiohttp.ClientTimeout(total=0.5)
        async with http.post(
            sim.url + "/v1/completions", json=STREAM, headers=LIVE, timeout=timeout
        ) as r:
            assert r.status == 200  # the header came, then nothing
            with pytest.raises(TimeoutError):
                await r.read()

        async def counted() -> Any:
            counts = await _counts(http, sim.url)
            return counts if counts.http_requests == 1 else None

        counts = await _until(counted, 10)
    assert counts.http_errors == 0  # a 2xx ...
    assert counts.finished == 0  # ... never finished
    assert counts.histograms["ttft"][-1][1] == 0


async def test_live_faults_change_at_run_time_and_refuse_bad_values(
    start_sim: Any, http: aiohttp.ClientSession
) -> None:
    async with start_sim() as sim:
        url = sim.url + "/sim/live-faults"
        async with http.post(url, json={"streamErrorRate": 2}) as r:
            assert r.status == 400
        async with http.post(url, json={"hangrate": 1}) as r:
            assert r.status == 400  # an unknown key is refused, not ignored
        async with http.post(url, json={"streamErrorRate": 1}) as r:
            assert (await r.json())["streamErrorRate"] == 1
        status, lines = await _stream(http, sim.url)
        assert status == 200
        assert '"error"' in lines[1]
        async with http.post(url, json={"metricsStatus": 503}) as r:
            assert r.status == 200
        async with http.get(sim.url + "/metrics") as r:
            assert r.status == 503  # a scrape that fails
        async with http.post(url, json={"metricsStatus": 404}) as r:
            assert r.status == 400
        async with http.post(url, json={"crashAfterSeconds": 0}) as r:
            assert r.status == 200

        async def down() -> bool | None:
            try:
                async with http.get(sim.url + "/health") as r:
                    return True if r.status == 503 else None
            except aiohttp.ClientError:
                return True

        await _until(down, 10)


async def _until(check: Any, seconds: float) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        found = await check()
        if found is not None:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_a_crash_ends_the_process_with_status_1() -> None:
    """--sim-crash-after-seconds (or POST /sim/live-faults crashAfterSeconds) in a process
    of its own: it exits, as a server the OOM killer ended, for its kubelet to restart."""
    env = dict(os.environ, VLLMOP_SIM_WARMUP_SECONDS="0", VLLMOP_SIM_CRASH_AFTER_SECONDS="0.3")
    sim = SimProcess.start(["m", "--port", "0"], env=env, stderr=subprocess.DEVNULL)
    assert sim.proc.wait(timeout=30) == 1
