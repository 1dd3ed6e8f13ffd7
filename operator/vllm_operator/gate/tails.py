"""Tail limits judged as what they promise: a share of observations above a bound. Pure.

"TTFT p99 <= 1000 ms" promises that at most 1% of requests take longer than 1000 ms. So the
gate counts the observations above the limit (requests; for inter-token latency the gaps
between chunks) in every measured trial of a level and asks whether the true share above it
is at most the percentile's allowed share (1% for p99, 50% for p50), with confidence. The
per-trial percentile was the wrong unit: a p99 of 480 requests rests on the 5 slowest, three
trials of it give a t interval with 2 degrees of freedom, and on an H200 an identical revision
with 0 of 1,440 requests over a 1,000 ms limit came out "[21.3, 1357] straddles". Counted,
0 of 1,440 bounds the share below 0.5% and the limit is met.

The interval, and why this one:
- **Clopper-Pearson** (the exact binomial interval, from beta quantiles) on the pooled
  counts: it never covers less than it states, it handles 0 exceedances (the usual case of a
  healthy server) without a continuity fudge, and it needs no random numbers, so the bench and
  the operator reach the same bounds from the same counts, bit for bit. Wald intervals
  collapse to a point at 0 and Wilson's undercovers in the tail when the count is 0-2.
- **Clusters**: observations are not independent. Requests of one trial share the server's
  state (a compile stall, a preemption storm), and the gaps of one request share its fate.
  Each cluster (a trial; a pod's scrape over a canary step) brings its own *design effect*
  for the correlation within it (ITL gaps clustered by request: ``gap_design_effect``), and
  the spread of the clusters' shares around the pooled share gives a second one across them
  (the ratio of the cluster-robust variance of the pooled share to the binomial one, Kish
  1965; Rao and Scott 1981 use the same ratio to correct chi-square tests on clustered
  counts). The counts are divided by both before the exact interval, so a level whose trials
  disagree gets the width its trials justify, and one whose trials agree (or never exceed)
  is judged on its requests. A beta-binomial fit would model the same overdispersion, but
  its maximum likelihood needs more clusters than the 3-10 trials a gate has; a cluster
  bootstrap over 3 trials has 10 distinct resamples. ``benchmarks/tail_noise.py`` measures
  the false-fail and miss rates of the result on a noise model refitted from H200 requests.
- **Bounds between bucket bounds**: a Prometheus histogram knows only how many observations
  fell at or below each bucket bound. Above a limit that lies between two bounds, the count
  above the lower bound is never fewer than the truth, and the count above the upper bound
  never more. "Within" is decided on the first (the upper confidence bound of a share that
  may be too high), "beyond" on the second: a limit between bounds can only make the judge
  undecided, never wrong in either direction. Samples have exact counts; both are the same.

Against a baseline (``judge_regression``): the baseline's pooled quantile is bracketed by an
order-statistic interval (the values above which its share is confidently more, and
confidently not more, than the allowed share), each end is turned into the candidate's
allowed value by the caller's ``threshold`` (relative limit and floors), and the candidate's
share above it is judged as above: within when even the lower end of the baseline leaves the
candidate within, beyond when even the upper end leaves it beyond. The error rate is split
evenly between the two steps (union bound). When nothing changed the candidate's share above
the baseline's own p99 is about 1%; a regression floor turns that into a decidable margin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from vllm_operator.gate.regression import EXACT

Decision = Literal["beyond", "within", "undecided"]

ALLOWED: dict[str, float] = {"p50": 0.5, "p90": 0.1, "p95": 0.05, "p99": 0.01}
"""The share of observations a percentile limit allows above it."""

_CF_STEPS = 10_000
"""Most continued-fraction terms for the incomplete beta (converges in ~sqrt(n) terms)."""

_BISECT_STEPS = 80
"""Bisection steps of a beta quantile: 2^-80 of the unit interval, far below any share."""


def allowed_share(percentile: str) -> float:
    """ "p99" -> 0.01: the share of observations the percentile's limit allows above it."""
    try:
        return ALLOWED[percentile]
    except KeyError:
        raise ValueError(
            f"unknown percentile {percentile!r}: use one of {sorted(ALLOWED)}"
        ) from None


