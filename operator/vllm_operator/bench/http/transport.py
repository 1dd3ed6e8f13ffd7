"""The HTTP seam: how bytes get to and from the server, and nothing else.

The benchmark measures the server through its client, so the client's own delay is part of
every figure. Measured against the simulator's server-side timestamps
(``benchmarks/bench_accuracy.py``, docs/bench.md), httpx adds several milliseconds of TTFT
at a few streams and tens at 64, aiohttp about one: aiohttp is the default, httpx stays
available behind the same two-method interface for comparison and for tests.

A transport only moves raw bytes. It does not parse SSE (``bench.http.sse`` does, so line-length
limits of a library never apply) and does not classify failures beyond the exceptions
below, which the request code maps to error classes. Both transports are bounded against a
hostile server: redirects are never followed (the caller sees the 3xx), compressed bodies
are inflated by ``bench.http.bounded.Decoder`` in bounded pieces (the libraries' own decoders
inflate a whole read at once), and ``get`` stops reading at ``limit`` bytes.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Protocol

import aiohttp
import httpx

from vllm_operator.bench.http.bounded import MAX_GET_BYTES, BoundError, Decoder
from vllm_operator.errors import VLLMOperatorError

Clock = Callable[[], float]

READ_CHUNK = 1 << 20
"""aiohttp's read buffer; its 64 KB default is a known trap for long SSE lines."""

KEEPALIVE_SECONDS = 2.0
"""An idle pooled connection is not reused after this long.

vLLM's server closes a keep-alive connection after 5 s idle (``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``,
uvicorn's default), and so does the simulator. A client that reuses a connection idle for
longer (aiohttp keeps them 15 s) can send its request just as the server closes it and get a
reset that is nobody's regression; between a paired run's phases a connection to one server
often idles for several seconds while the other is measured. Below the server's timeout,
the race cannot happen; a new connection costs one loopback or in-cluster handshake."""


class TransportError(VLLMOperatorError):
    """Base of the failures a transport reports."""


class ConnectFailed(TransportError):
    """Nothing accepted the connection (refused, unreachable, DNS, connect timeout)."""


class Stalled(TransportError):
    """The server sent nothing for longer than the stall limit."""


class Dropped(TransportError):
    """The connection closed or broke before the response was complete."""


class Reset(Dropped):
    """The server closed or reset the connection before sending any response."""


class NotHTTP(TransportError):
    """What came back is not an HTTP response (another protocol on that port)."""


class Oversized(TransportError):
    """The answer exceeded a size limit, or its encoding cannot be decoded within one."""


def named_class(exc: TransportError) -> str | None:
    """The error class (gate/classes.py) a failure before any response has, where it has
    one of its own: ``reset`` and ``protocol``, which are neither a time-out nor a stream
    the server broke off."""
    if isinstance(exc, Reset):
        return "reset"
    if isinstance(exc, NotHTTP):
        return "protocol"
    return None


_RESET_ERRNOS = (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED)


