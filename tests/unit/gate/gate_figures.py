"""Hand-made summaries for the gate's boundary tests: one figure per kind, trials as given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    BenchSummary,
    ConcurrencyFigures,
    LatencyFigures,
    PairedBaseline,
    TrialPlan,
)


def lat(
    trials: Sequence[float], name: str = "medium", requests: int | None = None
) -> LatencyFigures:
    """One prompt class; ``trials`` of one value is stored as the median only (no trials)."""
    values = list(trials)
    return LatencyFigures(
        prompt_class=name,
        requests=5 * len(values) if requests is None else requests,
        median_ms=sorted(values)[len(values) // 2],
        ttft_ms=1,
        output_tokens=2,
        e2e_tokens_per_second=1,
        decode_tokens_per_second=0,
        trials=values if len(values) > 1 else [],
    )


def level(trials: Sequence[float], streams: int = 8) -> ConcurrencyFigures:
    values = list(trials)
    return ConcurrencyFigures(
        concurrency=streams,
        aggregate_tokens_per_second=sorted(values)[len(values) // 2],
        requests_per_second=1,
        requests=3 * streams * len(values),
        trials=values if len(values) > 1 else [],
    )


def pair(
    latency: dict[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    levels: dict[int, tuple[Sequence[float], Sequence[float]]] | None = None,
    **extra: Any,
) -> BenchSummary:
    """A paired summary: each figure as (candidate trials, baseline trials)."""
    latency, levels = latency or {}, levels or {}
    return BenchSummary(
        model="m",
        latency=[lat(c, name) for name, (c, _) in latency.items()],
        concurrency=[level(c, n) for n, (c, _) in levels.items()],
        paired_baseline=PairedBaseline(
            latency=[lat(b, name) for name, (_, b) in latency.items()],
            concurrency=[level(b, n) for n, (_, b) in levels.items()],
        ),
        **extra,
    )


def stored(
    latency: dict[str, Sequence[float]] | None = None,
    levels: dict[int, Sequence[float]] | None = None,
    **extra: Any,
) -> BenchSummary:
    """A summary without a paired baseline (a candidate, or a stored baseline)."""
    return BenchSummary(
        model="m",
        latency=[lat(v, name) for name, v in (latency or {}).items()],
        concurrency=[level(v, n) for n, v in (levels or {}).items()],
        **extra,
    )


def limits(percent: float = 10.0, **wire: Any) -> Thresholds:
    return Thresholds.model_validate({"maxRegressionPercent": percent, **wire})


PLAN_3_10 = TrialPlan(min_trials=3, max_trials=10)
