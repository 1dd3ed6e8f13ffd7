"""The benchmark run: preflight, latency, concurrency, quality, under one global deadline.

Every request record is stored in the run state *before* it is sent, so when the deadline
cancels the run, what was measured survives and the requests in flight are counted as
``timeout`` (plus one ``deadline``). The run never hangs: each request has its own time
limit and stall limit, and the whole run sits inside ``asyncio.timeout(deadline)``.
A server that fails several requests in a row ends the run early with the cause named,
instead of spending the deadline on a dead endpoint.

Order of a run (docs/bench.md, "Trials, pairing and warm-up"): preflight of each server, then
the settling warm-up, then ``trials`` rounds, then extra rounds of the figures still undecided,
then quality.

- **Settling warm-up** (``bench.settle``): discarded passes over every measured shape on
  every server until two passes in a row agree, or the older one-request-per-shape warm-up.
- **Rounds**: every prompt class and then every concurrency level is measured on the
  candidate and on the baseline (``--baseline-url``) back to back, the candidate first in odd
  rounds and the baseline first in even ones, so both see the same time window and slow
  drift cancels.
- **Extra rounds** (``max_trials`` > ``trials``): after the first ``trials`` rounds the
  gate's own ``undecided`` (given through ``open_figures``) names the figures whose interval
  still straddles the limit; one more round measures only those, and the gate looks again,
  until none is open, ``max_trials`` is reached, or starting another round would leave less
  than ``run_state.RESERVE_FRACTION`` of the deadline (the time budget).
- **Quality** runs once per server at the end: answers at temperature 0 do not vary by trial.

With a synthetic or dataset workload (``config.traffic``), the load sweep of
``bench.load.sweep`` (closed or open loop per level, paired trials, extra rounds of undecided
levels, stop at the first SLO breach) replaces the warm-up, rounds and extra rounds above;
preflight and quality stay.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vllm_operator.bench.config import BenchConfig, root_url
from vllm_operator.bench.http import bounded
from vllm_operator.bench.http.request import ChatRequest, RequestRecord, send
from vllm_operator.bench.http.transport import (
    ConnectFailed,
    Limits,
    Oversized,
    Transport,
    TransportError,
    make_transport,
    named_class,
)
from vllm_operator.bench.load.sweep import Sweep
from vllm_operator.bench.prompts import sized_request
from vllm_operator.bench.quality.run import SuiteOutcome, TestOutcome, request_of, run_suite
from vllm_operator.bench.quality.suite import QualityTest
from vllm_operator.bench.run_state import (
    Aborted,
    Breached,
    Clock,
    NoProgress,
    OpenFigures,
    Progress,
    RoundRecord,
    RunState,
    ServerRun,
)
from vllm_operator.bench.sandbox.executors import executor_for
from vllm_operator.bench.settle import settle
from vllm_operator.gate.finding import FigureKey

TransportFactory = Callable[[BenchConfig, Clock], Transport]

MAX_CONSECUTIVE_FAILURES = 3
"""Consecutive failed requests after which the run stops: the server is not answering."""


def default_transport(config: BenchConfig, clock: Clock) -> Transport:
    limits = Limits(connect=config.connect_timeout, stall=config.stall_seconds)
    return make_transport(config.client, limits, clock)


async def run(
    config: BenchConfig,
    *,
    progress: Progress | None = None,
    transport_factory: TransportFactory | None = None,
    clock: Clock | None = None,
    open_figures: OpenFigures | None = None,
    breached: Breached | None = None,
) -> RunState:
    """Measure everything ``config`` asks for, within its deadline; return the state.

    ``open_figures``: the gate's view of which figures are still undecided; without it (or
    with ``max_trials == trials``) the run measures exactly ``trials`` rounds.
    ``breached``: the gate's view of whether the candidate broke an SLO at a load level;
    without it a load sweep never stops early.
    """
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
            if config.traffic is not None:
                await ctx.sweep(open_figures, breached)
                for server in state.servers:
                    await ctx.quality(server)
                return state
            await settle(ctx)
            classes = tuple(c.name for c in config.prompt_classes)
            for trial in range(config.trials):
                await ctx.round(trial, classes, config.concurrency)
            trial = config.trials
            while open_figures is not None and trial < config.plan.max_trials:
                pending = open_figures(state)
                todo_classes = tuple(c for c in classes if FigureKey.latency(c) in pending)
                todo_levels = tuple(
                    lv for lv in config.concurrency if FigureKey.concurrency(lv) in pending
                )
                if not todo_classes and not todo_levels:
                    why = "a figure failed" if state.closed_by_failure else "all decided"
                    progress.emit("trials", phase=f"trials done: {why}", trial=trial)
                    break
                if not ctx.time_for_round(todo_classes, todo_levels):
                    progress.emit("budget", trial=trial + 1, open=sorted(map(str, pending)))
                    break
                await ctx.round(trial, todo_classes, todo_levels)
                trial += 1
            if open_figures is not None and trial >= config.plan.max_trials > config.trials:
                progress.emit("trials", phase="trials done: maxTrials reached", trial=trial)
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
        await self.send_into(server, request, record, keep_text=keep_text)
        return record

    async def send_into(
        self,
        server: ServerRun,
        request: ChatRequest,
        record: RequestRecord,
        *,
        keep_text: bool = False,
    ) -> None:
        """Send ``request`` into ``record`` (already stored), within the request's limit."""
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
        self._count(server, record)

    async def sweep(self, open_figures: OpenFigures | None, breached: Breached | None) -> None:
        """The workload's load sweep (``bench.load.sweep``) in place of the study's phases."""
        assert self.config.traffic is not None

        async def send(server: ServerRun, request: ChatRequest, record: RequestRecord) -> None:
            await self.send_into(server, request, record)

        sweep = Sweep(self.config, self.config.traffic, self.state, self.clock, self.progress, send)
        await sweep.run(open_figures, breached)

    def _count(self, server: ServerRun, record: RequestRecord) -> None:
        """Failures in a row, per server: a load sweep sends to both servers at once, and a
        healthy twin's answers between a dead candidate's failures must not hide them."""
        if record.ok:
            server.consecutive_failures = 0
            return
        server.consecutive_failures += 1
        if server.consecutive_failures >= MAX_CONSECUTIVE_FAILURES:
            who = "" if server.role == "candidate" else f"{server.role}: "
            raise Aborted(
                f"{who}{server.consecutive_failures} requests in a row failed; last: "
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
            record.fail(named_class(exc) or "timeout", f"GET /v1/models: {exc}")
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

    async def round(self, trial: int, classes: tuple[str, ...], levels: tuple[int, ...]) -> None:
        """One trial of ``classes`` and ``levels`` on every server, order alternating."""
        began, wall = self.clock(), time.time()
        order = self.state.servers if trial % 2 == 0 else self.state.servers[::-1]
        self.progress.emit(
            "trial",
            trial=trial + 1,
            trials=self.config.plan.max_trials,
            classes=list(classes),
            levels=list(levels),
        )
        await self.latency(trial, order, classes)
        await self.concurrency(trial, order, levels)
        self.state.rounds.append(
            RoundRecord(trial + 1, classes, levels, self.clock() - began, wall)
        )

    def time_for_round(self, classes: tuple[str, ...], levels: tuple[int, ...]) -> bool:
        """Would one more round of these figures end before the time budget?

        Its duration is estimated from the rounds so far, per figure, times 1.5.
        """
        spent: dict[str, float] = {}
        for record in self.state.rounds:
            figures = [*record.classes, *map(str, record.levels)]
            for figure in figures:
                spent[figure] = max(spent.get(figure, 0.0), record.seconds / len(figures))
        estimate = 1.5 * sum(spent.get(f, 0.0) for f in [*classes, *map(str, levels)])
        return self.state.within_budget(
            self.clock(), estimate, self.config.deadline_seconds, self.config.budget_reserve
        )

    async def latency(
        self, trial: int, order: tuple[ServerRun, ...], classes: tuple[str, ...]
    ) -> None:
        for cls in self.config.prompt_classes:
            if cls.name not in classes:
                continue
            for server in order:
                if f"class/{cls.name}" not in server.warmed:
                    server.warmed.add(f"class/{cls.name}")
                    for i in range(self.config.warmup):
                        rec = await self.request(
                            server, sized_request(cls, 1000 + i), server.warmups
                        )
                        self._emit_request(server, "warmup", cls.name, i, rec)
                trials = server.latency.setdefault(cls.name, [])
                measured: list[RequestRecord] = []
                trials.append(measured)
                for i in range(self.config.iterations):
                    index = 2000 + trial * self.config.iterations + i
                    rec = await self.request(server, sized_request(cls, index), measured)
                    self._emit_request(server, "latency", cls.name, i, rec, trial)

    async def concurrency(
        self, trial: int, order: tuple[ServerRun, ...], levels: tuple[int, ...]
    ) -> None:
        for level in levels:
            for server in order:
                if f"level/{level}" not in server.warmed and self.config.warmup > 0:
                    server.warmed.add(f"level/{level}")
                    warm: list[list[RequestRecord]] = [[] for _ in range(level)]
                    await self.closed_loop(server, level, warm, requests=1, first=0)
                    server.warmups.extend(r for stream in warm for r in stream)
                    self.progress.emit("warmup", server=server.role, level=level)
                streams: list[list[RequestRecord]] = [[] for _ in range(level)]
                server.concurrency.setdefault(level, []).append(streams)
                first = 1 + trial * self.config.requests_per_stream
                await self.closed_loop(
                    server, level, streams, requests=self.config.requests_per_stream, first=first
                )
                done = sum(1 for s in streams for r in s if r.ok)
                self.progress.emit(
                    "concurrency", server=server.role, trial=trial + 1, level=level, completed=done
                )

    async def closed_loop(
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
                await self.request(server, sized_request(cls, index), stream)

        # Not a TaskGroup: when one stream gives up (Aborted), the others must finish
        # their own request rather than be cancelled and miscounted as timeouts.
        results = await asyncio.gather(
            *(worker(n, s) for n, s in enumerate(streams)), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def quality(self, server: ServerRun) -> None:
        """The suite on ``server``, ``quality_concurrency`` tests at a time (``run_suite``)."""
        suite = self.config.suite
        if not suite.tests:
            return
        outcome = SuiteOutcome(suite)
        server.quality = outcome
        executor = executor_for(
            allow_code_execution=self.config.allow_code_execution,
            sandbox_dir=self.config.sandbox_dir,
        )

        async def ask(test: QualityTest, into: list[RequestRecord]) -> RequestRecord:
            return await self.request(server, request_of(test), into, keep_text=True)

        def done(result: TestOutcome) -> None:
            self.progress.emit(
                "quality",
                server=server.role,
                id=result.test.id,
                passed=result.passed,
                reason=result.reason[:200],
            )

        await run_suite(
            outcome,
            ask,
            concurrency=self.config.quality_concurrency,
            executor=executor,
            done=done,
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


def _model_ids(body: bytes) -> list[str] | None:
    """Model ids from a ``/v1/models`` body; ``None`` when it cannot be read (not fatal)."""
    try:
        data = bounded.loads(body).get("data")
        return [str(m["id"])[:256] for m in data[:1000]]
    except (ValueError, AttributeError, KeyError, TypeError):
        return None  # BoundError is a ValueError: deep or huge JSON is "cannot be read"
