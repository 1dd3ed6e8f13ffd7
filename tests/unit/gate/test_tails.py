"""The tail judge: shares above a limit, clustered counts, histograms, against a baseline."""

from __future__ import annotations

import math

import pytest

from vllm_operator.gate import tails
from vllm_operator.gate.tails import Exceedance, HistogramTally, SampleTally


def test_clopper_pearson_matches_the_closed_form_at_zero_hits() -> None:
    # 0 of n: the upper bound solves (1 - p)^n = tail
    for n in (10, 367, 1440):
        assert tails.clopper_pearson_upper(0, n, 0.025) == pytest.approx(1 - 0.025 ** (1 / n))
    # n of n: the lower bound solves p^n = tail
    assert tails.clopper_pearson_lower(20, 20, 0.025) == pytest.approx(0.025 ** (1 / 20))


@pytest.mark.parametrize(
    ("x", "a", "b", "expected"),
    [(0.3, 1, 5, 1 - 0.7**5), (0.2, 3, 1, 0.2**3), (0.9, 1, 2, 1 - 0.1**2), (0.5, 7, 7, 0.5)],
)
def test_incomplete_beta_closed_forms(x: float, a: float, b: float, expected: float) -> None:
    assert tails.incomplete_beta(x, a, b) == pytest.approx(expected, rel=1e-12)


def test_no_exceedance_in_1440_requests_keeps_a_one_percent_promise() -> None:
    judged = tails.judge_share([Exceedance(0, 480)] * 3, 0.01, 0.95)
    assert judged.decision == "within"
    assert judged.high == pytest.approx(1 - 0.025 ** (1 / 1440))


def test_three_percent_above_breaks_a_one_percent_promise() -> None:
    judged = tails.judge_share(
        [Exceedance(14, 480), Exceedance(15, 480), Exceedance(14, 480)], 0.01, 0.95
    )
    assert judged.decision == "beyond"
    assert judged.low > 0.01


def test_fewest_observations_for_a_one_percent_promise() -> None:
    needed = tails.observations_needed(0.01, 0.95)
    assert needed == 368
    assert tails.judge_share([Exceedance(0, needed)], 0.01, 0.95).decision == "within"
    assert tails.judge_share([Exceedance(0, needed - 1)], 0.01, 0.95).decision == "undecided"
    assert tails.observations_needed(0.01, 0.95, share=0.01) == 0


def test_clusters_that_disagree_widen_the_interval() -> None:
    agree = [Exceedance(14, 480), Exceedance(15, 480), Exceedance(14, 480)]
    disagree = [Exceedance(2, 480), Exceedance(40, 480), Exceedance(1, 480)]
    a = tails.judge_share(agree, 0.01, 0.95)
    d = tails.judge_share(disagree, 0.01, 0.95)
    assert a.share == d.share
    assert d.effective < a.effective / 10
    assert d.decision == "undecided"


def test_design_effect_inside_a_cluster_divides_its_counts() -> None:
    plain = tails.judge_share([Exceedance(30, 3000)], 0.02, 0.95)
    clustered = tails.judge_share([Exceedance(30, 3000, None, 10.0)], 0.02, 0.95)
    assert clustered.effective == pytest.approx(300)
    assert clustered.high > plain.high


def test_gap_design_effect_is_large_when_slow_gaps_share_a_request() -> None:
    spread = [(1, 100)] * 50  # one slow gap in each of 50 requests
    bunched = [(50, 100)] + [(0, 100)] * 49  # all 50 in one stalled request
    assert tails.gap_design_effect(spread) == 1.0
    assert tails.gap_design_effect(bunched) > 40
    assert tails.gap_design_effect([(0, 100)] * 3) == 1.0


def test_histogram_between_bucket_bounds_is_judged_conservatively() -> None:
    buckets = [(0.1, 50.0), (0.25, 90.0), (0.5, 99.0), (1.0, 100.0), (math.inf, 100.0)]
    got = tails.histogram_exceedance(buckets, 0.3)
    assert (got.above, got.surely_above, got.total) == (10, 1, 100)
    on_bound = tails.histogram_exceedance(buckets, 0.25)
    assert (on_bound.above, on_bound.surely_above) == (10, 10)
    below_first = tails.histogram_exceedance(buckets, 0.05)
    assert (below_first.above, below_first.surely_above) == (100, 50)
    in_inf = tails.histogram_exceedance(buckets, 5.0)
    assert (in_inf.above, in_inf.surely_above) == (0, 0)
    with pytest.raises(ValueError, match=r"\+Inf"):
        tails.histogram_exceedance(buckets[:-1], 0.3)


def test_a_limit_between_bounds_never_decides_wrongly() -> None:
    # 10 of 100 above 0.25 s, 1 above 0.5 s: a p95 limit of 0.3 s cannot be decided either way
    buckets = [(0.1, 5000.0), (0.25, 9000.0), (0.5, 9900.0), (math.inf, 10000.0)]
    judged = tails.judge_share([tails.histogram_exceedance(buckets, 0.3)], 0.05, 0.95)
    assert judged.decision == "undecided"
    assert (
        tails.judge_share([tails.histogram_exceedance(buckets, 0.5)], 0.05, 0.95).decision
        == "within"
    )
    assert (
        tails.judge_share([tails.histogram_exceedance(buckets, 0.25)], 0.05, 0.95).decision
        == "beyond"
    )


def test_regression_against_baseline_samples() -> None:
    base = [SampleTally.of([100.0 + i % 50 for i in range(480)]) for _ in range(3)]
    same = [SampleTally.of([100.0 + (i * 7) % 50 for i in range(480)]) for _ in range(3)]
    slower = [SampleTally.of([2 * (100.0 + i % 50) for i in range(480)]) for _ in range(3)]

    def threshold(x: float) -> float:
        return max(x * 1.1, x + 20)

    assert tails.judge_regression(same, base, "p99", threshold, 0.95).decision == "within"
    judged = tails.judge_regression(slower, base, "p99", threshold, 0.95)
    assert judged.decision == "beyond"
    assert judged.baseline_low <= 149 <= judged.baseline_high


def test_regression_against_baseline_histograms() -> None:
    bounds = [0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0]

    def hist(shares: list[float], n: float) -> HistogramTally:
        cumulative, total = [], 0.0
        for le, share in zip(bounds, shares, strict=True):
            total += share * n
            cumulative.append((le, total))
        return HistogramTally((*cumulative, (math.inf, n)))

    fast = [0.1, 0.4, 0.3, 0.15, 0.05, 0, 0, 0, 0]
    slow = [0, 0, 0.1, 0.2, 0.3, 0.3, 0.1, 0, 0]
    base = [hist(fast, 2000)]

    def threshold(x: float) -> float:
        return max(x * 1.2, x + 0.05)

    # the baseline's p95 is only known to lie between bucket bounds 0.06 and 0.1 s
    same = tails.judge_regression([hist(fast, 2000)], base, "p95", threshold, 0.95)
    assert (same.baseline_low, same.baseline_high) == (0.06, 0.1)
    assert same.decision == "within"
    assert (
        tails.judge_regression([hist(slow, 2000)], base, "p95", threshold, 0.95).decision
        == "beyond"
    )
    # a relative limit finer than the buckets cannot be decided from them
    fine = tails.judge_regression([hist(fast, 2000)], base, "p95", lambda x: x * 1.2, 0.95)
    assert fine.decision == "undecided"


def test_unknown_percentile_is_a_named_error() -> None:
    with pytest.raises(ValueError, match="unknown percentile 'p42'"):
        tails.allowed_share("p42")
