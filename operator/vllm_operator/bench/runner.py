"""The benchmark run: preflight, latency, concurrency, quality, under one global deadline.

Every request record is stored in the run state *before* it is sent, so when the deadline
cancels the run, what was measured survives and the requests in flight are counted as
``timeout`` (plus one ``deadline``). The run never hangs: each request has its own time
limit and stall limit, and the whole run sits inside ``asyncio.timeout(deadline)``.
A server that fails several requests in a row ends the run early with the cause named,
instead of spending the deadline on a dead endpoint.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from vllm_operator.bench import bounded
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.prompts import PromptClass, prompt_for
from vllm_operator.bench.pyexec import executor_for
from vllm_operator.bench.quality import SuiteOutcome, judge, request_of
from vllm_operator.bench.request import ChatRequest, RequestRecord, send
from vllm_operator.bench.transport import (
    ConnectFailed,
    Limits,
    Oversized,
    Transport,
    TransportError,
    make_transport,
)

Clock = Callable[[], float]
TransportFactory = Callable[[BenchConfig, Clock], Transport]

MAX_CONSECUTIVE_FAILURES = 3
"""Consecutive failed requests after which the run stops: the server is not answering."""


class Progress(Protocol):
    """Where progress goes (terminal line, JSON lines, nowhere)."""

    def emit(self, event: str, **fields: Any) -> None: ...


class NoProgress:
    """Progress for in-process callers that want none."""

    def emit(self, event: str, **fields: Any) -> None:
        return None


class Aborted(Exception):
    """The server failed too many requests in a row; the run stops early."""


@dataclass
class RunState:
    """Everything measured so far; the report is built from it, complete or not."""

    started: float
    wall_started: float
    finished: float | None = None
    server_version: str | None = None
    preflight: RequestRecord | None = None
    warmups: list[RequestRecord] = field(default_factory=list)
    latency: dict[str, list[RequestRecord]] = field(default_factory=dict)
    concurrency: dict[int, list[list[RequestRecord]]] = field(default_factory=dict)
    quality: SuiteOutcome | None = None
    deadline_hit: bool = False
    aborted: str | None = None
    consecutive_failures: int = 0

    def records(self) -> Iterator[RequestRecord]:
        if self.preflight is not None:
            yield self.preflight
        yield from self.warmups
        for recs in self.latency.values():
            yield from recs
        for streams in self.concurrency.values():
            for stream in streams:
                yield from stream
        if self.quality is not None:
            yield from (o.record for o in self.quality.outcomes)

    def errors(self) -> Counter[str]:
        counts = Counter(r.error for r in self.records() if r.error is not None)
        if self.quality is not None and self.quality.refused:
            counts["code_refused"] += self.quality.refused
        if self.deadline_hit:
            counts["deadline"] += 1
        return counts


def default_transport(config: BenchConfig, clock: Clock) -> Transport:
    limits = Limits(connect=config.connect_timeout, stall=config.stall_seconds)
    return make_transport(config.client, limits, clock)


async def run(
    config: BenchConfig,
    *,
    progress: Progress | None = None,
    transport_factory: TransportFactory | None = None,
    clock: Clock | None = None,
) -> RunState:
    """Measure everything ``config`` asks for, within its deadline; return the state."""
    clock = clock or asyncio.get_running_loop().time
    progress = progress or NoProgress()
    transport = (transport_factory or default_transport)(config, clock)
    state = RunState(started=clock(), wall_started=time.time())
    ctx = _Context(config, transport, clock, progress, state)
    progress.emit("start", config=config.public())
    try:
        async with asyncio.timeout(config.deadline_seconds):
            await ctx.preflight()
            await ctx.latency()
            await ctx.concurrency()
            await ctx.quality()
    except TimeoutError:
        state.deadline_hit = True
        progress.emit("deadline", seconds=config.deadline_seconds)
    except Aborted as exc:
        state.aborted = str(exc)
        progress.emit("aborted", reason=str(exc))
    finally:
        state.finished = clock()
        await transport.aclose()
    return state


@dataclass
class _Context:
    config: BenchConfig
    transport: Transport
    clock: Clock
    progress: Progress
    state: RunState

    async def request(
        self, request: ChatRequest, into: list[RequestRecord], *, keep_text: bool = False
    ) -> RequestRecord:
        record = RequestRecord(scheduled_at=self.clock())
        into.append(record)
        try:
            async with asyncio.timeout(self.config.request_timeout):
                await send(
                    self.transport,
                    request,
                    url=self.config.chat_url,
                    model=self.config.model,
                    headers=self.config.headers,
                    clock=self.clock,
                    keep_text=keep_text,
                    record=record,
                )
        except TimeoutError:
            pass  # the record is already marked "timeout"
        self._count(record)
        return record

    def _count(self, record: RequestRecord) -> None:
        if record.ok:
            self.state.consecutive_failures = 0
            return
        self.state.consecutive_failures += 1
        if self.state.consecutive_failures >= MAX_CONSECUTIVE_FAILURES:
            raise Aborted(
                f"{self.state.consecutive_failures} requests in a row failed; last: "
                f"{record.error}: {record.detail}"
            )

    async def preflight(self) -> None:
        """Is anything listening, with the right key, serving the model asked for?"""
        record = RequestRecord(scheduled_at=self.clock())
        self.state.preflight = record
        base, headers = self.config.base_url, self.config.headers
        try:
            status, body = await self.transport.get(f"{base}/v1/models", headers)
        except ConnectFailed as exc:
            record.fail("connect_error", f"{base}: {exc}")
            raise Aborted(f"cannot connect to {base}: {exc}") from exc
        except Oversized as exc:
            record.fail("oversized", f"GET /v1/models: {exc}")
            raise Aborted(f"GET {base}/v1/models: {exc}") from exc
        except TransportError as exc:
            record.fail("timeout", f"GET /v1/models: {exc}")
            raise Aborted(f"GET {base}/v1/models failed: {exc}") from exc
        if 300 <= status < 400:
            record.fail("redirect", f"GET /v1/models: HTTP {status}, redirects are not followed")
            raise Aborted(f"GET /v1/models answered a redirect (HTTP {status}); not followed")
        if status >= 400:
            kind = "http_5xx" if status >= 500 else "http_4xx"
            record.fail(kind, f"GET /v1/models: HTTP {status} {body[:160]!r}")
            raise Aborted(f"GET /v1/models answered HTTP {status}")
        served = _model_ids(body)
        if served is not None and self.config.model not in served:
            record.fail("http_4xx", f"model {self.config.model!r} not served; served: {served}")
            raise Aborted(f"model {self.config.model!r} is not served (served: {served})")
        try:
            status, body = await self.transport.get(f"{base}/version", {})
            if status == 200:
                self.state.server_version = str(bounded.loads(body).get("version"))[:64]
        except (TransportError, ValueError, AttributeError):
            self.state.server_version = None
        self.progress.emit("preflight", served=served, server_version=self.state.server_version)

    async def latency(self) -> None:
        for cls in self.config.prompt_classes:
            measured = self.state.latency.setdefault(cls.name, [])
            for i in range(self.config.warmup):
                rec = await self.request(_sized(cls, 1000 + i), self.state.warmups)
                self._emit_request("warmup", cls.name, i, rec)
            for i in range(self.config.iterations):
                rec = await self.request(_sized(cls, i), measured)
                self._emit_request("latency", cls.name, i, rec)

    async def concurrency(self) -> None:
        cls = self.config.concurrency_class
        for level in self.config.concurrency:
            streams: list[list[RequestRecord]] = [[] for _ in range(level)]
            self.state.concurrency[level] = streams

            async def worker(n: int, stream: list[RequestRecord], level: int = level) -> None:
                for j in range(self.config.requests_per_stream):
                    await self.request(_sized(cls, level * 10_000 + n * 100 + j), stream)

            # Not a TaskGroup: when one stream gives up (Aborted), the others must finish
            # their own request rather than be cancelled and miscounted as timeouts.
            results = await asyncio.gather(
                *(worker(n, s) for n, s in enumerate(streams)), return_exceptions=True
            )
            for result in results:
                if isinstance(result, BaseException):
                    raise result
            done = sum(1 for s in streams for r in s if r.ok)
            self.progress.emit("concurrency", level=level, completed=done)

    async def quality(self) -> None:
        suite = self.config.suite
        if not suite.tests:
            return
        outcome = SuiteOutcome(suite)
        self.state.quality = outcome
        executor = executor_for(
            allow_code_execution=self.config.allow_code_execution,
            sandbox_dir=self.config.sandbox_dir,
        )
        for test in suite.tests:
            holder: list[RequestRecord] = []
            rec = await self.request(request_of(test), holder, keep_text=True)
            result = await judge(test, rec, executor)
            outcome.outcomes.append(result)
            self.progress.emit(
                "quality", id=test.id, passed=result.passed, reason=result.reason[:200]
            )

    def _emit_request(self, phase: str, cls: str, i: int, rec: RequestRecord) -> None:
        fields: dict[str, Any] = {"phase": phase, "class": cls, "index": i}
        if rec.ok:
            fields.update(
                ttft_ms=round(rec.ttft * 1000, 2),
                e2e_ms=round(rec.e2e * 1000, 2),
                tokens=rec.output_tokens,
            )
        else:
            fields.update(error=rec.error, detail=rec.detail)
        self.progress.emit("request", **fields)


def _sized(cls: PromptClass, index: int) -> ChatRequest:
    return ChatRequest(prompt=prompt_for(cls, index), max_tokens=cls.output_tokens)


def _model_ids(body: bytes) -> list[str] | None:
    """Model ids from a ``/v1/models`` body; ``None`` when it cannot be read (not fatal)."""
    try:
        data = bounded.loads(body).get("data")
        return [str(m["id"])[:256] for m in data[:1000]]
    except (ValueError, AttributeError, KeyError, TypeError):
        return None  # BoundError is a ValueError: deep or huge JSON is "cannot be read"
