"""The benchmark run: preflight, latency, concurrency, quality, under one global deadline.

Every request record is stored in the run state *before* it is sent, so when the deadline
cancels the run, what was measured survives and the requests in flight are counted as
``timeout`` (plus one ``deadline``). The run never hangs: each request has its own time
limit and stall limit, and the whole run sits inside ``asyncio.timeout(deadline)``.
A server that fails several requests in a row ends the run early with the cause named,
instead of spending the deadline on a dead endpoint.

Order of a run (docs/bench.md, "Trials, pairing and warm-up"): preflight of each server, then
``trials`` rounds; in each round every prompt class and then every concurrency level is
measured on the candidate and on the baseline (``--baseline-url``) back to back, the
candidate first in odd rounds and the baseline first in even ones, so both see the same
time window and slow drift cancels. Before the first measurement of each shape on each
server comes a discarded warm-up of that shape (``warmup`` requests of a prompt class; one
request per stream of a concurrency level, all at once): a fresh vLLM JIT-compiles Triton
kernels on the first use of a batch shape (calibration/h200-vllm-0.22.md: a compile inside
the 2-stream level read 152.8 tok/s against 204.1 at one stream), and a warm-up per prompt
size alone does not exercise the batch sizes of a concurrency level. Quality runs once per
server at the end: answers at temperature 0 do not vary by trial.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from vllm_operator.bench import bounded
from vllm_operator.bench.config import BenchConfig, root_url
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
class ServerRun:
    """What one server (the candidate, or the baseline of a paired run) measured."""

    role: str
    url: str
    server_version: str | None = None
    preflight: RequestRecord | None = None
    warmups: list[RequestRecord] = field(default_factory=list)
    latency: dict[str, list[list[RequestRecord]]] = field(default_factory=dict)
    """Prompt class -> one list of records per trial."""
    concurrency: dict[int, list[list[list[RequestRecord]]]] = field(default_factory=dict)
    """Concurrency level -> one list of streams (each a list of records) per trial."""
    quality: SuiteOutcome | None = None
    warmed: set[str] = field(default_factory=set)

    def records(self) -> Iterator[RequestRecord]:
        if self.preflight is not None:
            yield self.preflight
        yield from self.warmups
        for trials in self.latency.values():
            for recs in trials:
                yield from recs
        for level_trials in self.concurrency.values():
            for streams in level_trials:
                for stream in streams:
                    yield from stream
        if self.quality is not None:
            yield from (o.record for o in self.quality.outcomes)

    def errors(self) -> Counter[str]:
        counts = Counter(r.error for r in self.records() if r.error is not None)
        if self.quality is not None and self.quality.refused:
            counts["code_refused"] += self.quality.refused
        return counts


@dataclass
class RunState:
    """Everything measured so far; the report is built from it, complete or not."""

    started: float
    wall_started: float
    candidate: ServerRun
    baseline: ServerRun | None = None
    finished: float | None = None
    deadline_hit: bool = False
    aborted: str | None = None
    consecutive_failures: int = 0

    @property
    def server_version(self) -> str | None:
        return self.candidate.server_version

    @property
    def servers(self) -> tuple[ServerRun, ...]:
        return (self.candidate,) if self.baseline is None else (self.candidate, self.baseline)

    def records(self) -> Iterator[RequestRecord]:
        for server in self.servers:
            yield from server.records()

    def errors(self) -> Counter[str]:
        """The candidate's failed requests by class, plus ``deadline`` if it was reached."""
        counts = self.candidate.errors()
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
    baseline = None
    if config.baseline_url is not None:
        baseline = ServerRun("baseline", config.baseline_url)
    state = RunState(
        started=clock(),
        wall_started=time.time(),
        candidate=ServerRun("candidate", config.url),
        baseline=baseline,
    )
    ctx = _Context(config, transport, clock, progress, state)
    progress.emit("start", config=config.public())
    try:
        async with asyncio.timeout(config.deadline_seconds):
            for server in state.servers:
                await ctx.preflight(server)
            for trial in range(config.trials):
                order = state.servers if trial % 2 == 0 else state.servers[::-1]
                await ctx.latency(trial, order)
                await ctx.concurrency(trial, order)
            for server in state.servers:
                await ctx.quality(server)
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
        self,
        server: ServerRun,
        request: ChatRequest,
        into: list[RequestRecord],
        *,
        keep_text: bool = False,
    ) -> RequestRecord:
        record = RequestRecord(scheduled_at=self.clock())
        into.append(record)
        try:
            async with asyncio.timeout(self.config.request_timeout):
                await send(
                    self.transport,
                    request,
                    url=f"{root_url(server.url)}/v1/chat/completions",
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

    async def preflight(self, server: ServerRun) -> None:
        """Is anything listening, with the right key, serving the model asked for?"""
        record = RequestRecord(scheduled_at=self.clock())
        server.preflight = record
        base, headers = root_url(server.url), self.config.headers
        who = "" if server.role == "candidate" else f"{server.role}: "
        try:
            status, body = await self.transport.get(f"{base}/v1/models", headers)
        except ConnectFailed as exc:
            record.fail("connect_error", f"{base}: {exc}")
            raise Aborted(f"{who}cannot connect to {base}: {exc}") from exc
        except Oversized as exc:
            record.fail("oversized", f"GET /v1/models: {exc}")
            raise Aborted(f"{who}GET {base}/v1/models: {exc}") from exc
        except TransportError as exc:
            record.fail("timeout", f"GET /v1/models: {exc}")
            raise Aborted(f"{who}GET {base}/v1/models failed: {exc}") from exc
        if 300 <= status < 400:
            record.fail("redirect", f"GET /v1/models: HTTP {status}, redirects are not followed")
            raise Aborted(f"{who}GET /v1/models answered a redirect (HTTP {status}); not followed")
        if status >= 400:
            kind = "http_5xx" if status >= 500 else "http_4xx"
            record.fail(kind, f"GET /v1/models: HTTP {status} {body[:160]!r}")
            raise Aborted(f"{who}GET /v1/models answered HTTP {status}")
        served = _model_ids(body)
        if served is not None and self.config.model not in served:
            record.fail("http_4xx", f"model {self.config.model!r} not served; served: {served}")
            raise Aborted(f"{who}model {self.config.model!r} is not served (served: {served})")
        try:
            status, body = await self.transport.get(f"{base}/version", {})
            if status == 200:
                server.server_version = str(bounded.loads(body).get("version"))[:100]
        except (TransportError, ValueError, AttributeError):
            server.server_version = None
        self.progress.emit(
            "preflight", server=server.role, served=served, server_version=server.server_version
        )

    async def latency(self, trial: int, order: tuple[ServerRun, ...]) -> None:
        for cls in self.config.prompt_classes:
            for server in order:
                if f"class/{cls.name}" not in server.warmed:
                    server.warmed.add(f"class/{cls.name}")
                    for i in range(self.config.warmup):
                        rec = await self.request(server, _sized(cls, 1000 + i), server.warmups)
                        self._emit_request(server, "warmup", cls.name, i, rec)
                trials = server.latency.setdefault(cls.name, [])
                measured: list[RequestRecord] = []
                trials.append(measured)
                for i in range(self.config.iterations):
                    index = 2000 + trial * self.config.iterations + i
                    rec = await self.request(server, _sized(cls, index), measured)
                    self._emit_request(server, "latency", cls.name, i, rec, trial)

    async def concurrency(self, trial: int, order: tuple[ServerRun, ...]) -> None:
        for level in self.config.concurrency:
            for server in order:
                if f"level/{level}" not in server.warmed and self.config.warmup > 0:
                    server.warmed.add(f"level/{level}")
                    warm: list[list[RequestRecord]] = [[] for _ in range(level)]
                    await self._closed_loop(server, level, warm, requests=1, first=0)
                    server.warmups.extend(r for stream in warm for r in stream)
                    self.progress.emit("warmup", server=server.role, level=level)
                streams: list[list[RequestRecord]] = [[] for _ in range(level)]
                server.concurrency.setdefault(level, []).append(streams)
                first = 1 + trial * self.config.requests_per_stream
                await self._closed_loop(
                    server, level, streams, requests=self.config.requests_per_stream, first=first
                )
                done = sum(1 for s in streams for r in s if r.ok)
                self.progress.emit(
                    "concurrency", server=server.role, trial=trial + 1, level=level, completed=done
                )

    async def _closed_loop(
        self,
        server: ServerRun,
        level: int,
        streams: list[list[RequestRecord]],
        *,
        requests: int,
        first: int,
    ) -> None:
        """``level`` streams, each sending ``requests`` requests back to back."""
        cls = self.config.concurrency_class

        async def worker(n: int, stream: list[RequestRecord]) -> None:
            for j in range(first, first + requests):
                index = (level * 10_000 + j) * 10_000 + n
                await self.request(server, _sized(cls, index), stream)

        # Not a TaskGroup: when one stream gives up (Aborted), the others must finish
        # their own request rather than be cancelled and miscounted as timeouts.
        results = await asyncio.gather(
            *(worker(n, s) for n, s in enumerate(streams)), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def quality(self, server: ServerRun) -> None:
        suite = self.config.suite
        if not suite.tests:
            return
        outcome = SuiteOutcome(suite)
        server.quality = outcome
        executor = executor_for(
            allow_code_execution=self.config.allow_code_execution,
            sandbox_dir=self.config.sandbox_dir,
        )
        for test in suite.tests:
            holder: list[RequestRecord] = []
            rec = await self.request(server, request_of(test), holder, keep_text=True)
            result = await judge(test, rec, executor)
            outcome.outcomes.append(result)
            self.progress.emit(
                "quality",
                server=server.role,
                id=test.id,
                passed=result.passed,
                reason=result.reason[:200],
            )

    def _emit_request(  # noqa: PLR0917 - private, three call sites
        self,
        server: ServerRun,
        phase: str,
        cls: str,
        i: int,
        rec: RequestRecord,
        trial: int | None = None,
    ) -> None:
        fields: dict[str, Any] = {"server": server.role, "phase": phase, "class": cls, "index": i}
        if trial is not None:
            fields["trial"] = trial + 1
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