@dataclass(frozen=True)
class Exceedance:
    """Observations of one cluster (a trial of a level, a pod's scrape over a canary step)
    above a bound."""

    above: float
    """Counted above the bound; from a histogram, above its largest bucket bound at or below
    the limit, so never fewer than the truth."""
    total: float
    """Observations in the cluster."""
    surely_above: float | None = None
    """From a histogram: above its smallest bucket bound at or above the limit, never more
    than the truth. None: exact counts (samples), the same as ``above``."""
    design_effect: float = 1.0
    """Variance inflation from correlation inside the cluster (>= 1): ITL gaps clustered by
    request (``gap_design_effect``); 1 for one observation per request."""

    @property
    def least(self) -> float:
        """Observations surely above the bound."""
        return self.above if self.surely_above is None else self.surely_above


@dataclass(frozen=True)
class ShareJudgement:
    """A share above a bound against the share the limit allows, with its interval."""

    decision: Decision
    share: float
    """Pooled observed share above the bound (from the counts that are never too few)."""
    low: float
    """Lower confidence bound of the true share (from the counts that are never too many)."""
    high: float
    """Upper confidence bound of the true share."""
    allowed: float
    observations: float
    effective: float
    """Observations after both design effects: what the interval effectively rests on."""
    clusters: int


def judge_share(
    clusters: Sequence[Exceedance], allowed: float, confidence: float
) -> ShareJudgement:
    """Is the true share above the bound beyond ``allowed``, within it, or undecided?

    ``confidence`` is two-sided (a look's confidence, ``gate.sequential``): each bound errs on
    its side with at most half of ``1 - confidence``. No observations: undecided.
    """
    if not 0 < allowed < 1:
        raise ValueError(f"allowed share {allowed} must lie strictly between 0 and 1")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} must lie strictly between 0 and 1")
    tail = (1 - confidence) / 2
    total = sum(c.total for c in clusters)
    if total <= 0:
        return ShareJudgement("undecided", 0.0, 0.0, 1.0, allowed, 0.0, 0.0, len(clusters))
    most = [(c.above, c.total, c.design_effect) for c in clusters]
    least = [(c.least, c.total, c.design_effect) for c in clusters]
    share, eff_most, hits_most = _effective(most)
    _, eff_least, hits_least = _effective(least)
    high = clopper_pearson_upper(hits_most, eff_most, tail)
    low = clopper_pearson_lower(hits_least, eff_least, tail)
    if high <= allowed + EXACT:
        decision: Decision = "within"
    elif low > allowed + EXACT:
        decision = "beyond"
    else:
        decision = "undecided"
    return ShareJudgement(decision, share, low, high, allowed, total, eff_most, len(clusters))


