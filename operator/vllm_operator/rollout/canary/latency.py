"""A latency percentile of the candidate against the stable's, decided at bucket bounds. Pure.

vLLM's histograms know how many observations fell at or below each bucket bound, nothing
finer, and its bounds step by up to 4x (TTFT 0.1 -> 0.25 s, 0.25 -> 0.5 s, 640 -> 2560 s).
Asking "is the candidate's p95 within +100% of the stable's" directly needs the stable's p95
to a precision the buckets do not have: the stable's p95 is only known to lie in one bucket,
and twice a value anywhere in (0.1, 0.25] s cannot be placed between bounds. The old rule
therefore left an identical candidate undecided whenever the stable's percentile lay in a
bucket wider than the limit, and the step ended Inconclusive.

So the question is asked where the histograms can answer it, at two bounds:
- ``stable bound`` B: of the two bounds around the stable's percentile, the one whose share
  of the stable's observations above it is nearer the percentile's allowed share (5% for a
  p95, in ratio), and that has a bound above it;
- ``candidate bound`` C: the limit applied to B, ``max(B x (1 + percent), B + floor)``,
  rounded to the nearest bucket bound above B (in ratio); the reason says when it is rounded
  and to which bound, so a limit between bounds is never silently something else.

The candidate is **within** when its share of observations above C is confidently no more
than the stable's share above B, and **beyond** when confidently more: two proportions, each
pooled over pods with the tail judge's design effects (``gate.tails.effective_counts``: a pod
is a cluster, and inter-token gaps are clustered by request, the cluster size taken from
vLLM's own counters: gaps per request = ITL count / E2E count, the conservative design effect
of gaps that share their request's fate), and Newcombe's interval of their difference (the
hybrid of two Wilson score intervals, which keeps its coverage at shares near 0). An
identical candidate has, at C, the stable's share above C, which is less than its share above
B by the stable's observations between the two bounds: a margin that grows with the
requests, so the rule decides "within" at every bucket of vLLM's lists (the table in
docs/rollout.md, recomputed by tests/unit/rollout/test_canary_latency.py).

``VLLM_BUCKETS`` are the bounds of vLLM's ``PrometheusStatLogger`` read from its source
(``vllm/v1/metrics/loggers.py``; from 0.33.0 ``vllm/v1/metrics/buckets.py``): the same lists
in 0.10.2, 0.11.0, 0.12.0, 0.16.0, 0.17.0, 0.22.0 and 0.33.0. 0.33.0 lets
``--custom-histogram-buckets`` replace them; the rule reads the bounds of the scrape it is
given, so it needs no list at run time. The lists are for the table and its test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from vllm_operator.gate.tails import Decision, Exceedance, effective_counts
from vllm_operator.gate.tallies import histogram_exceedance

Buckets = tuple[tuple[float, float], ...]

VLLM_BUCKETS: dict[str, tuple[float, ...]] = {
    # vllm:time_to_first_token_seconds (TIME_TO_FIRST_TOKEN_BUCKETS in 0.33.0)
    "ttft": (
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
        7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
    ),
    # vllm:inter_token_latency_seconds (INTER_TOKEN_LATENCY_BUCKETS in 0.33.0)
    "itl": (
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
        7.5, 10.0, 20.0, 40.0, 80.0,
    ),
    # vllm:e2e_request_latency_seconds (REQUEST_LATENCY_BUCKETS in 0.33.0)
    "e2e": (
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
        120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
    ),
}  # fmt: skip
"""vLLM's bucket bounds (seconds), identical in 0.10.2 through 0.33.0 (see the docstring)."""


@dataclass(frozen=True)
class PodHistogram:
    """One pod's histogram over the step (cumulative, +Inf last) and its design effect."""

    buckets: Buckets
    design_effect: float = 1.0


@dataclass(frozen=True)
class BoundPair:
    """Where the comparison is made: the stable's share above ``stable`` against the
    candidate's above ``candidate`` (the limit applied to ``stable``, maybe rounded)."""

    stable: float
    candidate: float
    asked: float
    """The limit applied to ``stable``, before rounding to a bucket bound."""

    @property
    def rounded(self) -> bool:
        return not math.isclose(self.candidate, self.asked, rel_tol=1e-9)


@dataclass(frozen=True)
class LatencyJudgement:
    """The decision, where it was made, both shares and the interval of their difference."""

    decision: Decision
    pair: BoundPair | None
    """None: no pair of bounds exists (the reason says why); undecided."""
    candidate_share: float = 0.0
    stable_share: float = 0.0
    low: float = -1.0
    high: float = 1.0
    reason: str = ""
    first_bucket: bool = False
    """The stable's percentile lies at or below the first bound: the candidate's share is
    held to the allowed share (``stable_share`` is that share)."""


