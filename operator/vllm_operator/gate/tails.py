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
  Estimated from the counts being judged, both effects change with the bar, and a looser
  limit could make a verdict worse (issue 40); the benchmark's counts therefore carry both
  estimated once per run (``gate.clustering``), and ``judge_share_fixed`` judges with them,
  so the verdict moves one way with the limits. ``judge_share`` keeps the estimate from the
  counts for summaries written before, and for the canary's histograms.
- **Bounds between bucket bounds**: a Prometheus histogram knows only how many observations
  fell at or below each bucket bound. Above a limit that lies between two bounds, the count
  above the lower bound is never fewer than the truth, and the count above the upper bound
  never more. "Within" is decided on the first (the upper confidence bound of a share that
  may be too high), "beyond" on the second: a limit between bounds can only make the judge
  undecided, never wrong in either direction. Samples have exact counts; both are the same.

Against a baseline: paired benchmark trials are compared pair by pair
(``gate.pair_tails``, a share of each pair's slowest observations judged by ``judge_share``
against one half); histograms, which have no pairs, through an order-statistic interval of the
baseline's pooled percentile (``gate.tail_baseline``, the live canary's). Both end in
``judge_share``: one judge of tails. The exact interval is ``gate.binomial``'s, the tallies of
samples and histograms ``gate.tallies``'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from vllm_operator.gate.binomial import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    incomplete_beta,
)
from vllm_operator.gate.comparison import EXACT

Decision = Literal["beyond", "within", "undecided"]

ALLOWED: dict[str, float] = {"p50": 0.5, "p90": 0.1, "p95": 0.05, "p99": 0.01}
"""The share of observations a percentile limit allows above it."""


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
    left_out: tuple[int, ...] = ()
    """Clusters (0-based) left out as strays (``stray_cluster``)."""


OUTLIER_P = 0.001
"""A cluster whose count is this improbable given the others' is a stray (a stalled trial)."""


def judge_share(
    clusters: Sequence[Exceedance], allowed: float, confidence: float, fewest: int = 0
) -> ShareJudgement:
    """Is the true share above the bound beyond ``allowed``, within it, or undecided?

    ``confidence`` is two-sided (a look's confidence, ``gate.sequential``): each bound errs on
    its side with at most half of ``1 - confidence``. No observations: undecided. From
    ``fewest`` clusters on (0: never), one stray cluster is left out (``stray_cluster``).
    """
    stray = stray_cluster(clusters, fewest)
    if stray is not None:
        kept = [c for i, c in enumerate(clusters) if i != stray]
        judged = judge_share(kept, allowed, confidence)
        return replace(judged, clusters=len(clusters), left_out=(stray,))
    _check(allowed, confidence)
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
    decision = _decide(hits_most, eff_most, hits_least, eff_least, allowed, tail)
    return ShareJudgement(decision, share, low, high, allowed, total, eff_most, len(clusters))


def judge_share_fixed(
    clusters: Sequence[Exceedance],
    allowed: float,
    confidence: float,
    across: float,
    stray: int | None,
) -> ShareJudgement:
    """``judge_share`` with the clustering fixed beforehand (``gate.clustering``): each
    cluster's counts divided by its own ``design_effect``, the ``stray`` cluster (0-based)
    left out, and nothing estimated from the spread of the counts themselves.

    ``across`` is the design effect across clusters at the allowed share. "Beyond" is asked
    with it as it is; "within" with its value at the observed pooled share (``across_at``:
    smaller for a share further in the tail, 1 at no exceedance). Either way the decision
    moves one way with the counts: fewer above (a looser bar) lowers the share, the hits and
    the design effect of "within", so its upper bound falls, and lowers the hits of "beyond"
    at a fixed design effect, so its lower bound falls: "within" can only be gained and
    "beyond" only lost.
    """
    _check(allowed, confidence)
    if across < 1:
        raise ValueError(f"design effect across clusters {across} must be at least 1")
    kept = [c for i, c in enumerate(clusters) if i != stray]
    left_out = (stray,) if stray is not None and 0 <= stray < len(clusters) else ()
    total = sum(c.total for c in kept)
    if total <= 0:
        return ShareJudgement(
            "undecided", 0.0, 0.0, 1.0, allowed, 0.0, 0.0, len(clusters), left_out
        )
    tail = (1 - confidence) / 2
    n = sum(c.total / max(c.design_effect, 1.0) for c in kept)
    hits_most = sum(c.above / max(c.design_effect, 1.0) for c in kept)
    hits_least = sum(c.least / max(c.design_effect, 1.0) for c in kept)
    share = hits_most / n
    near = across_at(share, across, allowed)
    high = clopper_pearson_upper(hits_most / near, n / near, tail)
    low = clopper_pearson_lower(hits_least / across, n / across, tail)
    decision = _decide(hits_most / near, n / near, hits_least / across, n / across, allowed, tail)
    return ShareJudgement(
        decision, share, low, high, allowed, total, n / near, len(clusters), left_out
    )


