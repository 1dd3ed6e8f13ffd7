"""The exact binomial (Clopper-Pearson) interval, from the regularized incomplete beta. Pure.

Why written here rather than taken from SciPy: the image that runs the benchmark Job has a
250 MB budget (hack/image-test.sh) and SciPy alone is over 35 MB installed; the interval needs
one special function, whose continued fraction is textbook (Abramowitz and Stegun 26.5.8).
Checked against closed forms in tests/unit/gate/test_tails.py.
"""

from __future__ import annotations

import math

_CF_STEPS = 10_000
"""Most continued-fraction terms for the incomplete beta (converges in ~sqrt(n) terms)."""

_BISECT_STEPS = 80
"""Bisection steps of a beta quantile: 2^-80 of the unit interval, far below any share."""


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
