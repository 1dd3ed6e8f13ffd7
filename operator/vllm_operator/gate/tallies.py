"""The same tail questions of samples and of histograms: how many observations lie above a
bound, exactly (samples) or between what the bucket bounds allow (histograms). Pure.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from vllm_operator.gate.tails import Exceedance, gap_design_effect


class Tally(Protocol):
    """One cluster's observations, asked how many lie above a bound."""

    def exceedance(self, bound: float) -> Exceedance:
        """Observations above ``bound``, with its never-fewer and never-more counts."""
        ...

    def points(self) -> Sequence[float]:
        """The bounds at which ``exceedance`` is exact (every value; every bucket bound)."""
        ...


@dataclass(frozen=True)
class SampleTally:
    """Exact observations of one cluster (a trial's requests, or its gaps)."""

    values: tuple[float, ...]
    design_effect: float = 1.0

    @classmethod
    def of(cls, values: Sequence[float], design_effect: float = 1.0) -> SampleTally:
        return cls(tuple(sorted(values)), design_effect)

    def exceedance(self, bound: float) -> Exceedance:
        above = len(self.values) - _count_at_most(self.values, bound)
        return Exceedance(float(above), float(len(self.values)), None, self.design_effect)

    def points(self) -> Sequence[float]:
        return self.values


@dataclass(frozen=True)
class ClusteredTally:
    """Exact observations of one cluster that come in sub-clusters sharing a fate: a trial's
    inter-token gaps, grouped by the request that streamed them (each group sorted).

    Its exceedances carry the design effect of the groups (``gap_design_effect``) at every
    bound, so a trial whose slow gaps all sit in one stalled stream counts for about as much
    as its requests, not as its thousands of gaps.
    """

    groups: tuple[tuple[float, ...], ...]

    @classmethod
    def of(cls, groups: Sequence[Sequence[float]]) -> ClusteredTally:
        return cls(tuple(tuple(sorted(g)) for g in groups if g))

    def exceedance(self, bound: float) -> Exceedance:
        per_group = [(len(g) - _count_at_most(g, bound), len(g)) for g in self.groups]
        above = sum(a for a, _ in per_group)
        total = sum(n for _, n in per_group)
        return Exceedance(float(above), float(total), None, gap_design_effect(per_group))

    def points(self) -> Sequence[float]:
        return self._points

    @cached_property
    def _points(self) -> tuple[float, ...]:
        return tuple(sorted(v for g in self.groups for v in g))


@dataclass(frozen=True)
class HistogramTally:
    """A Prometheus histogram (or the delta of two scrapes): cumulative ``(le, count)``
    pairs in increasing ``le``, the last one ``+Inf`` holding every observation."""

    buckets: tuple[tuple[float, float], ...]

    def exceedance(self, bound: float) -> Exceedance:
        return histogram_exceedance(self.buckets, bound)

    def points(self) -> Sequence[float]:
        return [le for le, _ in self.buckets if math.isfinite(le)]


def histogram_exceedance(buckets: Sequence[tuple[float, float]], limit: float) -> Exceedance:
    """Observations above ``limit`` in a cumulative histogram, judged at its bucket bounds.

    ``above`` counts above the largest bound at or below the limit (everything when the limit
    is below the first bound): never fewer than the truth. ``surely_above`` counts above the
    smallest bound at or above it (nothing when the limit lies in the +Inf bucket): never more.
    """
    if not buckets or not math.isinf(buckets[-1][0]):
        raise ValueError("a histogram needs its +Inf bucket (the count of every observation)")
    total = buckets[-1][1]
    at_most_below = 0.0  # cumulative count at the largest bound <= limit
    at_most_above = total  # cumulative count at the smallest bound >= limit
    for le, count in buckets:
        if le <= limit:
            at_most_below = count
        if le >= limit:
            at_most_above = count
            break
    return Exceedance(total - at_most_below, total, total - at_most_above)


def _count_at_most(values: Sequence[float], bound: float) -> int:
    """How many of the sorted ``values`` are <= ``bound``."""
    return bisect.bisect_right(values, bound)
