"""``hack/gpu/delay_proxy.py``: every response byte of the upstream reaches the client at
least the delay after it arrived, in order and unchanged, so a simulator behind it streams
the same tokens with its first and last ones that much later (issue 40: the lead's GPU run
regresses the candidate by the size ``render`` states). Loopback only."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[3]
DELAY_MS = 250.0


def _proxy_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "delay_proxy", ROOT / "hack" / "gpu" / "delay_proxy.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


proxy = _proxy_module()


async def _stream(http: aiohttp.ClientSession, url: str) -> tuple[list[str], list[float]]:
    """The SSE payloads of one streamed completion, each with its seconds since the send."""
    body = {"prompt": "a b c", "max_tokens": 6, "stream": True}
    sent = time.monotonic()
    data, when = [], []
    async with http.post(url + "/v1/completions", json=body) as r:
        assert r.status == 200
        async for raw in r.content:
            line = raw.decode().strip()
            if line.startswith("data: "):
                data.append(line[6:])
                when.append(time.monotonic() - sent)
    return data, when


async def test_the_simulator_behind_the_proxy_streams_the_same_tokens_later(
    start_sim: Any, http: aiohttp.ClientSession
) -> None:
    async with start_sim(ttft_ms=20.0, itl_ms=10.0) as sim:
        port = int(sim.url.rsplit(":", 1)[1])
        server = await proxy.start(proxy.Settings("127.0.0.1", port, DELAY_MS))
        try:
            url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            direct, _ = await _stream(http, sim.url)
            delayed, when = await _stream(http, url)
        finally:
            server.close()
            await server.wait_closed()
    assert delayed[-1] == direct[-1] == "[DONE]"
    texts = [json.loads(d)["choices"][0]["text"] for d in delayed[:-1]]
    assert texts == [json.loads(d)["choices"][0]["text"] for d in direct[:-1]]
    # no byte reaches the client before the delay after the request: TTFT and E2E + 250 ms
    assert when[0] >= DELAY_MS / 1000
    assert when[-1] >= DELAY_MS / 1000


async def test_each_chunk_is_held_the_delay_after_it_arrived_and_gaps_are_kept() -> None:
    """A scripted upstream sends three chunks 150 ms apart; each reaches the client no sooner
    than the delay after the upstream wrote it, so the gaps between tokens stay."""
    written: list[float] = []

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
        for i in range(3):
            if i:
                await asyncio.sleep(0.15)
            written.append(time.monotonic())
            writer.write(f"chunk{i}\n".encode())
            await writer.drain()
        writer.close()

    up = await asyncio.start_server(upstream, "127.0.0.1", 0)
    server = await proxy.start(
        proxy.Settings("127.0.0.1", up.sockets[0].getsockname()[1], DELAY_MS)
    )
    received: list[tuple[float, bytes]] = []
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", server.sockets[0].getsockname()[1]
        )
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")
        while line := await asyncio.wait_for(reader.readline(), 30):
            received.append((time.monotonic(), line))
        writer.close()
    finally:
        server.close()
        up.close()
        await server.wait_closed()
        await up.wait_closed()
    assert [line for _, line in received] == [b"chunk0\n", b"chunk1\n", b"chunk2\n"]
    for (got, _), sent in zip(received, written, strict=True):
        assert got - sent >= DELAY_MS / 1000 - 0.001  # never sooner than the delay
    assert received[2][0] - received[0][0] >= 0.3 - 0.002  # the 2 x 150 ms gaps kept


async def _ask(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    return answer


async def test_what_cannot_be_forwarded_is_answered_with_its_status() -> None:
    # the upstream port is closed: 502; a chunked body: 411; a body past 16 MiB: 413
    closed = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    free = closed.sockets[0].getsockname()[1]
    closed.close()
    await closed.wait_closed()
    server = await proxy.start(proxy.Settings("127.0.0.1", free, DELAY_MS))
    port = server.sockets[0].getsockname()[1]
    try:
        down = await _ask(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        chunked = await _ask(
            port, b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        huge = await _ask(port, b"POST / HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n")
        head = await _ask(port, b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n")
    finally:
        server.close()
        await server.wait_closed()
    assert down.startswith(b"HTTP/1.1 502 ")
    assert chunked.startswith(b"HTTP/1.1 411 ")
    assert huge.startswith(b"HTTP/1.1 413 ")
    assert head.startswith(b"HTTP/1.1 431 ")
