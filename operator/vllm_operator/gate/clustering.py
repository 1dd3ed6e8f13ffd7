"""How a level's tail counts cluster, estimated once per run and never at the bar. Pure.

A tail limit is judged on per-trial counts above a bar (``gate.tails``), and the counts are
not independent: the gaps of one request share its fate, and the requests of one trial share
the server's state. The judge divides the counts by two design effects, one inside each trial
(``tails.gap_design_effect``) and one across the trials (the spread of their shares). Both
used to be estimated *at the bar being judged*, from the very counts being judged, so a
looser bar changed the estimate as well as the counts, and the verdict could move either
way. On the H100 aa2 report of 2026-12-07 (``docs/calibration/h100-2026-12-07``) the ITL p99
comparison with the twin at 8 requests/s, at a floor of 10, 15 and 20 ms, counted 498, 382 and
207 gaps above the bars, but the estimated independent gaps were 43,955, 4,210 and 1,302: a
stray trial was left out at 10 and 15 but not at 20 (its count no longer stood out), and the
spread between the trials' shares swung with what the bar cut off. The verdict went Passed,
Inconclusive, Passed as the floor rose: loosening a limit made the verdict worse.

Here the clustering is a property of the run, not of the bar. It is estimated once per
metric, percentile, level and run, from the candidate's own tail at the shares the gate
decides on, and the bench writes it into the summary beside the counts
(``TailCounts.across``, ``strayTrial``), so the operator judges with the same numbers:

- the grid: the bounds above which the pooled share of the candidate's observations is
  ``SHARES`` times the percentile's allowed share (for p99, from 2% down to 0.1% of the
  level's observations);
- the stray trial (``tails.stray_cluster``) is chosen once, at the bound where the pooled
  share is the allowed share itself, and only a stall (a trial with more slow observations
  than the others, not fewer) is left out, at every bar;
- each trial's design effect inside it (ITL gaps by request) is the median of its effects
  over the grid; the design effect across the kept trials (``across``) is the median over
  the grid of the spread of their shares (with those effects) over binomial noise.

Against a paired baseline each trial's observations are first divided by that trial's
baseline percentile (the base of the pair's bar, ``gate.pair_tails``), so the grid runs over
bars of the same shape as the regression limit's: at a ratio of 1 the bar is the baseline's
own percentile, with no allowance.

The worked example, H100 aa2, ITL p99 against the twin at 8 requests/s: over the grid the
design effect across the four trials ran 34-154 (median 68, trial counts at the allowed share
90, 250, 210, 262: no stall). The judge (``tails.judge_share_fixed``) asks "beyond" with 68
and "within" with it scaled to the observed share (``tails.across_at``): at a floor of 10,
15, 20 and 25 ms, 508, 385, 207 and 112 of 81,177 gaps above the bars, Inconclusive,
Inconclusive, Passed, Passed. The counts are now the only thing a threshold moves, and a
looser limit, floor or allowance moves every trial's count down or leaves it, so "within"
can only be gained and "beyond" only lost.

Why the median over a grid and not one bound: one bound's estimate rests on a handful of
counts per trial and swings tenfold between neighbours (43,955, 4,210 and 1,302 independent
gaps at 10, 15 and 20 ms under the earlier rule); the median over the tail the decisions are
made in is steady, and no function of any threshold. Why not the worst case (every request
one cluster, or the largest effect of the grid): the slow gaps of a prefill stall hit every
running stream at once, not one request, and with the grid's largest effect an identical
revision could never show a 1% ITL share within on a few runs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vllm_operator.gate.pair_tails import slowest
from vllm_operator.gate.tails import Exceedance, stray_cluster
from vllm_operator.gate.tallies import Tally

SHARES = (2.0, 1.4, 1.0, 0.7, 0.5, 0.35, 0.25, 0.18, 0.13, 0.1)
"""The grid: pooled shares above the bound, in multiples of the percentile's allowed share."""

REFERENCE = 1.0
"""The grid point where the stray trial is chosen: the percentile itself."""


@dataclass(frozen=True)
class Clustering:
    """A level's clustering of one limited percentile, fixed for every bar."""

    effects: tuple[float, ...]
    """Per trial, the design effect inside it (>= 1; ITL gaps by request, else 1)."""
    across: float
    """The design effect across the kept trials (>= 1)."""
    stray: int | None
    """The trial (0-based) left out at every bar, if one is."""


