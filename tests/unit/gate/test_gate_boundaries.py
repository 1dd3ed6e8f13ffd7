"""The edges that hand-made mutants of ``gate/`` used to survive (issue 19).

``MIN_LATENCY_SAMPLES`` is written out as 3 here on purpose: a test that imports the
constant moves with it and cannot notice it moved. Welch's degrees of freedom are checked
against a hand computation that rounds down (a wider interval, never a narrower one).
"""

from __future__ import annotations

import math
import statistics

import pytest
from gate_figures import lat, limits, stored

from vllm_operator.api.summary import BenchSummary
from vllm_operator.gate import MIN_LATENCY_SAMPLES, verdict
from vllm_operator.gate.interval import relative_interval, t_quantile


def one_class(requests: int, trials: list[float]) -> BenchSummary:
    return BenchSummary(model="m", latency=[lat(trials, "medium", requests=requests)])


def test_three_measured_requests_make_a_median_two_do_not() -> None:
    assert MIN_LATENCY_SAMPLES == 3
    base = one_class(15, [300.0, 301.0, 299.0])
    two = verdict(one_class(2, [300.0]), limits(10), base)
    assert two.outcome == "Inconclusive"
    assert two.reasons == [
        "medium prompts: 2 request(s) measured, fewer than 3: too few to compare"
    ]
    three = verdict(one_class(3, [300.0]), limits(10), base)
    assert three.outcome == "Passed", three.reasons
    thin_base = verdict(one_class(3, [300.0]), limits(10), one_class(2, [300.0]))
    assert thin_base.outcome == "Inconclusive"
    assert thin_base.reasons == [
        "baseline medium prompts: 2 request(s) measured, fewer than 3: too few to compare"
    ]
    assert verdict(one_class(3, [300.0]), limits(10), one_class(3, [300.0])).outcome == "Passed"


def test_an_absolute_latency_limit_needs_three_requests_too() -> None:
    th = limits(10, latencyMs={"medium": 250})
    slow3 = verdict(one_class(3, [300.0]), th, None)
    assert slow3.outcome == "Failed"
    slow2 = verdict(one_class(2, [300.0]), th, None)
    assert slow2.outcome == "Inconclusive"
    assert "fewer than 3" in slow2.reasons[0]


CAND = [100.0, 110.0, 121.0, 105.0]
BASE = [100.0, 101.0, 102.0]


def welch_by_hand(cand: list[float], base: list[float], confidence: float) -> tuple[float, float]:
    c, b = [math.log(x) for x in cand], [math.log(x) for x in base]
    vc, vb = statistics.variance(c) / len(c), statistics.variance(b) / len(b)
    df = (vc + vb) ** 2 / (vc**2 / (len(c) - 1) + vb**2 / (len(b) - 1))
    assert df != math.floor(df)  # the rounding matters
    half = t_quantile((1 + confidence) / 2, math.floor(df)) * math.sqrt(vc + vb)
    mean = statistics.fmean(c) - statistics.fmean(b)
    return math.exp(mean - half) - 1, math.exp(mean + half) - 1


def test_welch_degrees_of_freedom_are_rounded_down() -> None:
    iv = relative_interval(CAND, BASE, confidence=0.95, paired=False)
    assert iv is not None
    low, high = welch_by_hand(CAND, BASE, 0.95)
    assert iv.low == pytest.approx(low, rel=1e-9)
    assert iv.high == pytest.approx(high, rel=1e-9)


def test_rounding_welch_down_keeps_an_unpaired_verdict_open() -> None:
    # the interval reaches about +22.7% with the df (3.12) rounded down and +20.6% rounded up
    _, high = welch_by_hand(CAND, BASE, 0.95)
    limit = 100 * high - 0.5
    result = verdict(stored({"medium": CAND}), limits(limit), stored({"medium": BASE}))
    assert result.outcome == "Inconclusive", result.reasons
    assert "unpaired, 4/3 trials" in result.reasons[0]


def test_a_single_figure_borrows_the_other_sides_spread_and_degrees_of_freedom() -> None:
    iv = relative_interval(CAND, [100.0], confidence=0.95, paired=False)
    assert iv is not None
    logs = [math.log(x) for x in CAND]
    se = math.sqrt(statistics.variance(logs) * (1 / 4 + 1))
    half = t_quantile(0.975, 3) * se
    mean = statistics.fmean(logs) - math.log(100.0)
    assert iv.low == pytest.approx(math.exp(mean - half) - 1, rel=1e-9)
    assert iv.high == pytest.approx(math.exp(mean + half) - 1, rel=1e-9)
    flipped = relative_interval([100.0], CAND, confidence=0.95, paired=False)
    assert flipped is not None
    assert flipped.high == pytest.approx(math.exp(-mean + half) - 1, rel=1e-9)


def test_no_spread_on_either_side_is_a_point_with_trials() -> None:
    iv = relative_interval([110.0, 110.0], [100.0, 100.0, 100.0], confidence=0.95, paired=False)
    assert iv is not None
    assert iv.estimated
    assert iv.low == iv.high == iv.change == pytest.approx(0.1, abs=1e-12)
