"""The settling warm-up: discarded passes until every server reads the same twice.

A fresh vLLM JIT-compiles Triton kernels on the first use of a batch shape and runs about
10% slower for minutes (H200, 2026-12-01: a level's first trial read half of the others; a
fresh server trailed a settled one through a 24 s pass), so one request per shape did not
settle it. So (``settle_max_passes`` > 0) each pass goes over every measured shape
(``warmup`` requests of each prompt class; every concurrency level with all its streams and
the measured requests per stream), on every server, alternating which goes first, repeated
until the last two passes of every server agree within ``settle_tolerance`` on every figure
(latency within the gate's ms floor too), or the pass or time cap is reached. Each pass's
figures are in the report. With ``settle_max_passes`` 0 nothing runs here and the runner's
older warm-up runs instead: ``warmup`` requests of a class and one request per stream of a
level, once each. Split from ``bench.runner`` so the run's order stays readable there.
"""

from __future__ import annotations

import statistics
import time
from typing import Protocol

from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.http.request import ChatRequest, RequestRecord
from vllm_operator.bench.prompts import sized_request
from vllm_operator.bench.run_state import Clock, Progress, RunState, ServerRun, SettlePass
from vllm_operator.bench.stats import level_figures


class Measurer(Protocol):
    """What a warm-up pass needs of the runner: its settings, clock and ways to send."""

    @property
    def config(self) -> BenchConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def progress(self) -> Progress: ...

    @property
    def state(self) -> RunState: ...

    async def request(
        self, server: ServerRun, request: ChatRequest, into: list[RequestRecord]
    ) -> RequestRecord: ...

    async def closed_loop(
        self,
        server: ServerRun,
        level: int,
        streams: list[list[RequestRecord]],
        *,
        requests: int,
        first: int,
    ) -> None: ...


async def settle(ctx: Measurer) -> None:
    """The settling warm-up (module docstring); records every pass on its server."""
    config = ctx.config
    if config.settle_max_passes == 0:
        return
    began = ctx.clock()
    for server in ctx.state.servers:
        server.warmed.update(f"class/{c.name}" for c in config.prompt_classes)
        server.warmed.update(f"level/{lv}" for lv in config.concurrency)
    settled = False
    for number in range(1, config.settle_max_passes + 1):
        order = ctx.state.servers if number % 2 == 1 else ctx.state.servers[::-1]
        for server in order:
            await _settle_pass(ctx, server, number)
        settled = number >= 2 and all(s.settle[-1].agreed for s in ctx.state.servers)
        if settled or ctx.clock() - began >= config.settle_max_seconds:
            break
    ctx.state.settled = settled
    ctx.progress.emit(
        "settled" if settled else "unsettled",
        passes=len(ctx.state.candidate.settle),
        seconds=round(ctx.clock() - began, 1),
    )


async def _settle_pass(ctx: Measurer, server: ServerRun, number: int) -> None:
    config = ctx.config
    began, wall = ctx.clock(), time.time()
    latency: dict[str, float] = {}
    for cls in config.prompt_classes:
        ctx.progress.emit("settle", server=server.role, settle_pass=number, **{"class": cls.name})
        records: list[RequestRecord] = []
        for i in range(max(1, config.warmup)):
            index = SETTLE_BASE + number * SETTLE_STRIDE + i
            await ctx.request(server, sized_request(cls, index), records)
        server.warmups.extend(records)
        done = [r.e2e * 1000 for r in records if r.ok]
        latency[cls.name] = statistics.median(done) if done else 0.0
    throughput: dict[int, float] = {}
    for level in config.concurrency:
        ctx.progress.emit("settle", server=server.role, settle_pass=number, level=level)
        streams: list[list[RequestRecord]] = [[] for _ in range(level)]
        first = SETTLE_BASE + number * SETTLE_STRIDE
        await ctx.closed_loop(
            server, level, streams, requests=config.requests_per_stream, first=first
        )
        server.warmups.extend(r for stream in streams for r in stream)
        throughput[level] = level_figures(level, streams).aggregate_tps
    record = SettlePass(number, latency, throughput, ctx.clock() - began, wall)
    if server.settle:
        record.agreed = agree(server.settle[-1], record, config)
    server.settle.append(record)
    ctx.progress.emit(
        "warmup",
        server=server.role,
        settle_pass=number,
        of=config.settle_max_passes,
        agreed=record.agreed,
    )


SETTLE_BASE = 5000
"""Prompt indices of settling passes start here (measured ones stay below; all distinct)."""
SETTLE_STRIDE = 100
"""Prompt indices per settling pass (more than any ``warmup`` or requests per stream)."""


def agree(before: SettlePass, after: SettlePass, config: BenchConfig) -> bool:
    """Did two passes of one server read the same, figure by figure, within the tolerance?

    Latency may also differ by the gate's absolute floor (a 20 ms median moves by a few ms
    however settled the server is); tokens/s likewise.
    """
    thresholds = config.thresholds
    floor_ms = thresholds.regression_floor_ms if thresholds else 0.0
    floor_tps = thresholds.regression_floor_tokens_per_second if thresholds else 0.0
    tolerance = config.settle_tolerance
    for name, ms in after.latency_ms.items():
        old = before.latency_ms.get(name, 0.0)
        if ms <= 0 or old <= 0 or abs(ms - old) > max(tolerance * old, floor_ms):
            return False
    for level, tps in after.tokens_per_second.items():
        old = before.tokens_per_second.get(level, 0.0)
        if tps <= 0 or old <= 0 or abs(tps - old) > max(tolerance * old, floor_tps):
            return False
    return True
