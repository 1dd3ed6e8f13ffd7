"""A level's limited percentiles as counts for the summary (``api.summary.TailCounts``).

The SLO gate judges a tail limit as the share of observations above it (``gate.tails``), so
the summary carries, per level, per limited percentile and per trial, how many requests (for
ITL: gaps) were above the limit, and, against the paired baseline, how many of the
candidate's were above the threshold of each end of the baseline's pooled-percentile
interval. Everything here works on tallies (``gate.tails.Tally``) of one trial each, so the
benchmark (from its runs, ``bench.load_figures.tally``) and ``vllm-operator judge --report``
(from a full report's samples, ``bench.report_tails``) count the same way.

Per trial: TTFT, TPOT and E2E are one value per completed request (``SampleTally``); ITL is
every gap between streamed chunks, grouped by the request that streamed them
(``ClusteredTally``), whose design effect goes with the count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from vllm_operator.api.spec import Thresholds
from vllm_operator.api.summary import TailCounts, TailRegression
from vllm_operator.api.workload import LatencyMetric, SloLimits
from vllm_operator.bench.stats import percentile
from vllm_operator.gate.comparison import regression_limit_set
from vllm_operator.gate.slo_tails import regression_threshold, stored_bounds, stored_thresholds
from vllm_operator.gate.tails import (
    Exceedance,
    Tally,
    allowed_share,
    regression_bounds,
)

QUANTILE = {"p50": 50, "p90": 90, "p95": 95, "p99": 99}

Tallies = Callable[[LatencyMetric], "Sequence[Tally] | str"]
"""A metric -> its per-trial tallies, or why they cannot be had (a report without gaps)."""


def level_tails(
    limits: SloLimits | None,
    candidate: Tallies,
    baseline: Tallies | None,
    thresholds: Thresholds | None,
    confidence: float,
) -> tuple[dict[str, float], dict[str, TailCounts]]:
    """(pooled percentile, counts) of every limited percentile of a level.

    ``baseline`` and ``thresholds`` with ``maxRegressionPercent`` set: each gets its
    regression record, the baseline's bounds and the decision at ``confidence`` (the look's).
    """
    pooled: dict[str, float] = {}
    counts: dict[str, TailCounts] = {}
    against = thresholds is not None and regression_limit_set(thresholds)
    for metric, by_p in (limits.metric_limits() if limits else {}).items():
        ours = candidate(metric)
        theirs = baseline(metric) if baseline is not None and against else None
        for p, limit in by_p.items():
            key = f"{metric}.{p}"
            if isinstance(ours, str):
                counts[key] = TailCounts(limit=limit, missing=ours)
                continue
            values = [v for t in ours for v in t.points()]
            if values:
                pooled[key] = round(percentile(values, QUANTILE[p]), 1)
            at_limit = [t.exceedance(limit) for t in ours]
            record, counted = None, [at_limit]
            if theirs is not None and not isinstance(theirs, str) and thresholds is not None:
                threshold = regression_threshold(thresholds, limit)
                record, against_base = _regression(ours, theirs, p, threshold, confidence)
                counted += against_base
            counts[key] = TailCounts(
                limit=limit,
                total=[int(e.total) for e in at_limit],
                above=[int(e.above) for e in at_limit],
                design_effect=_effects(counted),
                regression=record,
            )
    return pooled, counts


def _regression(
    candidate: Sequence[Tally],
    baseline: Sequence[Tally],
    percentile_name: str,
    threshold: Callable[[float], float],
    confidence: float,
) -> tuple[TailRegression, list[list[Exceedance]]]:
    """The record against the baseline, and the counts it took (for their design effects)."""
    low, high = regression_bounds(baseline, allowed_share(percentile_name), confidence)
    b_low, b_high = stored_bounds(low, high)
    t_low, t_high = stored_thresholds(threshold, b_low, b_high)
    within = [t.exceedance(t_low) for t in candidate]
    beyond = [] if t_high is None else [t.exceedance(t_high) for t in candidate]
    record = TailRegression(
        confidence=confidence,
        baseline=[b_low, b_high],
        thresholds=[t_low, t_high],
        within=[int(e.above) for e in within],
        beyond=[int(e.above) for e in beyond],
    )
    return record, [within, beyond] if beyond else [within]


def _effects(counted: Sequence[Sequence[Exceedance]]) -> list[float] | None:
    """Per trial, the largest design effect of its counts, rounded up to 0.1 (never smaller
    than measured); None when every one is 1."""
    per_trial = [max(e.design_effect for e in trial) for trial in zip(*counted, strict=True)]
    if all(d <= 1.0 for d in per_trial):
        return None
    return [max(1.0, math.ceil(d * 10 - 1e-9) / 10) for d in per_trial]
