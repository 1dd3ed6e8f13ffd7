"""Is the candidate's tail beyond the baseline's plus the limit? Asked of each paired trial. Pure.

The limit on a percentile against the baseline is ``candidate <= f(baseline)`` with
``f(x) = max(x * (1 + maxRegressionPercent / 100), x + floor)``. ``f`` increases, so this is
the same as ``g(candidate) <= baseline`` with its inverse ``g(c) = min(c / (1 + r), c -
floor)``: take the limit off the candidate's observations, then ask whether its percentile
still lies above the baseline's. That is a two-sample question about one quantile, answered
the way Mood's median test answers it for the median: pool the two samples of a trial, take
the slowest ``allowed`` share of the pool (for p99 the slowest 1%), and count how many of
those are the candidate's. When the two percentiles are equal, the pool's percentile is that
value and each side has its own ``allowed`` share above it: half of the slowest are the
candidate's. A candidate whose shifted percentile is lower than the baseline's owns fewer
than half, a slower one more. So the decision is a share against one half, judged by
``tails.judge_share`` with the trials as clusters, the same judge as every other tail.

Why this, and not bounds on the baseline's pooled percentile first: the trials are paired
(candidate and baseline measured back to back on the same requests), and a tail moves with
the moment it was measured: on an H200 the twin's TTFT p99 at 8 requests/s ranged from 71 to
192 ms over seven 20 s trials. An interval of the pooled percentile carries all of that
drift, and a candidate compared against its low end could not be shown within a 100 ms floor
in 10 trials (``benchmarks/tail_noise.py``). Pooling each pair separately lets the pair's
own tail set the bar, so drift shared by both servers cancels, as the paired intervals of
the study's figures do. Each pair contributes its slowest ``ceil(allowed * n)`` observations:
at 24 requests/s and 20 s a trial, 10 per pair for p99.

Inter-token gaps come grouped by the request that streamed them; the slowest gaps of one
stalled stream are one piece of evidence, not many, so each pair's count carries the design
effect of its requests (``tails.gap_design_effect``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from vllm_operator.gate.tails import Exceedance, gap_design_effect
from vllm_operator.gate.tallies import ClusteredTally, SampleTally, Tally

EVEN = 0.5
"""The candidate's share of a pair's slowest observations when the two percentiles are equal."""


def candidate_shift(relative_percent: float, floor: float) -> Callable[[float], float]:
    """``g``: a candidate observation less the limit, the inverse of the allowed value."""
    factor = 1 + relative_percent / 100
    return lambda c: min(c / factor, c - floor)


def pair_exceedance(
    candidate: Tally, baseline: Tally, allowed: float, shift: Callable[[float], float]
) -> Exceedance:
    """Of one pair's slowest ``allowed`` share (the candidate's shifted by ``shift``, which
    must not decrease), how many are the candidate's, with the design effect of the groups
    (requests) they come from.

    On equal values the candidate's observation counts as the slower one, so a tie can only
    make "within" harder to show.
    """
    size = candidate.exceedance(-math.inf).total + baseline.exceedance(-math.inf).total
    if size <= 0:
        return Exceedance(0.0, 0.0)
    top = max(1, math.ceil(allowed * size - 1e-9))
    pooled = [(shift(v), 1, g) for v, g in slowest(candidate, top)]
    pooled += [(v, 0, g) for v, g in slowest(baseline, top)]
    per_group: dict[tuple[int, int], int] = {}
    for _, side, group in heapq.nlargest(top, pooled):
        per_group[(side, group)] = per_group.get((side, group), 0) + 1
    hits = sum(n for (side, _), n in per_group.items() if side == 1)
    effect = 1.0
    if not (isinstance(candidate, SampleTally) and isinstance(baseline, SampleTally)):
        effect = gap_design_effect(
            [(n if side == 1 else 0, n) for (side, _), n in per_group.items()]
        )
    return Exceedance(float(hits), float(top), None, effect)


@runtime_checkable
class Slowest(Protocol):
    """A tally that names its slowest observations and the group (request) of each."""

    def slowest(self, count: int) -> Sequence[tuple[float, int]]:
        """The ``count`` largest values (or all), each with its group's number."""
        ...


def slowest(tally: Tally, count: int) -> Sequence[tuple[float, int]]:
    """The ``count`` largest observations of a tally, each with its group's number: every
    request its own group for ``SampleTally``, the request of each gap for ``ClusteredTally``,
    or what a tally's own ``slowest`` says (a report's replayed gaps)."""
    if isinstance(tally, SampleTally):
        values = tally.values[-count:] if count > 0 else ()
        first = len(tally.values) - len(values)
        return [(v, first + i) for i, v in enumerate(values)]
    if isinstance(tally, ClusteredTally):
        every = ((v, i) for i, group in enumerate(tally.groups) for v in group)
        return heapq.nlargest(count, every)
    if isinstance(tally, Slowest):
        return tally.slowest(count)
    raise TypeError(f"a paired tail needs observations, not {type(tally).__name__}")