def _effective(counts: Sequence[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(pooled share, effective observations, effective hits) of clustered counts.

    Each cluster's counts are first divided by its own design effect; then the spread of the
    clusters' shares gives the design effect across clusters: the cluster-robust variance of
    the pooled share, with its small-sample factor K / (K - 1), over the binomial variance,
    never below 1 (clusters that agree better than binomial noise are not rewarded).
    """
    scaled = [(a / max(d, 1.0), n / max(d, 1.0)) for a, n, d in counts if n > 0]
    hits = sum(a for a, _ in scaled)
    n = sum(m for _, m in scaled)
    share = hits / n
    k = len(scaled)
    across = 1.0
    if k >= 2 and 0 < share < 1:
        robust = k / (k - 1) * sum((a - share * m) ** 2 for a, m in scaled) / n**2
        across = max(1.0, robust / (share * (1 - share) / n))
    return share, n / across, hits / across


def gap_design_effect(per_request: Sequence[tuple[int, int]]) -> float:
    """Design effect of gaps clustered by request: ``per_request`` = (gaps above, gaps).

    The cluster-robust variance of the share of gaps above a bound over the binomial one, never
    below 1: when the slow gaps of a trial fall in a few requests (one stalled stream), the
    trial's thousands of gaps count for about as much as its requests.
    """
    hits = sum(a for a, _ in per_request)
    n = sum(m for _, m in per_request)
    k = len(per_request)
    if n <= 0 or k < 2 or hits <= 0 or hits >= n:
        return 1.0
    share = hits / n
    robust = k / (k - 1) * sum((a - share * m) ** 2 for a, m in per_request) / n**2
    return max(1.0, robust / (share * (1 - share) / n))


def observations_needed(allowed: float, confidence: float, share: float = 0.0) -> int:
    """Fewest observations whose interval can decide "within" at an observed ``share``.

    With no exceedance and a 1% limit at 95% (2.5% on the upper side) this is 367: fewer
    requests cannot show a 1% promise kept however fast they were. A share at or above
    ``allowed`` can never be decided within: returns 0 for "never"; callers say so.
    """
    if share >= allowed:
        return 0
    tail = (1 - confidence) / 2
    low, high = 1, 1
    while clopper_pearson_upper(share * high, high, tail) > allowed:
        low, high = high, high * 2
        if high > 10**12:
            return 0
    while high - low > 1:
        mid = (low + high) // 2
        if clopper_pearson_upper(share * mid, mid, tail) > allowed:
            low = mid
        else:
            high = mid
    return high


# -- tallies: the same questions of samples and of histograms --------------------------------


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
    low, high = 0, len(values)
    while low < high:
        mid = (low + high) // 2
        if values[mid] <= bound:
            low = mid + 1
        else:
            high = mid
    return low


# -- against a baseline ----------------------------------------------------------------------


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
    points = sorted({p for t in tallies for p in t.points()})
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
    return judge_share([t.exceedance(bound) for t in tallies], allowed, confidence).decision


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
    bounds, half to the candidate's shares.
    """
    allowed = allowed_share(percentile)
    half = 1 - (1 - confidence) / 2
    base_low, base_high = quantile_bounds(baseline, allowed, half)
    t_low, t_high = threshold(base_low), threshold(base_high)
    within = judge_share([t.exceedance(t_low) for t in candidate], allowed, half)
    beyond = (
        judge_share([t.exceedance(t_high) for t in candidate], allowed, half)
        if math.isfinite(t_high)
        else None
    )
    if within.decision == "within":
        decision: Decision = "within"
    elif beyond is not None and beyond.decision == "beyond":
        decision = "beyond"
    else:
        decision = "undecided"
    return RegressionJudgement(decision, base_low, base_high, t_low, t_high, within, beyond)


# -- the exact binomial interval -------------------------------------------------------------


def clopper_pearson_upper(hits: float, n: float, tail: float) -> float:
    """Upper bound of a share whose one-sided error is ``tail`` (real-valued counts allowed).

    The ``1 - tail`` quantile of Beta(hits + 1, n - hits); 1 when every observation is a hit.
    """
    if n <= 0 or hits >= n:
        return 1.0
    return beta_quantile(1 - tail, max(hits, 0.0) + 1, n - max(hits, 0.0))


def clopper_pearson_lower(hits: float, n: float, tail: float) -> float:
    """Lower bound of a share: the ``tail`` quantile of Beta(hits, n - hits + 1); 0 at 0 hits."""
    if n <= 0 or hits <= 0:
        return 0.0
    hits = min(hits, n)
    return beta_quantile(tail, hits, n - hits + 1)


def beta_quantile(p: float, a: float, b: float) -> float:
    """x with I_x(a, b) = p, by bisection on the regularized incomplete beta function."""
    low, high = 0.0, 1.0
    for _ in range(_BISECT_STEPS):
        mid = (low + high) / 2
        if incomplete_beta(mid, a, b) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-15:
            break
    return (low + high) / 2


def incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0.

    Its continued fraction (Abramowitz and Stegun 26.5.8), evaluated by the modified Lentz
    method, converges fast for x below the mean (a + 1) / (a + b + 2); above it the symmetry
    I_x(a, b) = 1 - I_{1-x}(b, a) is used instead.
    """
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _fraction(x, a, b) / a
    return 1 - math.exp(log_front) * _fraction(1 - x, b, a) / b


def _fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of I_x(a, b) without its front factor (modified Lentz)."""
    c = 1.0
    d = 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, _CF_STEPS + 1):
        # even term: m (b - m) x / ((a + 2m - 1)(a + 2m))
        num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        d, c = _lentz(num, d, c)
        result *= d * c
        # odd term: -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))
        num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d, c = _lentz(num, d, c)
        step = d * c
        result *= step
        if abs(step - 1) < 1e-15:
            break
    return result


_TINY = 1e-300


def _lentz(num: float, d: float, c: float) -> tuple[float, float]:
    """One step of the modified Lentz recurrence: the new (D, C) for numerator ``num``."""
    d = 1 + num * d
    d = 1 / (d if abs(d) > _TINY else _TINY)
    c = 1 + num / c
    return d, (c if abs(c) > _TINY else _TINY)