def stable_bound(
    stable: Sequence[PodHistogram], allowed: float
) -> tuple[float, list[float], bool] | str:
    """The stable bound B (see the module docstring), every finite bound, and whether the
    stable's percentile lies in the first bucket (then no bound lies below it, and the
    candidate's share above C is held to the allowed share itself); or why there is none."""
    bounds = sorted({le for pod in stable for le, _ in pod.buckets if math.isfinite(le)})
    total = sum(pod.buckets[-1][1] for pod in stable if pod.buckets)
    if total <= 0 or not bounds:
        return "no observations of the stable"
    share = {b: _pooled_share(stable, b) for b in bounds}
    above = [b for b in bounds if share[b] <= allowed]
    below = [b for b in bounds if share[b] > allowed]
    around = [b for b in (below[-1:] + above[:1]) if b < bounds[-1]]
    if not around:
        return (
            f"the stable's percentile lies above the largest bucket bound "
            f"({_ms(bounds[-1])}): no bound above it to compare at"
        )

    def distance(b: float) -> float:
        return abs(math.log(max(share[b], 1e-12) / allowed))

    return min(around, key=distance), bounds, not below


def candidate_bound(
    b: float, bounds: Sequence[float], threshold: Callable[[float], float]
) -> BoundPair:
    """The limit applied to ``b``, rounded (in ratio) to the nearest bucket bound above ``b``."""
    asked = threshold(b)
    higher = [x for x in bounds if x > b]
    exact = [x for x in higher if math.isclose(x, asked, rel_tol=1e-9)]
    if exact:
        return BoundPair(b, exact[0], asked)
    nearest = min(higher, key=lambda x: (abs(math.log(x / asked)), -x))
    return BoundPair(b, nearest, asked)


def judge_latency(
    candidate: Sequence[PodHistogram],
    stable: Sequence[PodHistogram],
    allowed: float,
    threshold: Callable[[float], float],
    confidence: float,
) -> LatencyJudgement:
    """Is the candidate's share above C beyond or within the stable's above B?"""
    if not candidate or sum(p.buckets[-1][1] for p in candidate if p.buckets) <= 0:
        return LatencyJudgement("undecided", None, reason="no observations of the candidate")
    found = stable_bound(stable, allowed)
    if isinstance(found, str):
        return LatencyJudgement("undecided", None, reason=found)
    b, bounds, first = found
    pair = candidate_bound(b, bounds, threshold)
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p_c, n_c, x_c = _effective(candidate, pair.candidate)
    if first:
        # Nothing below the stable's percentile to compare with: the candidate's share
        # above the limit of the first bound is held to the percentile's allowed share.
        p_s, (low_c, high_c) = allowed, wilson(x_c, n_c, z)
        low, high = low_c - allowed, high_c - allowed
    else:
        p_s, n_s, x_s = _effective(stable, pair.stable)
        low, high = difference_interval(x_c, n_c, x_s, n_s, z)
    decision: Decision = "within" if high <= 0 else "beyond" if low > 0 else "undecided"
    return LatencyJudgement(decision, pair, p_c, p_s, low, high, first_bucket=first)


def _pooled_share(pods: Sequence[PodHistogram], bound: float) -> float:
    above = total = 0.0
    for pod in pods:
        seen = histogram_exceedance(pod.buckets, bound)
        above, total = above + seen.above, total + seen.total
    return above / total if total > 0 else 0.0


def _effective(pods: Sequence[PodHistogram], bound: float) -> tuple[float, float, float]:
    clusters: list[Exceedance] = []
    for pod in pods:
        seen = histogram_exceedance(pod.buckets, bound)
        if seen.total > 0:
            clusters.append(Exceedance(seen.above, seen.total, None, max(pod.design_effect, 1.0)))
    return effective_counts(clusters)


def wilson(hits: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's score interval of a share (counts may be fractional: effective counts)."""
    if n <= 0:
        return 0.0, 1.0
    p = min(max(hits / n, 0.0), 1.0)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(centre - half, 0.0), min(centre + half, 1.0)


def difference_interval(
    hits_a: float, n_a: float, hits_b: float, n_b: float, z: float
) -> tuple[float, float]:
    """Newcombe's hybrid score interval of ``share_a - share_b`` (his method 10)."""
    if n_a <= 0 or n_b <= 0:
        return -1.0, 1.0
    p_a, p_b = hits_a / n_a, hits_b / n_b
    low_a, high_a = wilson(hits_a, n_a, z)
    low_b, high_b = wilson(hits_b, n_b, z)
    d = p_a - p_b
    return (
        d - math.sqrt((p_a - low_a) ** 2 + (high_b - p_b) ** 2),
        d + math.sqrt((high_a - p_a) ** 2 + (p_b - low_b) ** 2),
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:g} ms"


def describe(pair: BoundPair) -> str:
    """Where the comparison was made, for the reason (says when the limit was rounded)."""
    limit = f"the limit at {_ms(pair.stable)} is {_ms(pair.asked)}"
    if pair.rounded:
        limit += f", rounded to the bucket bound {_ms(pair.candidate)}"
    return limit


def gap_design_effect(itl: Buckets, e2e: Buckets) -> float:
    """Inter-token gaps per request over the step (ITL count / E2E count, vLLM's own
    counters), never below 1: the design effect of gaps that share their request's fate."""
    gaps = itl[-1][1] if itl else 0.0
    requests = e2e[-1][1] if e2e else 0.0
    if requests <= 0 or gaps <= 0:
        return 1.0
    return max(gaps / requests, 1.0)