def tail_clustering(
    tallies: Sequence[Tally],
    allowed: float,
    fewest: int,
    bases: Sequence[float | None] | None = None,
) -> Clustering:
    """The clustering of the candidate's per-trial ``tallies`` for a percentile that allows
    ``allowed`` above it. ``bases``: per trial, the paired baseline's percentile (None: the
    trial set no bar and is left out of the grid); absent, the values are used as they are.
    From ``fewest`` trials on, one stray trial may be left out (``tails.stray_cluster``)."""
    k = len(tallies)
    scale = [1.0] * k if bases is None else [b if b else 0.0 for b in bases]
    used = [i for i in range(k) if scale[i] > 0]
    totals = [tallies[i].exceedance(-math.inf).total if i in used else 0.0 for i in range(k)]
    n = sum(totals)
    plain = Clustering((1.0,) * k, 1.0, None)
    if n <= 0:
        return plain
    top = math.ceil(max(SHARES) * allowed * n)
    pooled = sorted(
        (v / scale[i] for i in used for v, _ in slowest(tallies[i], min(top, int(totals[i])))),
        reverse=True,
    )
    grid: list[tuple[float, list[Exceedance]]] = []
    for share in SHARES:
        rank = math.ceil(share * allowed * n)
        if share * allowed >= 1 or rank >= len(pooled):
            continue
        ratio = _below(pooled, rank)
        if ratio is None:
            continue
        at = [
            tallies[i].exceedance(ratio * scale[i]) if i in used else Exceedance(0.0, 0.0)
            for i in range(k)
        ]
        grid.append((share, at))
    if not grid:
        return plain
    reference = min(grid, key=lambda g: abs(g[0] - REFERENCE))[1]
    stray = _stalled(reference, stray_cluster(reference, fewest))
    effects = tuple(
        max(1.0, statistics.median(at[i].design_effect for _, at in grid)) for i in range(k)
    )
    kept = [i for i in range(k) if i != stray]
    across = statistics.median(
        _across([at[i] for i in kept], [effects[i] for i in kept]) for _, at in grid
    )
    return Clustering(effects, max(1.0, across), stray)


Estimate = Callable[[Sequence[Tally], float, int, "Sequence[float | None] | None"], Clustering]
"""``tail_clustering`` or a memo of it."""


class ClusteringMemo:
    """``tail_clustering`` remembered for tallies that live as long as the memo: a report
    judged at many thresholds (``bench.load.recount.Recount``) estimates each level's
    clustering once, as it is a property of the run. Keyed by the tallies' identity (the memo
    holds them, so an identity is never reused) and the other arguments."""

    def __init__(self) -> None:
        self._seen: dict[tuple[object, ...], tuple[Sequence[Tally], Clustering]] = {}

    def __call__(
        self,
        tallies: Sequence[Tally],
        allowed: float,
        fewest: int,
        bases: Sequence[float | None] | None = None,
    ) -> Clustering:
        key = (
            tuple(id(t) for t in tallies),
            allowed,
            fewest,
            None if bases is None else tuple(bases),
        )
        if key not in self._seen:
            self._seen[key] = (tuple(tallies), tail_clustering(tallies, allowed, fewest, bases))
        return self._seen[key][1]


def _below(pooled: Sequence[float], rank: int) -> float | None:
    """The largest of the descending ``pooled`` values below its ``rank``-th largest, so that
    at least ``rank`` observations lie above it, ties included (a stall's gaps can be equal);
    None when every value from there on is the same."""
    top = pooled[rank - 1]
    for value in pooled[rank:]:
        if value < top:
            return value
    return None


def _stalled(clusters: Sequence[Exceedance], stray: int | None) -> int | None:
    """``stray`` if it is a stall (a share above the others'), else None: a trial with fewer
    slow observations than the others is no stall, and leaving it out would only make the
    level look slower than it was measured."""
    if stray is None:
        return None
    rest = [c for i, c in enumerate(clusters) if i != stray]
    mine = clusters[stray]
    rest_share = sum(c.above for c in rest) / max(sum(c.total for c in rest), 1.0)
    return stray if mine.above > rest_share * mine.total else None


def _across(clusters: Sequence[Exceedance], effects: Sequence[float]) -> float:
    """The design effect across the clusters, each cluster's counts divided
    by its own design effect first: the cluster-robust variance of the pooled share, with its
    small-sample factor K / (K - 1), over the binomial variance, never below 1 (as
    ``tails._effective``)."""
    scaled = [
        (c.above / max(d, 1.0), c.total / max(d, 1.0))
        for c, d in zip(clusters, effects, strict=True)
        if c.total > 0
    ]
    k = len(scaled)
    n = sum(m for _, m in scaled)
    if k < 2 or n <= 0:
        return 1.0
    share = sum(a for a, _ in scaled) / n
    if not 0 < share < 1:
        return 1.0
    robust = k / (k - 1) * sum((a - share * m) ** 2 for a, m in scaled) / n**2
    return max(1.0, robust / (share * (1 - share) / n))
