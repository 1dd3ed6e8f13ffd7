"""A pooled percentile against the baseline's, through an order-statistic interval. Pure.

The baseline's pooled quantile is bracketed (the values above which its share is confidently
more, and confidently not more, than the allowed share), each end is turned into the
candidate's allowed value by the caller's ``threshold``, and the candidate's share above it is
judged by ``gate.tails``. It works on histograms as well as samples, so the live canary judges
Prometheus histograms with it. Paired benchmark trials have a sharper question of their own
(``gate.pair_tails``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vllm_operator.gate.tails import (
    Decision,
    Exceedance,
    ShareJudgement,
    allowed_share,
    judge_share,
    share_decision,
)
from vllm_operator.gate.tallies import Tally


@dataclass(frozen=True)
class RegressionJudgement:
    """The candidate's pooled percentile against a threshold set by the baseline's."""

    decision: Decision
    baseline_low: float
    """The baseline's quantile is at least this, with confidence (0 when nothing is)."""
    baseline_high: float
    """... and at most this (inf when no bound is)."""
    threshold_low: float
    """``threshold(baseline_low)``: the candidate's allowed value if the baseline is fast."""
    threshold_high: float
    within: ShareJudgement | None
    """The candidate's share above ``threshold_low`` (decides "within")."""
    beyond: ShareJudgement | None
    """The candidate's share above ``threshold_high`` (decides "beyond")."""


def quantile_bounds(
    tallies: Sequence[Tally], allowed: float, confidence: float
) -> tuple[float, float]:
    """An order-statistic interval of the pooled quantile that leaves ``allowed`` above it.

    The high end is the smallest point whose share above is confidently at most ``allowed``
    (the quantile is at or below it); the low end the largest point whose share above is
    confidently more (the quantile is above it). (0, inf) when the points decide neither.
    """
    # duplicates do not disturb a bisection; the tallies' points are sorted runs, which
    # sorting merges in about linear time (a set would scatter them)
    points = sorted(itertools.chain.from_iterable(t.points() for t in tallies))
    high = math.inf
    low = 0.0
    for point in _bisect_first(
        points, lambda p: _share(tallies, p, allowed, confidence) == "within"
    ):
        high = point
    for point in _bisect_last(
        points, lambda p: _share(tallies, p, allowed, confidence) == "beyond"
    ):
        low = point
    return low, high


def _share(tallies: Sequence[Tally], bound: float, allowed: float, confidence: float) -> Decision:
    return share_decision([t.exceedance(bound) for t in tallies], allowed, confidence)


def _bisect_first(points: Sequence[float], holds: Callable[[float], bool]) -> list[float]:
    """The first point where ``holds`` (monotone: false ... true), as a list of 0 or 1."""
    low, high = 0, len(points)
    while low < high:
        mid = (low + high) // 2
        if holds(points[mid]):
            high = mid
        else:
            low = mid + 1
    return [points[low]] if low < len(points) else []


def _bisect_last(points: Sequence[float], holds: Callable[[float], bool]) -> list[float]:
    """The last point where ``holds`` (monotone: true ... false), as a list of 0 or 1."""
    low, high = 0, len(points)
    while low < high:
        mid = (low + high) // 2
        if holds(points[mid]):
            low = mid + 1
        else:
            high = mid
    return [points[low - 1]] if low > 0 else []


def judge_regression(
    candidate: Sequence[Tally],
    baseline: Sequence[Tally],
    percentile: str,
    threshold: Callable[[float], float],
    confidence: float,
) -> RegressionJudgement:
    """Is the candidate's pooled ``percentile`` beyond ``threshold`` of the baseline's?

    ``threshold`` maps a baseline value to the most the candidate may reach (the relative limit
    and the floors); it must not decrease. Half of the error rate goes to the baseline's
    bounds (``regression_bounds``), half to the candidate's shares (``decide_regression``).
    """
    allowed = allowed_share(percentile)
    base_low, base_high = regression_bounds(baseline, allowed, confidence)
    t_low, t_high = threshold(base_low), threshold(base_high)
    within = [t.exceedance(t_low) for t in candidate]
    beyond = [t.exceedance(t_high) for t in candidate] if math.isfinite(t_high) else None
    decision, judged_within, judged_beyond = decide_regression(within, beyond, allowed, confidence)
    return RegressionJudgement(
        decision, base_low, base_high, t_low, t_high, judged_within, judged_beyond
    )


def regression_bounds(
    baseline: Sequence[Tally], allowed: float, confidence: float
) -> tuple[float, float]:
    """The baseline's pooled quantile bounds at half of the look's error rate (the other half
    is ``decide_regression``'s)."""
    return quantile_bounds(baseline, allowed, 1 - (1 - confidence) / 2)


def decide_regression(
    within: Sequence[Exceedance],
    beyond: Sequence[Exceedance] | None,
    allowed: float,
    confidence: float,
) -> tuple[Decision, ShareJudgement, ShareJudgement | None]:
    """The decision against a baseline from counts already taken.

    ``within``: the candidate's clusters above the threshold of the baseline's low bound;
    ``beyond``: above the threshold of its high bound (None: the baseline has no high bound,
    so "beyond" cannot be shown). Within when even the fast end of the baseline leaves the
    candidate within, beyond when even the slow end leaves it beyond; each share judged at
    half of the look's error rate (``confidence`` is the look's). The bench and the operator
    both decide through this, the bench from its samples, the operator from the summary.
    """
    half = 1 - (1 - confidence) / 2
    judged_within = judge_share(within, allowed, half)
    judged_beyond = None if beyond is None else judge_share(beyond, allowed, half)
    if judged_within.decision == "within":
        decision: Decision = "within"
    elif judged_beyond is not None and judged_beyond.decision == "beyond":
        decision = "beyond"
    else:
        decision = "undecided"
    return decision, judged_within, judged_beyond
