"""A loopback HTTP delay line in front of a vLLM server: a regression of exactly N ms.

Issue 40 asks for "one regression of the size ``render`` states as the plan's power Failed"
on a real GPU. A slower vLLM (``--max-num-seqs 4``) regresses by an amount nobody chose;
this proxy regresses by the stated amount. It listens on 127.0.0.1, forwards each request
to the upstream server unchanged (one request per connection, ``Connection: close``), and
writes every byte of the response ``--delay-ms`` after it arrived. So the first token comes
N ms later (TTFT + N), the last one too (end-to-end latency + N), and the gaps between
chunks are kept (inter-token latency unchanged): the candidate's TTFT and E2E distributions
shifted by exactly N ms, the regression ``gate/power.py`` states.

Bounded: at most ``--max-connections`` requests at once (others wait in the listen
backlog), request heads up to 64 KiB and bodies up to 16 MiB (``Content-Length`` only; a
chunked request body is answered 411), a head must arrive within 30 s, the upstream must
accept within 10 s, and at most 4,096 response chunks wait in the delay line (then the
upstream is read no faster than the delay line drains). Standard library only, so it runs
beside the GPU kit with nothing installed.

Run: ``python3 hack/gpu/delay_proxy.py --upstream 127.0.0.1:8000 --listen-port 8100
--delay-ms 150`` and point the candidate side of the bench at http://127.0.0.1:8100.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
HEAD_SECONDS = 30.0
CONNECT_SECONDS = 10.0
QUEUE_CHUNKS = 4096
READ_BYTES = 65536
DROPPED = {b"connection", b"keep-alive", b"proxy-connection"}


@dataclass(frozen=True)
class Settings:
    upstream_host: str
    upstream_port: int
    delay_ms: float
    max_connections: int = 256


class BadRequest(Exception):
    """The client's request cannot be forwarded: (status, reason)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """The client's request, its head rewritten to ``Connection: close``, body included."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
    except asyncio.LimitOverrunError as exc:
        raise BadRequest(431, "Request Header Fields Too Large") from exc
    except (asyncio.IncompleteReadError, TimeoutError) as exc:
        raise BadRequest(400, "Bad Request") from exc
    lines = head[:-4].split(b"\r\n")
    kept = [lines[0]]
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key in DROPPED:
            continue
        if key == b"transfer-encoding":
            raise BadRequest(411, "Length Required")
        if key == b"content-length":
            try:
                length = int(value.strip())
            except ValueError as exc:
                raise BadRequest(400, "Bad Request") from exc
            if not 0 <= length <= MAX_BODY:
                raise BadRequest(413, "Content Too Large")
        kept.append(line)
    kept.append(b"Connection: close")
    try:
        body = await asyncio.wait_for(reader.readexactly(length), HEAD_SECONDS)
    except (asyncio.IncompleteReadError, TimeoutError) as exc:
        raise BadRequest(400, "Bad Request") from exc
    return b"\r\n".join(kept) + b"\r\n\r\n" + body


async def relay(upstream: asyncio.StreamReader, client: asyncio.StreamWriter, delay: float) -> None:
    """Every upstream chunk to the client ``delay`` seconds after it arrived."""
    line: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(QUEUE_CHUNKS)

    async def read() -> None:
        while True:
            chunk = await upstream.read(READ_BYTES)
            await line.put((time.monotonic(), chunk))
            if not chunk:
                return

    reading = asyncio.create_task(read())
    try:
        while True:
            arrived, chunk = await line.get()
            wait = arrived + delay - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not chunk:
                return
            client.write(chunk)
            await client.drain()
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await reading


async def handle(
    settings: Settings,
    gate: asyncio.Semaphore,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    async with gate:
        try:
            request = await read_request(reader)
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection(settings.upstream_host, settings.upstream_port),
                    CONNECT_SECONDS,
                )
            except (OSError, TimeoutError) as exc:
                raise BadRequest(502, "Bad Gateway") from exc
            try:
                up_writer.write(request)
                await up_writer.drain()
                await relay(up_reader, writer, settings.delay_ms / 1000)
            finally:
                up_writer.close()
                with contextlib.suppress(ConnectionError):
                    await up_writer.wait_closed()
        except BadRequest as exc:
            reply = f"HTTP/1.1 {exc.status} {exc.reason}\r\nContent-Length: 0\r\n"
            writer.write(reply.encode() + b"Connection: close\r\n\r\n")
        except ConnectionError:
            pass  # the client or the upstream went away: nothing to tell anyone
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def start(settings: Settings, port: int = 0) -> asyncio.Server:
    """The proxy listening on 127.0.0.1:``port`` (0: any free port) in the running loop."""
    gate = asyncio.Semaphore(settings.max_connections)

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handle(settings, gate, reader, writer)

    return await asyncio.start_server(on_client, "127.0.0.1", port, limit=MAX_HEAD)


def _parse(argv: Sequence[str]) -> tuple[Settings, int]:
    p = argparse.ArgumentParser(
        prog="delay_proxy.py",
        description="Forward to a vLLM server, every response byte --delay-ms late.",
    )
    p.add_argument("--upstream", required=True, help="HOST:PORT of the vLLM server")
    p.add_argument("--listen-port", type=int, required=True, help="port on 127.0.0.1")
    p.add_argument("--delay-ms", type=float, required=True, help="added to TTFT and E2E")
    p.add_argument("--max-connections", type=int, default=256)
    args = p.parse_args(argv)
    host, _, port = args.upstream.rpartition(":")
    if not host or not port.isdigit():
        p.error("--upstream: use HOST:PORT, e.g. 127.0.0.1:8000")
    if not 0 <= args.delay_ms <= 600_000:
        p.error("--delay-ms: use 0 to 600000")
    if not 1 <= args.max_connections <= 10_000:
        p.error("--max-connections: use 1 to 10000")
    return Settings(host, int(port), args.delay_ms, args.max_connections), args.listen_port


async def _serve(settings: Settings, port: int) -> None:
    server = await start(settings, port)
    print(
        f"delay_proxy: 127.0.0.1:{port} -> {settings.upstream_host}:{settings.upstream_port}, "
        f"+{settings.delay_ms:g} ms",
        file=sys.stderr,
    )
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> None:
    settings, port = _parse(sys.argv[1:] if argv is None else argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(settings, port))


if __name__ == "__main__":
    main()
