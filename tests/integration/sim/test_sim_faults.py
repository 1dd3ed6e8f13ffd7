"""Every injected fault, as a client sees it."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import aiohttp
import pytest

from vllm_operator.sim import Faults

STREAM = {"prompt": "x y", "max_tokens": 6, "stream": True,
          "stream_options": {"include_usage": True}}  # fmt: skip


async def test_error_rate_answers_with_the_chosen_status(
    start_sim: Any, http: aiohttp.ClientSession
) -> None:
    async with start_sim(faults=Faults(error_rate=0.5, error_status=503), seed=7) as sim:
        statuses = []
        for _ in range(40):
            async with http.post(sim.url + "/v1/completions", json=STREAM) as r:
                statuses.append(r.status)
                if r.status == 503:
                    assert (await r.json())["error"]["code"] == 503
                else:
                    await r.read()
    assert set(statuses) == {200, 503}
    assert 8 <= statuses.count(503) <= 32
    async with start_sim(faults=Faults(error_rate=0.5, error_status=503), seed=7) as sim:
        again = []
        for _ in range(40):
            async with http.post(sim.url + "/v1/completions", json=STREAM) as r:
                again.append(r.status)
                await r.read()
    assert again == statuses  # same seed, same draws


async def test_stall_pauses_the_stream_once(start_sim: Any, http: aiohttp.ClientSession) -> None:
    async with start_sim(faults=Faults(stall_after_tokens=2, stall_seconds=0.3)) as sim:
        loop = asyncio.get_running_loop()
        arrivals = []
        async with http.post(sim.url + "/v1/completions", json=STREAM) as r:
            async for raw in r.content:
                if raw.startswith(b"data: {") and b'"text"' in raw:
                    arrivals.append(loop.time())
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert len(arrivals) == 6
    assert gaps[1] >= 0.29  # between token 2 and 3
    assert max(gaps[:1] + gaps[2:]) < 0.2


async def test_truncated_stream_ends_without_done(
    start_sim: Any, http: aiohttp.ClientSession, read_sse: Any
) -> None:
    async with start_sim(faults=Faults(truncate_after_tokens=3)) as sim:  # noqa: SIM117
        async with http.post(sim.url + "/v1/completions", json=STREAM) as r:
            data = await read_sse(r)
    assert len(data) == 3
    assert "[DONE]" not in data
    assert all(json.loads(d)["choices"][0]["finish_reason"] is None for d in data)


async def test_truncated_body_is_incomplete(start_sim: Any, http: aiohttp.ClientSession) -> None:
    async with start_sim(faults=Faults(truncate_after_tokens=3)) as sim:
        with pytest.raises(aiohttp.ClientPayloadError):
            async with http.post(sim.url + "/v1/completions", json={"prompt": "x"}) as r:
                await r.read()


async def test_malformed_chunk_is_not_json(
    start_sim: Any, http: aiohttp.ClientSession, read_sse: Any
) -> None:
    async with start_sim(faults=Faults(malformed_after_tokens=2)) as sim:
        async with http.post(sim.url + "/v1/completions", json=STREAM) as r:
            data = await read_sse(r)
        async with http.post(sim.url + "/v1/completions", json={"prompt": "x"}) as r:
            body = await r.read()
    for d in data[:2]:
        json.loads(d)
    with pytest.raises(json.JSONDecodeError):
        json.loads(data[2])
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)


async def test_drop_resets_the_connection(start_sim: Any, http: aiohttp.ClientSession) -> None:
    async with start_sim(faults=Faults(drop_after_tokens=2)) as sim:
        got: list[bytes] = []

        async def read_stream() -> None:
            async with http.post(sim.url + "/v1/completions", json=STREAM) as r:
                async for raw in r.content:
                    if raw.startswith(b"data: "):
                        got.append(raw)

        with pytest.raises((aiohttp.ClientPayloadError, aiohttp.ClientOSError)):
            await read_stream()
        assert len(got) == 2
        with pytest.raises((aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError,
                            aiohttp.ClientOSError)):  # fmt: skip
            async with http.post(sim.url + "/v1/completions", json={"prompt": "x"}) as r:
                await r.read()
        async with http.get(sim.url + "/health") as r:  # the server itself is fine
            assert r.status == 200


async def test_wrong_usage_overstates_completion_tokens(
    start_sim: Any, http: aiohttp.ClientSession, read_sse: Any
) -> None:
    async with start_sim(faults=Faults(wrong_usage=True)) as sim:  # noqa: SIM117
        async with http.post(sim.url + "/v1/completions", json=STREAM) as r:
            data = await read_sse(r)
    chunks = [json.loads(d) for d in data[:-1]]
    streamed = sum(1 for c in chunks if c["choices"])
    assert streamed == 6
    assert chunks[-1]["usage"]["completion_tokens"] == 7


async def test_dead_engine_fails_health_and_requests(
    start_sim: Any, http: aiohttp.ClientSession
) -> None:
    async with start_sim(faults=Faults(die_after_seconds=0.2), itl_ms=50.0) as sim:
        async with http.get(sim.url + "/health") as r:
            assert r.status == 200
        long_body = {"prompt": "x", "max_tokens": 100, "stream": True}
        cut = False
        try:
            async with http.post(sim.url + "/v1/completions", json=long_body) as r:
                await r.read()
        except (aiohttp.ClientPayloadError, aiohttp.ClientOSError):
            cut = True
        assert cut  # 100 tokens x 50 ms outlive the engine
        async with http.get(sim.url + "/health") as r:
            assert r.status == 503
        async with http.post(sim.url + "/v1/completions", json={"prompt": "x"}) as r:
            assert r.status == 500
            assert "EngineDeadError" in (await r.json())["error"]["message"]
        async with http.get(sim.url + "/metrics") as r:
            assert r.status == 200
