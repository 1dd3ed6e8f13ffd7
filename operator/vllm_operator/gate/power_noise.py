"""The noise model the gate's stated power rests on (``gate.power``): its shape and its data. Pure.

Fitted by ``benchmarks/power_fit.py`` from the recorded A/A GPU reports (two identical vLLM
0.22 servers serving Qwen3-30B-A3B at 8 and 24 requests/s, 20 s levels: H100 2026-12-07
aa1, aa2 and the per-floor aa1; H200 2026-12-02 and 2026-12-01), results in
``benchmarks/results/power_fit.json``: per metric and rate the twin's median p99, the
median log scale of the tail below it, the median design effect inside a trial and the
largest design effect across trials of any report (the careful side). Another model, GPU or
workload has another tail; ``vllm-operator calibrate`` fits one from the user's own reports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

NORMAL_SCORE: dict[str, float] = {
    "p50": 0.0,
    "p90": 1.2815515655446004,
    "p95": 1.6448536269514722,
    "p99": 2.3263478740408408,
}


@dataclass(frozen=True)
class TailNoise:
    """The noise of one figure (a metric's p99 at one rate) as the judge sees it."""

    p99_ms: float
    """The twin's typical p99 (ms): where the bar sits."""
    tail_sigma: float
    """Log scale of the tail per normal score near the p99 (ln p99 - ln p95 over 0.68)."""
    across: float
    """Design effect across trials of the share at the percentile (``gate.clustering``)."""
    within: float = 1.0
    """Design effect inside a trial (ITL gaps clustered by request; 1 for per-request)."""

    def quantile_ms(self, percentile: str) -> float:
        """The typical value of ``percentile`` on the log-normal tail through the p99."""
        z = NORMAL_SCORE[percentile] - NORMAL_SCORE["p99"]
        return self.p99_ms * math.exp(self.tail_sigma * z)


@dataclass(frozen=True)
class NoiseModel:
    """Per (metric, requests/s): the fitted ``TailNoise``; a rate between fitted ones takes
    the nearest on a log scale, so one level's statement rests on one fit."""

    figures: Mapping[tuple[str, float], TailNoise]
    source: str = field(default="")

    def at(self, metric: str, rate: float) -> TailNoise | None:
        """The noise of ``metric`` nearest to ``rate``; None when the metric was not fitted."""
        rates = [r for m, r in self.figures if m == metric]
        if not rates or rate <= 0:
            return None
        best = min(rates, key=lambda r: (abs(math.log(r / rate)), r))
        return self.figures[(metric, best)]


DEFAULT_NOISE = NoiseModel(
    {
        ("ttft", 8.0): TailNoise(103.0, 0.316, 3.6, 1.0),
        ("ttft", 24.0): TailNoise(161.1, 0.219, 7.1, 1.0),
        ("itl", 8.0): TailNoise(35.9, 1.746, 83.9, 1.3),
        ("itl", 24.0): TailNoise(54.9, 0.28, 365.7, 1.7),
        ("tpot", 8.0): TailNoise(9.7, 0.042, 3.6, 1.0),
        ("tpot", 24.0): TailNoise(19.1, 0.052, 7.1, 1.0),
        ("e2e", 8.0): TailNoise(1270.3, 0.042, 5.1, 1.0),
        ("e2e", 24.0): TailNoise(2514.9, 0.048, 7.6, 1.0),
    },
    source="vLLM 0.22 A/A runs on H100 and H200 (benchmarks/power_fit.py)",
)
"""The GPU runs' noise, per (metric, requests/s)."""
