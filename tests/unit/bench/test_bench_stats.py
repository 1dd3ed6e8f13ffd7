"""Steady-window arithmetic on hand-made timelines."""

from __future__ import annotations

import math

import pytest

from vllm_operator.bench.http.request import RequestRecord
from vllm_operator.bench.stats import Stats, level_figures, percentile, steady_window


def rec(
    first: float, n: int, gap: float, *, sent: float | None = None, tokens: int | None = None
) -> RequestRecord:
    times = [first + i * gap for i in range(n)]
    return RequestRecord(
        scheduled_at=sent if sent is not None else first - 0.1,
        sent_at=sent if sent is not None else first - 0.1,
        first_token_at=times[0],
        last_event_at=times[-1],
        chunk_times=times,
        output_tokens=tokens if tokens is not None else n,
    )


def test_stats() -> None:
    s = Stats.of([1.0, 2.0, 3.0, 10.0])
    assert s is not None
    assert (s.median, s.min, s.max, s.mean, s.n) == (2.5, 1.0, 10.0, 4.0, 4)
    assert s.std == pytest.approx(4.0825, abs=1e-4)
    assert Stats.of([]) is None
    assert Stats.of([5.0]).std == 0.0  # type: ignore[union-attr]


def test_percentile() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 99) == 5
    assert math.isnan(percentile([], 50))


def test_window_excludes_ramp_up_and_down() -> None:
    # A sends at -0.1 (tokens 0.0..0.9) and 0.95 (1.0..1.9); B sends at 0.4 and 1.45.
    a = [rec(0.0, 10, 0.1), rec(1.0, 10, 0.1, sent=0.95)]
    b = [rec(0.5, 10, 0.1), rec(1.5, 10, 0.1, sent=1.45)]
    assert steady_window([a, b]) == pytest.approx((0.4, 1.9))
    f = level_figures(2, [a, b])
    # tokens after 0.4 and up to 1.9: A 0.5..1.9 (15), B 0.5..1.9 (15)
    assert f.tokens_in_window == pytest.approx(30)
    assert f.aggregate_tps == pytest.approx(30 / 1.5)
    assert f.completed == 4
    assert f.requests_in_window == 3  # A ends at 0.9 and 1.9 (window end, included), B at 1.4
    assert f.median_stream_tps is not None


def test_one_stream_gives_tokens_over_end_to_end_time() -> None:
    # Two requests of 10 tokens, TTFT 0.5 s, 0.1 s per token after: E2E 1.4 s each.
    stream = [rec(0.5, 10, 0.1, sent=0.0), rec(1.9, 10, 0.1, sent=1.4)]
    f = level_figures(1, [stream])
    assert f.aggregate_tps == pytest.approx(10 / 1.4)  # N / E2E, not the decode rate 10/s
    assert f.requests_per_second == pytest.approx(1 / 1.4)


def test_chunks_carrying_several_tokens_count_by_usage() -> None:
    stream = [rec(0.0, 5, 0.1, tokens=10, sent=0.0)]  # 5 chunks, 10 tokens: 2 per chunk
    f = level_figures(1, [stream])
    assert f.tokens_in_window == pytest.approx(8)  # the chunk at the window start is out
    assert f.aggregate_tps == pytest.approx(8 / 0.4)


def test_failed_stream_or_no_overlap_gives_no_window() -> None:
    failed = RequestRecord(scheduled_at=0.0, error="http_5xx")
    assert steady_window([[rec(0.0, 3, 0.1)], [failed]]) is None
    assert steady_window([[rec(0.0, 3, 0.1)], [rec(5.0, 3, 0.1)]]) is None
    f = level_figures(2, [[rec(0.0, 3, 0.1)], [failed]])
    assert (f.aggregate_tps, f.completed) == (0.0, 1)
