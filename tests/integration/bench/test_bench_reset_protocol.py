"""A reset or a reply that is not HTTP is named as such, not counted as a time-out (issue 20).

Raw TCP servers on loopback: one resets every connection (RST, SO_LINGER 0), one answers in
another protocol, one closes without a word. Either on bench's first request (GET
/v1/models, which aborts the run) or on the measured requests after a correct /v1/models.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator

import pytest
from hostile_servers import MODEL, MODELS_BODY

from vllm_operator.bench import run_benchmark
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.prompts import DEFAULT_CLASSES
from vllm_operator.gate.classes import kind_of

MODELS_REPLY = (
    b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/json\r\n"
    + f"content-length: {len(MODELS_BODY)}\r\n\r\n".encode()
    + MODELS_BODY.encode()
)


async def _reply(how: str, writer: asyncio.StreamWriter) -> None:
    if how == "reset":
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        return
    if how == "not-http":
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")
        await writer.drain()
    writer.close()


def _server(how: str, *, models_ok: bool) -> object:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            # The whole request is read first: closing with unread bytes would send a reset
            # whatever the case is about.
            for line in head.lower().split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    await reader.readexactly(int(line.split(b":", 1)[1]))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        if models_ok and head.startswith(b"GET "):
            writer.write(MODELS_REPLY)
            await writer.drain()
            writer.close()
            return
        await _reply(how, writer)

    return handle


@pytest.fixture
async def serve() -> AsyncIterator[object]:
    servers: list[asyncio.Server] = []

    async def start(how: str, *, models_ok: bool) -> str:
        server = await asyncio.start_server(
            _server(how, models_ok=models_ok),  # type: ignore[arg-type]
            "127.0.0.1",
            0,
        )
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()


def _config(url: str, client: str) -> BenchConfig:
    return BenchConfig(
        url=url,
        model=MODEL,
        prompt_classes=DEFAULT_CLASSES[1:2],
        iterations=2,
        warmup=0,
        concurrency=(),
        deadline_seconds=20.0,
        request_timeout=10.0,
        client=client,
    )


EXPECTED = {
    # aiohttp parses the status line and says it is not HTTP; h11 (httpx) closes and
    # reports the same as a reset.
    ("aiohttp", "reset"): "reset",
    ("aiohttp", "not-http"): "protocol",
    ("aiohttp", "silent-close"): "reset",
    ("httpx", "reset"): "reset",
    ("httpx", "not-http"): "reset",
    ("httpx", "silent-close"): "reset",
}


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
@pytest.mark.parametrize("how", ["reset", "not-http", "silent-close"])
async def test_first_request_names_the_failure_and_aborts(
    serve: object, client: str, how: str
) -> None:
    url = await serve(how, models_ok=False)  # type: ignore[operator]
    report = await run_benchmark(_config(url, client))
    name = EXPECTED[(client, how)]
    assert dict(report.summary.errors) == {name: 1}
    assert report.state.aborted is not None
    assert report.exit_code == 3
    assert kind_of(name) == "measurement"


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
@pytest.mark.parametrize("how", ["reset", "not-http"])
async def test_measured_requests_name_the_failure(serve: object, client: str, how: str) -> None:
    url = await serve(how, models_ok=True)  # type: ignore[operator]
    report = await run_benchmark(_config(url, client))
    errors = dict(report.summary.errors)
    assert set(errors) == {EXPECTED[(client, how)]}, errors
    assert "timeout" not in errors
