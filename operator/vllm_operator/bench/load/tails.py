"""A level's limited percentiles as counts for the summary (``api.summary.TailCounts``).

The SLO gate judges a tail limit as the share of observations above it (``gate.tails``), so
the summary carries, per level, per limited percentile and per trial, how many requests (for
ITL: gaps) were above the limit, and, against the paired baseline, how many of the
candidate's were above the pair's bar, the baseline's own percentile of that trial plus the
regression limit (``gate.pair_tails``). Everything here works on
tallies (``gate.tallies.Tally``) of one trial each, so the
benchmark (from its runs, ``bench.load.figures.tally``) and ``vllm-operator judge --report``
(from a full report's samples, ``bench.load.recount``) count the same way.

Per trial: TTFT, TPOT and E2E are one value per completed request (``SampleTally``); ITL is
every gap between streamed chunks, grouped by the request that streamed them
(``ClusteredTally``), whose design effect goes with the count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.tail_counts import TailCounts, TailRegression
from vllm_operator.api.workload import LatencyMetric, SloLimits
from vllm_operator.bench.stats import percentile
from vllm_operator.gate.clustering import Estimate, tail_clustering
from vllm_operator.gate.comparison import regression_limit_set
from vllm_operator.gate.pair_tails import allowed_value, baseline_percentile
from vllm_operator.gate.slo_tails import FEWEST, regression_limit
from vllm_operator.gate.tails import Exceedance, allowed_share
from vllm_operator.gate.tallies import Tally

QUANTILE = {"p50": 50, "p90": 90, "p95": 95, "p99": 99}

Tallies = Callable[[LatencyMetric], "Sequence[Tally] | str"]
"""A metric -> its per-trial tallies, or why they cannot be had (a report without gaps)."""


def level_tails(
    limits: SloLimits | None,
    candidate: Tallies,
    baseline: Tallies | None,
    thresholds: Thresholds | None,
    clustering: Estimate = tail_clustering,
) -> tuple[dict[str, float], dict[str, TailCounts]]:
    """(pooled percentile, counts) of every limited percentile of a level.

    ``baseline`` and ``thresholds`` with ``maxRegressionPercent`` set: each gets its
    regression record: per trial, the pair's bar and the candidate's observations above it.
    ``clustering`` estimates each count's clustering (``gate.clustering``; a memo of it when
    one report is counted at many thresholds).
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
            fixed = clustering(ours, allowed_share(p), FEWEST, None)
            record = None
            if theirs is not None and not isinstance(theirs, str) and thresholds is not None:
                assert limits is not None
                relative, floor = regression_limit(thresholds, limit, metric, limits)
                record = _regression(ours, theirs, p, (relative, floor), clustering)
            counts[key] = TailCounts(
                limit=limit,
                total=[int(e.total) for e in at_limit],
                above=[int(e.above) for e in at_limit],
                design_effect=_effects(fixed.effects),
                across=_up(fixed.across),
                stray_trial=None if fixed.stray is None else fixed.stray + 1,
                regression=record,
            )
    return pooled, counts


def _regression(
    candidate: Sequence[Tally],
    baseline: Sequence[Tally],
    percentile_name: str,
    limits: tuple[float, float],
    clustering: Estimate,
) -> TailRegression:
    """Trial by trial, the candidate's observations above the pair's bar (``gate.pair_tails``);
    a trial whose baseline measured nothing sets no bar and counts nothing (an empty trial of
    the candidate's, which the judge leaves out as it does for its limits)."""
    relative, floor = limits
    limit = allowed_value(relative, floor)
    allowed = allowed_share(percentile_name)
    bars: list[float] = []
    counted: list[Exceedance] = []
    pairs = list(zip(candidate, baseline, strict=False))
    bases = [baseline_percentile(theirs, allowed) for _, theirs in pairs]
    for (ours, _), base in zip(pairs, bases, strict=True):
        if base is None:
            bars.append(0.0)
            counted.append(Exceedance(0.0, 0.0))
            continue
        bar = limit(base)
        bars.append(round(bar, 1))
        counted.append(ours.exceedance(bar))
    fixed = clustering([ours for ours, _ in pairs], allowed, FEWEST, bases)
    return TailRegression(
        relative_percent=relative,
        floor=floor,
        bars=bars,
        total=[int(e.total) for e in counted],
        above=[int(e.above) for e in counted],
        design_effect=_effects(fixed.effects),
        across=_up(fixed.across),
        stray_trial=None if fixed.stray is None else fixed.stray + 1,
    )


def _up(effect: float) -> float:
    """A design effect rounded up to 0.1 (never smaller than estimated)."""
    return max(1.0, math.ceil(effect * 10 - 1e-9) / 10)


def _effects(effects: Sequence[float]) -> list[float] | None:
    """Per trial, the design effect rounded up to 0.1; None when every one is 1."""
    if all(e <= 1.0 for e in effects):
        return None
    return [_up(e) for e in effects]
