"""One outlier trial may not decide a figure alone.

On a fresh vLLM the first use of a batch shape can JIT-compile a Triton kernel inside a
measured trial; that trial then reads half of the others (H200, 2026-12-01: 2 streams 482 /
489 / 521 tok/s against 224 / 465 / 538 on the twin; vLLM logged ``fused_moe_kernel`` JIT at
that moment). With three trials, one such value makes a t interval span -56% to +288%, so a
single bad trial turns an identical revision Inconclusive (or, the other way round, could
make a real regression look undecided).

Rule, on the values the interval is built from (per-trial log ratios when paired, each
side's log figures when not): with at least three trials, the one farthest from the median
is left out when it lies further from the median of the *others* than both
``OUTLIER_LOG_DISTANCE`` and ``OUTLIER_SPREADS`` robust standard deviations of the others
(1.4826 x their median absolute deviation). At most one trial per figure is left out (two
from eight trials on: ``most_left_out``), and the reason says which. Why a rule that leaves
one out rather than a trimmed or rank-based interval: those discard information from every
figure (a 20% trimmed mean trims nothing below five trials and then costs two degrees of
freedom), and rank intervals reach 95% only
from six paired trials; the dips to be removed are large (45-58% on H200) against trial
noise of 1-5%, so a fixed distance separates them cleanly, and under ordinary noise the rule
almost never fires (``benchmarks/gate_noise.py`` counts it).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

OUTLIER_LOG_DISTANCE = 0.15
"""A trial at least this far (log scale: about 16%) from the others' median may be left out.

Trial noise of one figure on one settled H200 server was 1-5% (sd of paired log ratios:
median 0.008 medium latency, 0.017 at one stream, 0.024 at eight; short prompts 0.055); the
JIT dips were 0.6-0.9 in log terms. 0.15 is three times the noisiest figure's typical sd."""

OUTLIER_SPREADS = 5.0
"""... and at least this many robust standard deviations of the other trials."""

MAD_TO_SD = 1.4826
"""The median absolute deviation of normal data times this is its standard deviation."""


def outliers(values: Sequence[float], *, fewest: int = 3) -> list[int]:
    """Indices of the trials to leave out of ``values`` (log scale), most distant first.

    One with ``fewest`` (default 3) to 7 trials, up to two from 8 (``most_left_out``): a
    second JIT stall in a long sequence is as likely as the first in a short one, and two of
    eight still leave six. ``fewest`` 4 for figures whose trial noise is itself large (a tail
    percentile of a few hundred requests, ``gate.slo``): with three trials the two others
    agreeing closely is then a coincidence, not a sign that the third stalled.
    """
    kept = list(range(len(values)))
    out: list[int] = []
    while len(out) < most_left_out(len(values), fewest):
        index = outlier([values[i] for i in kept])
        if index is None:
            break
        out.append(kept.pop(index))
    return out


def most_left_out(trials: int, fewest: int = 3) -> int:
    """How many outlier trials a figure of ``trials`` trials may leave out."""
    return 0 if trials < max(fewest, 3) else 1 if trials < 8 else 2


def outlier(values: Sequence[float]) -> int | None:
    """Index of the one trial to leave out of ``values`` (log scale), or None."""
    n = len(values)
    if n < 3:
        return None
    centre = statistics.median(values)
    index = max(range(n), key=lambda i: (abs(values[i] - centre), -i))
    others = [v for i, v in enumerate(values) if i != index]
    middle = statistics.median(others)
    spread = MAD_TO_SD * statistics.median(abs(v - middle) for v in others)
    distance = abs(values[index] - middle)
    if distance > OUTLIER_LOG_DISTANCE and distance > OUTLIER_SPREADS * spread:
        return index
    return None
