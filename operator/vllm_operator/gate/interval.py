"""Confidence intervals on a relative difference, from a few trials per side. Pure arithmetic.

Why Student's t on log ratios, not a bootstrap: the gate sees 2 to 10 trials per figure. A
percentile bootstrap of so few values cannot reach beyond the values it resamples (with 3
trials its "95%" interval of a median covers the truth about 75% of the time), while the t
interval on logarithms has its stated coverage when timing noise is multiplicative and
roughly log-normal, which is what repeated benchmark trials look like. It also needs no
random numbers: the benchmark and the operator reach the same interval from the same
figures, bit for bit. ``benchmarks/gate_noise.py`` measures the coverage on the calibrated
noise model instead of trusting this paragraph.

Two shapes:
- *paired* (candidate and baseline measured in the same trial, same time window): the
  interval of the mean of per-trial log ratios, ``n - 1`` degrees of freedom; drift shared by
  both servers within a trial cancels;
- *unpaired* (a stored baseline from another run): Welch's interval on the difference of
  mean logs, degrees of freedom by Welch-Satterthwaite (rounded down: wider, never
  narrower). When one side has a single figure, the other side's spread stands for both.

Student's t CDF for integer degrees of freedom has a closed form (Abramowitz and Stegun
26.7.3 and 26.7.4); the quantile is found by bisection on it, a fixed number of steps.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from vllm_operator.gate.robust import outliers

MAX_DF = 1000
"""Degrees of freedom beyond this use this (the t quantile is then the normal's to 4 digits)."""


@dataclass(frozen=True)
class Interval:
    """A relative difference candidate / baseline - 1 with its two-sided interval."""

    change: float
    low: float
    high: float
    confidence: float
    paired: bool
    trials: tuple[int, int]
    left_out: tuple[str, ...] = ()
    """Trials left out as outliers (``gate.robust``), as people read them: "trial 1"."""
    kept: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())
    """The candidate's and the baseline's figures the interval was computed from."""

    @property
    def estimated(self) -> bool:
        """False when there was no spread to estimate (one trial each): a point figure."""
        return self.trials[0] > 1 or self.trials[1] > 1


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with ``df`` (>= 1) degrees of freedom."""
    if df < 1:
        raise ValueError("degrees of freedom must be >= 1")
    theta = math.atan(abs(t) / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2 == 1:
        total = 0.0
        if df > 1:
            term = math.cos(theta)
            total = term
            for j in range(1, (df - 3) // 2 + 1):
                term *= cos2 * (2 * j) / (2 * j + 1)
                total += term
        central = 2 / math.pi * (theta + math.sin(theta) * total)
    else:
        term = total = 1.0
        for j in range(1, (df - 2) // 2 + 1):
            term *= cos2 * (2 * j - 1) / (2 * j)
            total += term
        central = math.sin(theta) * total
    half = central / 2
    return 0.5 + half if t >= 0 else 0.5 - half


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (0.5 < p < 1) of Student's t with ``df`` degrees of freedom."""
    if not 0.5 < p < 1:
        raise ValueError("p must be in (0.5, 1)")
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        if t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
    return high


def relative_interval(
    candidate: Sequence[float],
    baseline: Sequence[float],
    *,
    confidence: float,
    paired: bool,
) -> Interval | None:
    """Interval of candidate / baseline - 1 at ``confidence`` (0..1), or None if undefined.

    Undefined: an empty side, or a figure <= 0 (a log ratio needs positive figures). Paired
    needs the same number of trials on both sides; otherwise the unpaired interval is used.
    With one trial on each side the result is the point ratio with ``low == high``.
    """
    if not candidate or not baseline or min(*candidate, *baseline) <= 0:
        return None
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    cand = [math.log(x) for x in candidate]
    base = [math.log(x) for x in baseline]
    trials = (len(cand), len(base))
    paired = paired and len(cand) == len(base) and len(cand) > 1
    if paired:
        diffs = [c - b for c, b in zip(cand, base, strict=True)]
        mean = statistics.fmean(diffs)
        se = statistics.stdev(diffs) / math.sqrt(len(diffs))
        df = len(diffs) - 1
    else:
        mean = statistics.fmean(cand) - statistics.fmean(base)
        se, df = _welch(cand, base)
    spread = se > 0 and df > 0
    half = t_quantile((1 + confidence) / 2, min(df, MAX_DF)) * se if spread else 0.0
    return Interval(
        change=math.exp(mean) - 1,
        low=math.exp(mean - half) - 1,
        high=math.exp(mean + half) - 1,
        confidence=confidence,
        paired=paired,
        trials=trials,
    )


def robust_interval(
    candidate: Sequence[float],
    baseline: Sequence[float],
    *,
    confidence: float,
    paired: bool,
    fewest: int = 3,
) -> Interval | None:
    """``relative_interval`` after leaving out outlier trials (``gate.robust``; none with
    fewer than ``fewest`` trials).

    Paired: the outlier is a trial whose log ratio stands apart, and the pair goes. Unpaired:
    each side is checked on its own log figures. ``trials`` counts what was measured; the
    interval is computed from what was kept.
    """
    if not candidate or not baseline or min(*candidate, *baseline) <= 0:
        return None
    cand, base = list(candidate), list(baseline)
    left_out: list[str] = []
    if paired and len(cand) == len(base):
        drop = outliers([math.log(c / b) for c, b in zip(cand, base, strict=True)], fewest=fewest)
        left_out += [f"trial {i + 1}" for i in drop]
        cand = [v for i, v in enumerate(cand) if i not in drop]
        base = [v for i, v in enumerate(base) if i not in drop]
    else:
        drop_c = outliers([math.log(v) for v in cand], fewest=fewest)
        drop_b = outliers([math.log(v) for v in base], fewest=fewest)
        left_out += [f"candidate trial {i + 1}" for i in drop_c]
        left_out += [f"baseline trial {i + 1}" for i in drop_b]
        cand = [v for i, v in enumerate(cand) if i not in drop_c]
        base = [v for i, v in enumerate(base) if i not in drop_b]
    interval = relative_interval(cand, base, confidence=confidence, paired=paired)
    if interval is None:
        return None
    return replace(
        interval,
        trials=(len(candidate), len(baseline)),
        left_out=tuple(left_out),
        kept=(tuple(cand), tuple(base)),
    )


def _welch(cand: Sequence[float], base: Sequence[float]) -> tuple[float, int]:
    """Standard error of the difference of means and its (floored) degrees of freedom."""
    nc, nb = len(cand), len(base)
    if nc == 1 and nb == 1:
        return 0.0, 0
    if nc == 1 or nb == 1:
        # One side has no spread of its own: assume the other side's for both.
        many = cand if nc > 1 else base
        var = statistics.variance(many)
        return math.sqrt(var * (1 / nc + 1 / nb)), len(many) - 1
    vc = statistics.variance(cand) / nc
    vb = statistics.variance(base) / nb
    total = vc + vb
    if total == 0:
        return 0.0, nc + nb - 2
    df = total**2 / (vc**2 / (nc - 1) + vb**2 / (nb - 1))
    return math.sqrt(total), max(1, math.floor(df))
