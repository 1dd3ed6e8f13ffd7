"""The edges that hand-made mutants of ``gate/`` used to survive (issue 19).

``MIN_LATENCY_SAMPLES`` is written out as 3 here on purpose: a test that imports the
constant moves with it and cannot notice it moved. Welch's degrees of freedom are checked
against a hand computation that rounds down (a wider interval, never a narrower one).
"""

from __future__ import annotations

import math
import statistics

import pytest
from gate_figures import PLAN_3_10, lat, level, limits, pair, stored

from vllm_operator.api.summary import BenchSummary, Placement, QualityFigures
from vllm_operator.gate import MIN_LATENCY_SAMPLES, open_figures, verdict
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


def test_welch_degrees_of_freedom_below_two_stay_at_one() -> None:
    cand, base = [100.0, 130.0], [100.0, 100.5, 99.5, 100.2]  # df 1.0005: the noisy side's
    iv = relative_interval(cand, base, confidence=0.95, paired=False)
    assert iv is not None
    low, high = welch_by_hand(cand, base, 0.95)
    assert iv.low == pytest.approx(low, rel=1e-9)
    assert iv.high == pytest.approx(high, rel=1e-9)
    assert iv.high > 5  # t(1) = 12.7: with 2 degrees of freedom it would reach only about +90%


def test_a_paired_summary_with_unequal_trial_counts_is_compared_unpaired() -> None:
    result = verdict(
        pair(levels={8: ([700.0, 702.0, 698.0], [700.0, 701.0, 699.0, 700.0])}), limits(10), None
    )
    assert result.outcome == "Passed", result.reasons
    assert "unpaired, 3/4 trials" in result.reasons[0]


def test_a_candidate_figure_of_zero_is_not_compared() -> None:
    result = verdict(
        pair(levels={8: ([700.0, 0.0, 698.0], [700.0, 701.0, 699.0])}), limits(10), None
    )
    assert result.outcome == "Inconclusive"
    assert result.reasons == ["8 streams: a figure of 0, nothing to compare"]


def test_a_baseline_level_at_zero_tokens_per_second_says_no_steady_window() -> None:
    result = verdict(pair(levels={8: ([700.0], [0.0])}), limits(10), None)
    assert result.outcome == "Inconclusive"
    assert result.reasons == ["baseline at 8 streams: no steady window (0 tok/s)"]


def test_a_floor_equal_to_the_percentage_is_not_named() -> None:
    # 10% of 40 ms is exactly the 4 ms floor: the percentage set the limit
    result = verdict(pair({"medium": ([41.0], [40.0])}), limits(10, regressionFloorMs=4), None)
    assert result.reasons[0].endswith("limit +10%: within the limit"), result.reasons


def test_a_stored_baseline_with_fewer_trials_does_not_extend_the_candidates_plan() -> None:
    wobble = [0.1, -0.1, 0.05, -0.05, 0.12, -0.12, 0.02, -0.02, 0.08, -0.08]
    cand = stored(levels={2: [500 * math.exp(-0.09 + w) for w in wobble]})
    base = stored(levels={2: [500.0, 501.0, 499.0]})
    assert open_figures(cand, limits(10), base, PLAN_3_10) == set()  # ten trials: the last look
    result = verdict(cand, limits(10), base, plan=PLAN_3_10)
    assert result.outcome == "Inconclusive"
    assert "10 trials, the most allowed (gate.maxTrials)" in result.reasons[0]


def _open_reason(distance: float) -> str:
    """The reason of a 2-stream figure whose estimate lies ``distance`` (log) inside -10%."""
    cand = [450.0 * math.exp(distance + d) for d in (-0.05, 0.0, 0.05)]
    result = verdict(pair(levels={2: (cand, [500.0] * 3)}), limits(10), None)
    assert result.outcome == "Inconclusive"
    return result.reasons[0]