def across_at(share: float, across: float, allowed: float) -> float:
    """The design effect across clusters at a pooled ``share``, from ``across``, the one at
    the allowed share: ``1 + (across - 1) * sqrt(share / allowed)`` up to the allowed share,
    ``across`` beyond it, 1 at no exceedance.

    Why it shrinks with the share: the excess spread of the trials' shares over binomial noise
    grows with the share (for shares that vary by a fixed factor from trial to trial, in
    proportion to it), and a share of 0 in every trial is trials that agree, design effect 1,
    as the estimate from the counts always gave it. The square root is the slower of the
    two, so the more careful: an assumption, not a fit (over the grid of
    ``gate.clustering`` the H100 ITL effects stayed about flat, 34-154, down to a tenth of
    the allowed share). Without it a limit far above the tail could never be shown within:
    the H200 aa1 run of 2026-12-02 had 3 of 182,816 gaps over 100 ms at 24 requests/s and a
    design effect across its trials of 266 at the allowed share; unscaled, those gaps are
    worth 687, and 1% cannot be excluded. It only ever serves "within", where the share is
    below the allowed one: a smaller effect there than at the allowed share.
    """
    if share <= 0:
        return 1.0
    return 1 + (across - 1) * math.sqrt(min(share, allowed) / allowed)


def stray_cluster(clusters: Sequence[Exceedance], fewest: int) -> int | None:
    """The one cluster whose count the others make improbable, from ``fewest`` clusters on.

    A trial in which a server stalled (a compile, a preemption storm) can put every slow
    request of a level into one trial; counted with the rest it keeps an identical revision
    undecided through every extra trial, as the study's figures did before one outlier trial
    was left out there (``gate.robust``). Here a cluster is a stray when, under the share of
    the others (its 95% Clopper-Pearson bound on the side that favours the cluster), a count
    as far out as its own has a binomial probability below ``OUTLIER_P``; at most one, the
    most improbable, and only from ``fewest`` (>= 2) clusters on. A regression that shows in
    every trial has no stray; one that shows in one trial of four or more is left out, and
    the reason says which trial.
    """
    if fewest < 2 or len(clusters) < fewest:
        return None
    worst, worst_p = None, OUTLIER_P
    for k, cluster in enumerate(clusters):
        rest = [(c.above, c.total, c.design_effect) for j, c in enumerate(clusters) if j != k]
        if sum(n for _, n, _ in rest) <= 0 or cluster.total <= 0:
            continue
        _, n_rest, hits_rest = _effective(rest)
        effect = max(cluster.design_effect, 1.0)
        n, hits = cluster.total / effect, cluster.above / effect
        high = clopper_pearson_upper(hits_rest, n_rest, 0.025)
        low = clopper_pearson_lower(hits_rest, n_rest, 0.025)
        many = incomplete_beta(high, hits, n - hits + 1) if hits > 0 and high < 1 else 1.0
        few = 1 - incomplete_beta(low, hits + 1, n - hits) if hits < n and low > 0 else 1.0
        if min(many, few) < worst_p:
            worst, worst_p = k, min(many, few)
    return worst


def share_decision(clusters: Sequence[Exceedance], allowed: float, confidence: float) -> Decision:
    """``judge_share``'s decision alone, without computing its bounds (``quantile_bounds``
    asks it at every step of a bisection): the same test, so the same answer."""
    _check(allowed, confidence)
    if sum(c.total for c in clusters) <= 0:
        return "undecided"
    _, eff_most, hits_most = _effective([(c.above, c.total, c.design_effect) for c in clusters])
    _, eff_least, hits_least = _effective([(c.least, c.total, c.design_effect) for c in clusters])
    return _decide(hits_most, eff_most, hits_least, eff_least, allowed, (1 - confidence) / 2)


def _check(allowed: float, confidence: float) -> None:
    if not 0 < allowed < 1:
        raise ValueError(f"allowed share {allowed} must lie strictly between 0 and 1")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} must lie strictly between 0 and 1")


def _decide(  # noqa: PLR0917 - private, two call sites
    hits_most: float,
    n_most: float,
    hits_least: float,
    n_least: float,
    allowed: float,
    tail: float,
) -> Decision:
    """Within when the upper Clopper-Pearson bound is at most ``allowed``, beyond when the
    lower one is above it, each asked of the beta distribution's CDF at ``allowed`` (the
    bound is at most x exactly when the CDF at x reaches its quantile's level), so no
    quantile is searched for."""
    edge = allowed + EXACT
    if n_most > 0 and hits_most < n_most:
        hits = max(hits_most, 0.0)
        if incomplete_beta(edge, hits + 1, n_most - hits) >= 1 - tail:
            return "within"
    if n_least > 0 and hits_least > 0:
        hits = min(hits_least, n_least)
        if incomplete_beta(edge, hits, n_least - hits + 1) < tail:
            return "beyond"
    return "undecided"


def effective_counts(clusters: Sequence[Exceedance]) -> tuple[float, float, float]:
    """(pooled share, effective observations, effective hits) of clusters, from the counts
    that are never too few (``above``): what an interval of their share rests on, the same
    design effects ``judge_share`` applies (the live canary's two-share comparison uses it)."""
    if sum(c.total for c in clusters) <= 0:
        return 0.0, 0.0, 0.0
    return _effective([(c.above, c.total, c.design_effect) for c in clusters])


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

    With no exceedance and a 1% limit at 95% (2.5% on the upper side) this is 368: fewer
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
