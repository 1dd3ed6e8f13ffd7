"""Simulators in the test's own event loop, fast (scaled time, no warm-up)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import aiohttp
import pytest

from vllm_operator.sim import SimConfig, SimServer

StartSim = Callable[..., AbstractAsyncContextManager[SimServer]]


@pytest.fixture
def start_sim() -> StartSim:
    """``async with start_sim(**SimConfig.create kwargs) as sim:`` (fast timing by default)."""

    @asynccontextmanager
    async def start(**kwargs: Any) -> AsyncIterator[SimServer]:
        kwargs.setdefault("warmup_seconds", 0.0)
        kwargs.setdefault("ttft_ms", 5.0)
        kwargs.setdefault("itl_ms", 1.0)
        kwargs.setdefault("host", "127.0.0.1")
        kwargs.setdefault("port", 0)
        model = kwargs.pop("model", "sim-model")
        async with SimServer(SimConfig.create(model, **kwargs)) as sim:
            yield sim

    return start


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


ReadSSE = Callable[[aiohttp.ClientResponse], Awaitable[list[str]]]


@pytest.fixture
def read_sse() -> ReadSSE:
    """``await read_sse(resp)``: the ``data:`` payloads of an SSE body, in order."""

    async def read(resp: aiohttp.ClientResponse) -> list[str]:
        out = []
        async for raw in resp.content:
            line = raw.decode().strip()
            if line.startswith("data: "):
                out.append(line[6:])
        return out

    return read
