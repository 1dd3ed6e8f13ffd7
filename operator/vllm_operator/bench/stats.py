"""Figures from request records: per-class statistics and the closed-loop steady window.

Pure functions, so the arithmetic that turns timestamps into the numbers a gate compares
is unit-tested without a server.

Steady window of a closed loop with ``c`` streams: from the moment the last stream sent
its first request (ramp-up over: every stream is in its loop) to the moment the first
stream receives its last token (ramp-down starts: from then on fewer than ``c`` streams
run). Tokens are counted by arrival time inside that window; a chunk carrying several
tokens counts ``usage.completion_tokens / chunks`` each, so the count matches usage rather
than the chunking. The window therefore holds whole request cycles (TTFT, then decode),
which is what a closed loop sustains: at one stream it gives N / E2E, the single-request
tok/s of the study, and not the decode rate. Starting at a first *token* instead would
drop one TTFT per stream from the window and overstate short runs (+18% for two 105-token
requests at 0.17 throughput).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from vllm_operator.bench.http.request import RequestRecord

MIN_DECODE_GAPS = 10
"""Inter-token gaps a request needs before its decode rate is reported.

Decode tok/s is (N - 1) / (E2E - TTFT): with 2 output tokens that is one gap of a few
milliseconds, read between two chunk arrivals that each carry a millisecond or so of client
and timer error, so it swings by tens of percent from one request to the next (the H200
calibration: "short-prompt decode tok/s from 2 output tokens is one inter-token gap:
meaningless"). With at least 10 gaps of >= 4 ms, those two endpoint errors are spread over
>= 40 ms: a few percent. Requests with fewer gaps get no decode rate (shown as "-")."""


def decode_rate(record: RequestRecord) -> float | None:
    """The record's decode tok/s, or None when it has fewer than ``MIN_DECODE_GAPS`` gaps."""
    if record.output_tokens - 1 < MIN_DECODE_GAPS:
        return None
    return record.decode_tps


@dataclass(frozen=True)
class Stats:
    """Median, min, max, mean and sample standard deviation of one quantity."""

    median: float
    min: float
    max: float
    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats | None:
        if not values:
            return None
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(
            median=statistics.median(values),
            min=min(values),
            max=max(values),
            mean=statistics.fmean(values),
            std=std,
            n=len(values),
        )


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True)
class LevelFigures:
    """What a closed loop at one concurrency level sustained."""

    concurrency: int
    window_start: float
    window_end: float
    tokens_in_window: float
    requests_in_window: int
    completed: int
    aggregate_tps: float
    requests_per_second: float
    median_stream_tps: float | None


def steady_window(streams: Sequence[Sequence[RequestRecord]]) -> tuple[float, float] | None:
    """``(start, end)`` of the steady part, or ``None`` when streams never overlapped."""
    firsts: list[float] = []
    lasts: list[float] = []
    for stream in streams:
        sends = [r.sent_at for r in stream if r.sent_at is not None]
        times = [t for r in stream if r.ok for t in r.chunk_times]
        if not sends or not times:
            return None
        firsts.append(min(sends))
        lasts.append(max(times))
    if not firsts:
        return None
    start, end = max(firsts), min(lasts)
    return (start, end) if end > start else None


def level_figures(concurrency: int, streams: Sequence[Sequence[RequestRecord]]) -> LevelFigures:
    """Aggregate tok/s, requests/s and median per-stream tok/s over the steady window."""
    done = [r for stream in streams for r in stream if r.ok]
    per_stream = [tps for r in done if (tps := r.e2e_tps) is not None]
    median_stream = statistics.median(per_stream) if per_stream else None
    window = steady_window(streams)
    if window is None:
        return LevelFigures(concurrency, 0.0, 0.0, 0.0, 0, len(done), 0.0, 0.0, median_stream)
    start, end = window
    tokens = 0.0
    finished = 0
    for r in done:
        if not r.chunk_times:
            continue
        weight = r.output_tokens / len(r.chunk_times)
        tokens += weight * sum(1 for t in r.chunk_times if start < t <= end)
        if start < r.chunk_times[-1] <= end:
            finished += 1
    span = end - start
    return LevelFigures(
        concurrency=concurrency,
        window_start=start,
        window_end=end,
        tokens_in_window=tokens,
        requests_in_window=finished,
        completed=len(done),
        aggregate_tps=tokens / span,
        requests_per_second=finished / span,
        median_stream_tps=median_stream,
    )