def _aiohttp_failure(exc: aiohttp.ClientError) -> TransportError:
    """An aiohttp failure before the response body, as one of the classes above."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ConnectFailed(text)
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return _timeout(exc)
    if isinstance(exc, aiohttp.ClientResponseError):  # a status line aiohttp cannot parse
        return NotHTTP(text.splitlines()[0][:200])
    if isinstance(exc, aiohttp.ServerDisconnectedError) or _was_reset(exc):
        return Reset(text)
    return Dropped(text)


def _was_reset(exc: BaseException | None) -> bool:
    """A reset or broken pipe, here or in what caused it (aiohttp wraps "Can not write
    request body" around the reset that interrupted the write)."""
    for _ in range(4):
        if exc is None:
            return False
        if isinstance(exc, ConnectionResetError | BrokenPipeError | ConnectionAbortedError) or (
            isinstance(exc, OSError) and exc.errno in _RESET_ERRNOS
        ):
            return True
        exc = exc.__cause__
    return False


def _httpx_failure(exc: httpx.TransportError) -> TransportError:
    """An httpx failure before the response body, as one of the classes above."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return ConnectFailed(text)
    if isinstance(exc, httpx.TimeoutException):
        return Stalled(text)
    if isinstance(exc, httpx.RemoteProtocolError):
        # h11 closes on a reply it cannot parse and says so the same way as on a reset.
        if "without sending a response" in text:
            return Reset(text)
        return NotHTTP(text[:200])
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return Reset(text)
    return Dropped(text)


ACCEPT_ENCODING = "gzip, deflate"
"""What bench can inflate itself, in bounded pieces."""


async def _decoded(raw: AsyncIterator[bytes], encoding: str | None) -> AsyncIterator[bytes]:
    try:
        decoder = Decoder(encoding)
        async for chunk in raw:
            for piece in decoder.feed(chunk):
                yield piece
    except BoundError as exc:
        raise Oversized(str(exc)) from exc


async def _read_limited(chunks: AsyncIterator[bytes], limit: int, what: str) -> bytes:
    body = bytearray()
    async for piece in chunks:
        body += piece
        if len(body) > limit:
            raise Oversized(f"{what}: body larger than {limit} bytes")
    return bytes(body)


@dataclass
class Response:
    """An open response: status, headers and its body as raw chunks."""

    status: int
    headers: Mapping[str, str]
    sent_at: float
    chunks: AsyncIterator[bytes]
    extra: dict[str, float] = field(default_factory=dict)


class Transport(Protocol):
    """What the benchmark needs from an HTTP client."""

    def post(
        self, url: str, body: bytes, headers: Mapping[str, str]
    ) -> AbstractAsyncContextManager[Response]:
        """POST ``body``; the response's ``sent_at`` is when the request was handed over."""
        ...

    async def get(
        self, url: str, headers: Mapping[str, str], limit: int = MAX_GET_BYTES
    ) -> tuple[int, bytes]:
        """A small GET (``/v1/models``, ``/version``); ``Oversized`` past ``limit`` bytes."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


@dataclass
class Limits:
    """Timeouts shared by both transports (seconds)."""

    connect: float = 10.0
    stall: float = 60.0


class AiohttpTransport:
    """The default transport: aiohttp with unlimited pooling and a large read buffer."""

    def __init__(self, limits: Limits | None = None, clock: Clock | None = None) -> None:
        self._limits = limits or Limits()
        self._clock = clock or asyncio.get_running_loop().time
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            trace = aiohttp.TraceConfig()
            trace.on_request_chunk_sent.append(self._on_chunk_sent)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=0, limit_per_host=0, keepalive_timeout=KEEPALIVE_SECONDS
                ),
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=self._limits.connect, sock_read=self._limits.stall
                ),
                read_bufsize=READ_CHUNK,
                trace_configs=[trace],
                auto_decompress=False,
            )
        return self._session

    async def _on_chunk_sent(
        self,
        _session: aiohttp.ClientSession,
        context: SimpleNamespace,
        _params: aiohttp.TraceRequestChunkSentParams,
    ) -> None:
        # On Python < 3.12 aiohttp buffers the headers and writes them with the body from a
        # separately scheduled task: the body chunk, not the headers, marks the moment the
        # request leaves. The wait before it is client queue time, reported apart from TTFT.
        stamps = context.trace_request_ctx
        if isinstance(stamps, dict):
            stamps["sent_at"] = self._clock()

    @asynccontextmanager
    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[Response]:
        session = self._open()
        stamps: dict[str, float] = {}
        started = self._clock()
        try:
            async with session.post(
                url,
                data=body,
                headers={"accept-encoding": ACCEPT_ENCODING, **headers},
                trace_request_ctx=stamps,
                allow_redirects=False,
            ) as resp:
                yield Response(
                    status=resp.status,
                    headers={k.lower(): v for k, v in resp.headers.items()},
                    sent_at=stamps.get("sent_at", started),
                    chunks=_decoded(self._chunks(resp), resp.headers.get("content-encoding")),
                    extra={"started_at": started},
                )
        except aiohttp.ClientPayloadError as exc:
            raise Dropped(str(exc) or type(exc).__name__) from exc
        except aiohttp.ClientError as exc:  # before the body: the body's own are Dropped
            raise _aiohttp_failure(exc) from exc

    @staticmethod
    async def _chunks(resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
        try:
            async for chunk in resp.content.iter_any():
                yield chunk
        except aiohttp.ServerTimeoutError as exc:
            raise Stalled(str(exc) or "read timeout") from exc
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as exc:
            raise Dropped(str(exc) or type(exc).__name__) from exc
        except aiohttp.ClientOSError as exc:
            raise Dropped(str(exc)) from exc

    async def get(
        self, url: str, headers: Mapping[str, str], limit: int = MAX_GET_BYTES
    ) -> tuple[int, bytes]:
        session = self._open()
        try:
            async with session.get(
                url,
                headers={"accept-encoding": ACCEPT_ENCODING, **headers},
                allow_redirects=False,
            ) as resp:
                chunks = _decoded(self._chunks(resp), resp.headers.get("content-encoding"))
                return resp.status, await _read_limited(chunks, limit, f"GET {url}")
        except aiohttp.ClientPayloadError as exc:
            raise Dropped(str(exc) or type(exc).__name__) from exc
        except aiohttp.ClientError as exc:
            raise _aiohttp_failure(exc) from exc

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _timeout(exc: Exception) -> TransportError:
    text = str(exc) or type(exc).__name__
    if "connect" in text.lower():
        return ConnectFailed(text)
    return Stalled(text)


class HttpxTransport:
    """httpx with the pool limits lifted; kept to compare clients and for its MockTransport."""

    def __init__(
        self,
        limits: Limits | None = None,
        clock: Clock | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        lim = limits or Limits()
        self._clock = clock or asyncio.get_running_loop().time
        self._client = httpx.AsyncClient(
            limits=httpx.Limits(
                max_connections=None,
                max_keepalive_connections=None,
                keepalive_expiry=KEEPALIVE_SECONDS,
            ),
            timeout=httpx.Timeout(connect=lim.connect, read=lim.stall, write=lim.stall, pool=None),
            transport=transport,
            follow_redirects=False,
        )

    @asynccontextmanager
    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[Response]:
        started = self._clock()
        try:
            async with self._client.stream(
                "POST", url, content=body, headers={"accept-encoding": ACCEPT_ENCODING, **headers}
            ) as resp:
                yield Response(
                    status=resp.status_code,
                    headers={k.lower(): v for k, v in resp.headers.items()},
                    sent_at=started,
                    chunks=_decoded(self._chunks(resp), resp.headers.get("content-encoding")),
                    extra={"started_at": started},
                )
        except httpx.TransportError as exc:  # before the body: the body's own are Dropped
            raise _httpx_failure(exc) from exc

    @staticmethod
    async def _chunks(resp: httpx.Response) -> AsyncIterator[bytes]:
        try:
            if resp.is_stream_consumed:  # an answer already in memory (httpx.MockTransport)
                yield resp.content
                return
            async for chunk in resp.aiter_raw():  # decoded by bench.http.bounded, in bounded pieces
                yield chunk
        except httpx.ReadTimeout as exc:
            raise Stalled(str(exc) or "read timeout") from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise Dropped(str(exc) or type(exc).__name__) from exc

    async def get(
        self, url: str, headers: Mapping[str, str], limit: int = MAX_GET_BYTES
    ) -> tuple[int, bytes]:
        try:
            async with self._client.stream(
                "GET", url, headers={"accept-encoding": ACCEPT_ENCODING, **headers}
            ) as resp:
                chunks = _decoded(self._chunks(resp), resp.headers.get("content-encoding"))
                return resp.status_code, await _read_limited(chunks, limit, f"GET {url}")
        except httpx.TransportError as exc:
            raise _httpx_failure(exc) from exc

    async def aclose(self) -> None:
        await self._client.aclose()


def make_transport(
    name: str, limits: Limits | None = None, clock: Clock | None = None
) -> Transport:
    """``aiohttp`` (default) or ``httpx``, by name (the CLI's ``--client``)."""
    if name == "aiohttp":
        return AiohttpTransport(limits, clock)
    if name == "httpx":
        return HttpxTransport(limits, clock)
    raise ValueError(f"unknown client {name!r}: aiohttp or httpx")