def test_an_estimate_within_half_a_percent_of_the_limit_sits_on_it() -> None:
    on_it = "the estimate sits on the limit, more trials would not decide it"
    assert _open_reason(0.0049).endswith(on_it)
    assert not _open_reason(0.0051).endswith(on_it)


def test_trials_needed_are_named_up_to_a_hundred() -> None:
    # spread 0.05 at 3 trials, t(2) = 4.30: half-width 0.124 (log); n * (half / d)^2 trials
    assert _open_reason(0.04).endswith("about 29 trials at this spread would decide it")
    assert _open_reason(0.0225).endswith("about 92 trials at this spread would decide it")
    assert _open_reason(0.02).endswith("more than 100 trials at this spread would be needed")


def test_one_request_per_stream_is_enough_and_fewer_is_thin() -> None:
    def with_requests(requests: int) -> BenchSummary:
        figure = level([700.0], streams=4).model_copy(update={"requests": requests})
        return BenchSummary(model="m", concurrency=[figure])

    th = limits(10, throughput=[{"concurrency": 4, "minTokensPerSecond": 600}])
    assert verdict(with_requests(4), th, with_requests(4)).outcome == "Passed"
    thin = verdict(with_requests(3), th, with_requests(4))
    assert thin.outcome == "Inconclusive"
    assert thin.reasons[0].startswith("4 streams: 3 request(s) completed, fewer than one per")
    thin_base = verdict(with_requests(4), limits(10), with_requests(3))
    assert thin_base.reasons[0].startswith("baseline 4 streams: 3 request(s) completed")


def test_paired_runs_on_two_nodes_get_no_stored_baseline_node_note() -> None:
    a, b = Placement(node="gpu-a"), Placement(node="gpu-b")
    same = pair(levels={8: ([700.0] * 3, [700.0] * 3)}, placement=a)
    assert same.paired_baseline is not None
    same = same.model_copy(
        update={"paired_baseline": same.paired_baseline.model_copy(update={"placement": b})}
    )
    assert not any("node" in r for r in verdict(same, limits(10), None).reasons)
    cand = stored(levels={8: [700.0] * 3}, placement=a)
    base = stored(levels={8: [700.0] * 3}, placement=b)
    notes = verdict(cand, limits(10), base).reasons
    assert any(
        r.startswith("stored baseline measured on node gpu-b, candidate on gpu-a") for r in notes
    )


def test_a_quality_drop_exactly_at_the_limit_passes() -> None:
    def suite(passed: int) -> BenchSummary:
        return BenchSummary(model="m", quality=QualityFigures(suite="s", passed=passed, total=4))

    assert verdict(suite(3), limits(25), suite(4)).outcome == "Passed"  # a 25.0% drop
    assert verdict(suite(3), limits(24.9), suite(4)).outcome == "Failed"


def test_baseline_error_counts_of_zero_are_not_errors() -> None:
    base = stored(levels={8: [700.0] * 3}).model_copy(update={"errors": {"timeout": 0}})
    assert verdict(stored(levels={8: [700.0] * 3}), limits(10), base).outcome == "Passed"
    broken = base.model_copy(update={"errors": {"timeout": 1}})
    result = verdict(stored(levels={8: [700.0] * 3}), limits(10), broken)
    assert result.reasons == ["baseline has failed requests (timeout)"]


def test_absolute_limits_exactly_at_the_limit_pass() -> None:
    figures = stored({"medium": [300.0]}, {4: [600.0]})
    at = limits(
        10, latencyMs={"medium": 300}, throughput=[{"concurrency": 4, "minTokensPerSecond": 600}]
    )
    assert verdict(figures, at, None).outcome == "Passed"
    over = limits(10, latencyMs={"medium": 299.99})
    assert verdict(figures, over, None).outcome == "Failed"
    under = limits(10, throughput=[{"concurrency": 4, "minTokensPerSecond": 600.01}])
    assert verdict(figures, under, None).outcome == "Failed"
