"""The table of docs/rollout.md "Deciding at vLLM's bucket bounds", recomputed.

For each of vLLM's real bucket lists (``rollout.canary.latency.VLLM_BUCKETS``) and each range
between two neighbouring bounds, a stable whose latencies are lognormal (sigma 0.5) with its
p95 at five points across the range (log-spaced at 5, 25, 50, 75 and 95% of it), REQUESTS
requests on each side, one pod each (ITL: GAPS gaps per request, judged with that design
effect), the default rule (p95, +100% and +25 ms, confidence 95%): the verdict of an
identical candidate, and the smallest slow-down (every latency times k) the rule calls beyond.
Expected counts (no random draws), so the table is the same on every machine.

Run ``python tests/unit/rollout/canary_latency_table.py`` to print the table for the doc.
"""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

from vllm_operator.rollout.canary.latency import VLLM_BUCKETS, PodHistogram, judge_latency

REQUESTS = 1000
GAPS = 50.0
SIGMA = 0.5
POSITIONS = (0.05, 0.25, 0.5, 0.75, 0.95)
_Z95 = NormalDist().inv_cdf(0.95)
_NAMES = {"ttft": "TTFT", "itl": "ITL", "e2e": "E2E"}


def _histogram(bounds: tuple[float, ...], p95: float, slower: float, per: float) -> PodHistogram:
    mu = math.log(p95) - _Z95 * SIGMA
    total = REQUESTS * per
    rows = [(b, total * NormalDist().cdf((math.log(b / slower) - mu) / SIGMA)) for b in bounds]
    return PodHistogram((*rows, (math.inf, total)), per)


def _threshold(value: float) -> float:
    return max(value * 2.0, value + 0.025)


def verdict(metric: str, p95: float, slower: float) -> str:
    """The default rule's decision on a candidate ``slower`` times the stable."""
    per = GAPS if metric == "itl" else 1.0
    bounds = VLLM_BUCKETS[metric]
    judged = judge_latency(
        [_histogram(bounds, p95, slower, per)],
        [_histogram(bounds, p95, 1.0, per)],
        0.05,
        _threshold,
        0.95,
    )
    return judged.decision


def smallest_detected(metric: str, p95: float) -> float:
    """The smallest slow-down called beyond (bisection on a log scale; inf if none to 1000x)."""
    low, high = 1.0, 1000.0
    if verdict(metric, p95, high) != "beyond":
        return math.inf
    for _ in range(40):
        mid = math.sqrt(low * high)
        if verdict(metric, p95, mid) == "beyond":
            high = mid
        else:
            low = mid
    return high


def _seconds(value: float) -> str:
    return f"{value * 1000:g} ms" if value < 1 else f"{value:g} s"


def rows() -> list[str]:
    """The table's markdown rows."""
    out = []
    for metric, bounds in VLLM_BUCKETS.items():
        edges = (0.0, *bounds)
        for low, high in itertools.pairwise(edges):
            start = low if low > 0 else high / 5
            points = [math.exp(math.log(start) + f * math.log(high / start)) for f in POSITIONS]
            identical = sorted({verdict(metric, p, 1.0) for p in points})
            worst = max(smallest_detected(metric, p) for p in points)
            shown = f"x{math.ceil(worst * 100) / 100:.2f}" if math.isfinite(worst) else "none"
            out.append(
                f"| {_NAMES[metric]} | ({_seconds(low) if low else '0'}, {_seconds(high)}] "
                f"| {', '.join(identical)} | {shown} |"
            )
    return out


if __name__ == "__main__":
    print("\n".join(rows()))
