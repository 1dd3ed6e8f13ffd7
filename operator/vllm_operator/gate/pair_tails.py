"""Is the candidate's tail beyond the baseline's plus the limit? Asked of each paired trial. Pure.

The limit on a percentile against the baseline is ``candidate <= f(baseline)`` with
``f(x) = max(x * (1 + maxRegressionPercent / 100), x + floor)``. A percentile is a promise
about a share ("p99 <= x": at most 1% above x), so the limit is judged as one: in each
paired trial, take the baseline's own percentile ``b`` of that trial, and count the
candidate's observations above ``f(b)``. When the candidate's percentile sits exactly on the
limit, the share of its observations above ``f(b)`` is the percentile's own (1% for p99);
a candidate within the limit has fewer above, a slower one more. The per-trial counts are
then judged by ``tails.judge_share`` against that share with the trials as clusters: the
same judge as every SLO limit, with the pair's baseline setting the bar instead of the team.

Why the pair's own ``b``: the trials are paired (candidate and baseline measured back to
back on the same requests), and a tail moves with the moment it was measured: on an H200 the
twin's TTFT p99 at 8 requests/s ranged from 71 to 192 ms over seven 20 s trials. A bar set
per trial moves with that drift, so drift both servers share cancels, and what the bar's
own estimate scatters (a p99 of 480 requests is its 5th slowest) shows up as variation
between trials, which the clustered interval already carries.

Why not the pool's slowest share (the rule before this one, like Mood's median test): at
p99 a pair's pool has 10 slowest observations at 24 requests/s, and a server's own tail
moves from trial to trial by more than a 10% limit, so those 10 belong almost wholly to one
side and the trials act like coin tosses: 2,000 simulated A/A gates Passed 11% of the time
(``benchmarks/tail_noise.py``). Counting every candidate observation against the bar uses
all of them, not the slowest ten.

Inter-token gaps come grouped by the request that streamed them; the slow gaps of one
stalled stream are one piece of evidence, not many, so the count carries the design effect
of its requests (``tails.gap_design_effect``, through the tally).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from vllm_operator.gate.tails import Exceedance
from vllm_operator.gate.tallies import ClusteredTally, SampleTally, Tally


def allowed_value(relative_percent: float, floor: float) -> Callable[[float], float]:
    """``f``: the slowest the candidate's percentile may be for a baseline percentile ``x``."""
    factor = 1 + relative_percent / 100
    return lambda x: max(x * factor, x + floor)


def baseline_percentile(baseline: Tally, allowed: float) -> float | None:
    """The baseline's percentile of one trial as the bar's base: the smallest of its slowest
    ``ceil(allowed * n)`` observations (for p99 of 480 requests, the 5th slowest), so exactly
    that many are at or above it. None when the trial has no observation."""
    size = baseline.exceedance(-math.inf).total
    if size <= 0:
        return None
    top = max(1, math.ceil(allowed * size - 1e-9))
    slowest_ones = slowest(baseline, top)
    if not slowest_ones:
        return None
    return min(v for v, _ in slowest_ones)


@dataclass(frozen=True)
class PairCount:
    """One paired trial: the bar ``f(b)`` (ms) and the candidate's observations above it."""

    bar: float
    exceedance: Exceedance


def pair_exceedance(
    candidate: Tally, baseline: Tally, allowed: float, limit: Callable[[float], float]
) -> PairCount | None:
    """The candidate's observations above ``limit`` of the baseline's own percentile in one
    paired trial, with the design effect of their groups (requests); None without a
    baseline observation to set the bar."""
    base = baseline_percentile(baseline, allowed)
    if base is None:
        return None
    bar = limit(base)
    return PairCount(bar, candidate.exceedance(bar))


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
