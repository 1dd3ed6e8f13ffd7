"""Each edge of the tail judge, pinned so that its mutants die (docs/mutants-tail-judge.md).

``hack/mutants-tail-judge.sh`` runs mutmut on gate/tails.py, binomial.py, tallies.py,
tail_baseline.py and slo_tails.py against tests/unit/gate; these tests kill what survived the
first run: the edges of each limit (a share exactly at the allowed value, one observation or
hit more or less, each end of the confidence and the allowed share), the design effects (1 and
more, one cluster and two), the stray-cluster rule (FEWEST - 1 and FEWEST clusters, each side
of its outlier test, empty clusters, ties) and the bucket bounds of a histogram. The figures
are computed from the closed forms where there is one (Beta(1, b) and Beta(a, 1) quantiles,
the cluster-robust variance over the binomial one), pinned otherwise.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from vllm_operator.api.summary import TailCounts, TrialPlan
from vllm_operator.gate import binomial, slo_tails, tail_baseline, tails, tallies
from vllm_operator.gate.finding import FigureKey, Finding, Judged
from vllm_operator.gate.sequential import look_confidence
from vllm_operator.gate.tails import Exceedance, ShareJudgement

E = Exceedance
KEY = FigureKey("load", "24")


# -- the exact interval (gate.binomial) ---------------------------------------------------


def test_clopper_pearson_bounds_at_one_observation_and_one_hit() -> None:
    # Beta(1, 1) is uniform: 0 of 1 has its upper bound at 1 - tail, 1 of 1 its lower at tail
    assert binomial.clopper_pearson_upper(0, 1, 0.025) == pytest.approx(0.975, abs=1e-12)
    assert binomial.clopper_pearson_lower(1, 1, 0.025) == pytest.approx(0.025, abs=1e-12)
    # 9 of 10: Beta(10, 1), x^10 = 1 - tail; 1 of 10: Beta(1, 10), 1 - (1 - x)^10 = tail
    assert binomial.clopper_pearson_upper(9, 10, 0.025) == pytest.approx(0.975**0.1, abs=1e-12)
    assert binomial.clopper_pearson_lower(1, 10, 0.025) == pytest.approx(1 - 0.975**0.1, abs=1e-12)


def test_clopper_pearson_bounds_with_nothing_to_bound() -> None:
    assert binomial.clopper_pearson_upper(5, 5, 0.025) == 1.0
    assert binomial.clopper_pearson_upper(0, 0, 0.025) == 1.0
    assert binomial.clopper_pearson_lower(0, 10, 0.025) == 0.0
    assert binomial.clopper_pearson_lower(1, 0, 0.025) == 0.0


@pytest.mark.parametrize(("x", "expected"), [(-0.5, 0.0), (0.0, 0.0), (1.0, 1.0), (1.5, 1.0)])
def test_incomplete_beta_outside_the_open_unit_interval(x: float, expected: float) -> None:
    assert binomial.incomplete_beta(x, 2, 3) == expected


# -- the share judge (gate.tails) ---------------------------------------------------------


def test_no_observations_is_undecided_with_the_widest_bounds() -> None:
    judged = tails.judge_share([E(0, 0), E(0, 0)], 0.01, 0.95)
    assert judged == ShareJudgement("undecided", 0.0, 0.0, 1.0, 0.01, 0.0, 0.0, 2)


def test_one_observation_can_decide_each_way() -> None:
    # 0 of 1 against 99% allowed: the upper bound is 0.975 <= 0.99
    assert tails.share_decision([E(0, 1)], 0.99, 0.95) == "within"
    one = tails.judge_share([E(0, 1)], 0.99, 0.95)
    assert (one.decision, one.observations, one.effective) == ("within", 1.0, 1.0)
    # 1 of 1 against 1%: the lower bound is 0.025 > 0.01
    assert tails.judge_share([E(1, 1)], 0.01, 0.95).decision == "beyond"
    assert tails.share_decision([E(1, 1)], 0.01, 0.95) == "beyond"


def test_an_upper_bound_exactly_at_the_allowed_share_is_within() -> None:
    # 0 of 1: the upper bound is 1 - tail = 0.975, exactly the allowed share
    assert tails.judge_share([E(0, 1)], 0.975, 0.95).decision == "within"
    # "at most allowed" is the beta CDF at allowed reaching 1 - tail; here it reaches it to
    # the last bit, which still counts
    assert tails.share_decision([E(0, 1)], 0.5005, 0.0010000000019996236) == "within"
    # "beyond" needs the CDF strictly below tail: here it equals it to the last bit
    assert tails.share_decision([E(1, 1)], 0.0185, 0.962999999998) == "undecided"


@pytest.mark.parametrize(
    ("allowed", "confidence"),
    [(0.0, 0.95), (1.0, 0.95), (1.5, 0.95), (0.01, 0.0), (0.01, 1.0), (0.01, 1.5)],
)
def test_allowed_share_and_confidence_must_lie_strictly_inside_0_1(
    allowed: float, confidence: float
) -> None:
    field = "allowed share" if confidence == 0.95 else "confidence"
    value = allowed if confidence == 0.95 else confidence
    with pytest.raises(ValueError, match=rf"^{field} {value} must lie strictly between 0 and 1$"):
        tails.judge_share([E(0, 480)], allowed, confidence)


def _effective_by_hand(clusters: list[tuple[float, float]]) -> float:
    """n over the cluster-robust variance of the pooled share, K / (K - 1) small-sample
    factor, over the binomial variance (never below 1)."""
    k = len(clusters)
    n = sum(m for _, m in clusters)
    share = sum(a for a, _ in clusters) / n
    robust = k / (k - 1) * sum((a - share * m) ** 2 for a, m in clusters) / n**2
    return n / max(1.0, robust / (share * (1 - share) / n))


def test_design_effect_across_two_and_three_clusters() -> None:
    two = tails.judge_share([E(0, 480), E(20, 480)], 0.05, 0.95)
    assert two.effective == pytest.approx(_effective_by_hand([(0, 480), (20, 480)]), rel=1e-12)
    assert two.effective == pytest.approx(47.0, rel=1e-12)
    three = tails.judge_share([E(2, 480), E(40, 480), E(1, 480)], 0.05, 0.95)
    assert three.effective == pytest.approx(40.50640593391774, rel=1e-12)
    # inside and across: each cluster divided by its own design effect first
    mixed = tails.judge_share([E(6, 300, None, 2.0), E(1, 200), E(9, 400, None, 1.5)], 0.05, 0.95)
    by_hand = _effective_by_hand([(3, 150), (1, 200), (6, 400 / 1.5)])
    assert mixed.effective == pytest.approx(by_hand, rel=1e-12)
    assert mixed.effective == pytest.approx(495.51140544518034, rel=1e-12)


def test_an_empty_cluster_changes_nothing() -> None:
    clusters = [E(2, 480), E(40, 480), E(1, 480)]
    with_empty = tails.judge_share([E(0, 0), *clusters], 0.05, 0.95)
    without = tails.judge_share(clusters, 0.05, 0.95)
    assert replace(with_empty, clusters=3) == without
    assert with_empty.clusters == 4


@pytest.mark.parametrize(
    ("per_request", "expected"),
    [
        ([(10, 10), (0, 10)], 20.0),  # share 1/2: 2 * (25 + 25) / 400 over 0.25 / 20
        ([(1, 10), (0, 10)], 0.0025 / (0.05 * 0.95 / 20)),  # one slow gap in two requests
        ([(3, 10), (0, 20), (1, 5)], 3.7500000000000004),
        ([(5, 5), (3, 3)], 1.0),  # every gap above: no variance to inflate
        ([(0, 4), (0, 4)], 1.0),
        ([(2, 10)], 1.0),  # one request: no spread across requests
    ],
)
def test_gap_design_effect_pinned(per_request: list[tuple[int, int]], expected: float) -> None:
    assert tails.gap_design_effect(per_request) == pytest.approx(expected, rel=1e-12)


def test_observations_needed_at_each_end() -> None:
    # 0 of 1 already shows a 99% promise (0.975 <= 0.99)
    assert tails.observations_needed(0.99, 0.95) == 1
    # a share above zero: the first n whose upper bound reaches the limit
    for allowed, share, needed in [(0.01, 0.005, 1518), (0.05, 0.02, 204)]:
        assert tails.observations_needed(allowed, 0.95, share) == needed
        assert binomial.clopper_pearson_upper(share * needed, needed, 0.025) <= allowed
        assert binomial.clopper_pearson_upper(share * (needed - 1), needed - 1, 0.025) > allowed


# -- the stray cluster ---------------------------------------------------------------------


def test_a_stray_needs_fewest_clusters_and_fewest_at_least_two() -> None:
    stalled = [E(0, 1000)] * 3 + [E(60, 1000)]
    assert tails.stray_cluster(stalled, 4) == 3  # exactly FEWEST clusters
    assert tails.stray_cluster(stalled[1:], 4) is None  # FEWEST - 1
    assert tails.stray_cluster(stalled, 5) is None
    two = [E(0, 1000), E(100, 1000)]
    assert tails.stray_cluster(two, 2) == 0
    assert tails.stray_cluster(two, 1) is None
    assert tails.stray_cluster(two, 3) is None
    judged = tails.judge_share(stalled, 0.01, 0.95, fewest=4)
    assert (judged.left_out, judged.clusters, judged.decision) == ((3,), 4, "within")


def test_clusters_that_agree_have_no_stray() -> None:
    assert tails.stray_cluster([E(5, 500)] * 4, 4) is None


def test_an_empty_cluster_is_never_a_stray_nor_an_empty_rest_a_reason() -> None:
    assert tails.stray_cluster([E(0, 0)] * 3 + [E(5, 100)], 4) is None
    # skipped clusters before the stray do not stop the search; one observation is a rest
    assert tails.stray_cluster([E(0, 1), E(0, 0), E(0, 0), E(300, 300)], 4) == 3


def test_a_stray_of_one_observation_and_one_hit() -> None:
    # 0 of 15,000 in the rest: the 97.5% upper bound 2.5e-4 is the chance of 1 of 1
    assert tails.stray_cluster([E(0, 5000)] * 3 + [E(1, 1)], 4) == 3


def test_of_two_equally_improbable_strays_the_first_is_named() -> None:
    assert tails.stray_cluster([E(0, 5000)] * 4 + [E(1, 1), E(1, 1)], 4) == 4


def test_a_cluster_with_too_few_hits_is_a_stray_from_its_edge_on() -> None:
    rest = [E(50, 100)] * 3  # low bound of the rest's share: 0.44
    assert tails.stray_cluster([*rest, E(0, 11)], 4) is None
    assert tails.stray_cluster([*rest, E(0, 12)], 4) == 3
    assert tails.stray_cluster([*rest, E(2, 20)], 4) is None
    assert tails.stray_cluster([*rest, E(2, 21)], 4) == 3


def test_the_design_effect_of_a_cluster_weighs_on_its_stray_test() -> None:
    few = [E(50, 100)] * 3
    assert tails.stray_cluster([*few, E(0, 30)], 4) == 3
    assert tails.stray_cluster([*few, E(0, 30, None, 3.0)], 4) is None  # worth 10
    many = [E(0, 3000)] * 3
    assert tails.stray_cluster([*many, E(3, 100)], 4) == 3
    assert tails.stray_cluster([*many, E(3, 100, None, 3.0)], 4) is None  # 1 of 33


# -- samples and histograms (gate.tallies) -------------------------------------------------


def test_sample_tallies_carry_their_design_effect() -> None:
    assert tallies.SampleTally.of([2.0, 1.0]) == tallies.SampleTally((1.0, 2.0), 1.0)
    got = tallies.SampleTally.of([1.0, 5.0, 9.0], 3.0).exceedance(5.0)
    assert got == E(1.0, 3.0, None, 3.0)


def test_histogram_total_is_the_inf_bucket_and_its_error_names_it() -> None:
    buckets = [(0.1, 50.0), (0.5, 90.0), (math.inf, 100.0)]
    assert tallies.histogram_exceedance(buckets, 0.5) == E(10.0, 100.0, 10.0)
    assert tallies.histogram_exceedance(buckets, 0.7) == E(10.0, 100.0, 0.0)
    with pytest.raises(ValueError, match=r"^a histogram needs its \+Inf bucket \(the count"):
        tallies.histogram_exceedance(buckets[:-1], 0.3)
    with pytest.raises(ValueError, match="a histogram needs"):
        tallies.histogram_exceedance([], 0.3)


# -- against a baseline (gate.tail_baseline) -----------------------------------------------


@pytest.mark.parametrize("size", range(7))
def test_bisections_find_the_edge_of_every_monotone_run(size: int) -> None:
    points = [float(i) for i in range(size)]
    for cut in range(size + 1):
        edge = float(cut)
        first = tail_baseline._bisect_first(points, edge.__le__)
        assert first == ([float(cut)] if cut < size else [])
        last = tail_baseline._bisect_last(points, edge.__gt__)
        assert last == ([float(cut - 1)] if cut > 0 else [])


def test_quantile_bounds_of_too_few_points_are_zero_and_inf() -> None:
    assert tail_baseline.quantile_bounds([], 0.01, 0.95) == (0.0, math.inf)
    assert tail_baseline.quantile_bounds([tallies.SampleTally.of([5.0] * 3)], 0.01, 0.95) == (
        0.0,
        math.inf,
    )


def test_regression_bounds_take_half_of_the_error_rate() -> None:
    base = [
        tallies.SampleTally.of([float((i * 37) % 1440) + j * 0.1 for i in range(480)])
        for j in range(3)
    ]
    assert tail_baseline.quantile_bounds(base, 0.01, 0.975) == (1415.2, 1433.2)
    assert tail_baseline.quantile_bounds(base, 0.01, 0.95) == (1418.0, 1433.1)
    assert tail_baseline.regression_bounds(base, 0.01, 0.95) == (1415.2, 1433.2)


def test_judge_regression_keeps_both_judgements_and_no_high_end_without_a_bound() -> None:
    base = [tallies.SampleTally.of([5.0] * 3)]  # too few to bound the baseline's p99
    cand = [tallies.SampleTally.of([1.0, 2.0, 3.0])]
    judged = tail_baseline.judge_regression(cand, base, "p99", lambda x: x + 1, 0.95)
    assert (judged.threshold_low, judged.threshold_high) == (1.0, math.inf)
    assert judged.beyond is None
    assert judged.within == tails.judge_share([E(2.0, 3.0)], 0.01, 0.975)
    slow = [tallies.SampleTally.of([2 * (100.0 + i % 50) for i in range(480)]) for _ in range(3)]
    fast = [tallies.SampleTally.of([100.0 + i % 50 for i in range(480)]) for _ in range(3)]
    both = tail_baseline.judge_regression(slow, fast, "p99", lambda x: x + 20, 0.95)
    assert both.within == tails.judge_share(
        [t.exceedance(both.threshold_low) for t in slow], 0.01, 0.975
    )
    assert both.beyond == tails.judge_share(
        [t.exceedance(both.threshold_high) for t in slow], 0.01, 0.975
    )


# -- SLO limits from a summary's counts (gate.slo_tails) -----------------------------------


def limit_finding(
    above: list[int],
    total: list[int],
    *,
    counted_at: float = 1000.0,
    metric: str = "ttft",
    plan: TrialPlan | None = None,
    effects: list[float] | None = None,
    percentile: str = "p99",
) -> Judged:
    counts = TailCounts(limit=counted_at, total=total, above=above, design_effect=effects)
    label = f"{metric} {percentile} at 24 req/s"
    return slo_tails.judge_limit(label, metric, percentile, counts, 1000.0, 0.95, plan, KEY)


def test_the_counted_limit_must_be_the_judged_one_to_a_billionth_of_a_ms() -> None:
    assert limit_finding([0], [1440], counted_at=1000 + 5e-10).finding.severity == "note"
    for off in (1000 + 1e-7, 1000.5):
        judged = limit_finding([0], [1440], counted_at=off)
        assert judged.finding.severity == "inconclusive"
        assert "re-judge with --report" in judged.finding.text


def test_damaged_counts_are_inconclusive() -> None:
    judged = limit_finding([0, 0], [480, 480], effects=[1.0])
    assert judged == Judged(
        Finding(
            "inconclusive",
            "ttft p99 at 24 req/s: counts do not agree "
            "(design effects and totals differ in length)",
        )
    )
    with pytest.raises(ValueError, match=r"^design effects and totals differ in length$"):
        slo_tails.exceedances([0], [1, 2], [1.0])
    with pytest.raises(ValueError, match="zip"):
        slo_tails.exceedances([0, 1], [1], None)


def test_nothing_measured_is_inconclusive_and_open_while_trials_may_follow() -> None:
    plan = TrialPlan(min_trials=3, max_trials=10)
    text = "itl p99 at 24 req/s: no gaps measured to count"
    assert limit_finding([0, 0, 0], [0, 0, 0], metric="itl", plan=plan) == Judged(
        Finding("inconclusive", text), KEY, True
    )
    assert limit_finding([0, 0, 0], [0, 0, 0], metric="itl") == Judged(
        Finding("inconclusive", text), KEY, False
    )
    one = limit_finding([0], [1])
    assert "no requests measured" not in one.finding.text
    assert one.finding.text.startswith("ttft p99 at 24 req/s: 0 of 1 requests above 1000 ms")


def test_the_limit_leaves_out_a_stray_trial_from_four_on() -> None:
    assert limit_finding([0, 0, 0, 30], [480] * 4).finding.severity == "note"
    assert limit_finding([0, 0, 30], [480] * 3).finding.severity == "inconclusive"


def test_the_last_look_judges_at_its_own_confidence() -> None:
    plan = TrialPlan(min_trials=3, max_trials=10)
    assert look_confidence(0.95, plan, 10) < look_confidence(0.95, plan, None)
    # 5 of 1,440 over ten trials: within at the last look (97.5%), not at an earlier one
    above = [1] * 5 + [0] * 5
    assert limit_finding(above, [144] * 10, plan=plan).finding.severity == "note"


def test_undecided_reasons_word_for_word() -> None:
    plan = TrialPlan(min_trials=3, max_trials=10)
    open_ = limit_finding([3, 3, 3], [480] * 3, plan=plan, metric="itl")
    assert open_.finding.text == (
        "itl p99 at 24 req/s: 9 of 1,440 gaps above 1000 ms (share 0.19% to 1.5%, 95% "
        "interval widened for 8 looks, 3 trials of up to 10): undecided against the 1% the "
        "p99 limit allows: about 5,549 independent gaps at this share would decide it"
    )
    fixed = limit_finding([3, 3, 3], [480] * 3)
    look = look_confidence(0.95, None, 3)
    assert tails.observations_needed(0.01, look, 9 / 1440) == 2706
    assert fixed.finding.text.endswith(
        "(share 0.29% to 1.2%, 95% interval, 3 trials): undecided against the 1% the p99 "
        "limit allows; 3 trials, a fixed number (no sequential plan): about 2,706 independent "
        "requests at this share would decide it"
    )
    at_limit = limit_finding([14], [1400])
    assert at_limit.finding.text.endswith(
        "(share 0.55% to 1.7%, 95% interval, 1 trial): undecided against the 1% the p99 limit "
        "allows; 1 trials, a fixed number (no sequential plan): the share sits at or above "
        "the limit, more trials would not pass it"
    )
    # just under the limit: more requests than are worth naming
    near = limit_finding([1399], [140000])
    assert near.finding.text.endswith("; 1 trials, a fixed number (no sequential plan)")
    last = limit_finding([4] * 10, [480] * 10, plan=plan)
    assert "10 trials, the most allowed (gate.maxTrials): about " in last.finding.text
    assert "10 trials of up to" not in last.finding.text


def test_clustered_worth_is_named_only_below_nine_tenths() -> None:
    # 900 / (10 / 9) is 810.0, exactly nine tenths: not named
    at = limit_finding([0], [900], effects=[10 / 9])
    assert "worth" not in at.finding.text
    below = limit_finding([0], [900], effects=[1.2])
    assert below.finding.text.startswith(
        "ttft p99 at 24 req/s: 0 of 900 requests above 1000 ms (share <= 0.49%, 95% "
        "interval, 1 trial, worth 750 independent requests (clustered)): within"
    )


def test_a_plan_of_one_look_is_not_widened() -> None:
    one_look = TrialPlan(min_trials=3, max_trials=3)
    text = limit_finding([0, 0, 0], [480] * 3, plan=one_look).finding.text
    assert "(share <= 0.26%, 95% interval, 3 trials): within" in text


@pytest.mark.parametrize(
    ("share", "words"),
    [(0.0, "0%"), (0.01, "1.0%"), (0.0099, "0.99%"), (0.1, "10%"), (0.107, "11%")],
)
def test_shares_in_words(share: float, words: str) -> None:
    assert slo_tails._pct(share) == words


def test_an_upper_bound_exactly_at_the_allowed_share_needs_no_more_observations() -> None:
    tail = (1 - 0.95) / 2
    for n in (368, 512):  # found by the bisection; at the end of a doubling
        allowed = binomial.clopper_pearson_upper(0, n, tail)
        assert tails.observations_needed(allowed, 0.95) == n


def test_more_than_a_trillion_observations_is_never() -> None:
    # 1.4e-7 under a 1% limit would take about 1.9e12 requests: "never" (0), not a number
    assert tails.observations_needed(0.01, 0.95, 0.01 - 1.4e-7) == 0


def test_the_interval_is_widened_from_two_looks_on() -> None:
    two_looks = TrialPlan(min_trials=3, max_trials=4)
    text = limit_finding([0, 0, 0], [480] * 3, plan=two_looks).finding.text
    assert "95% interval widened for 2 looks, 3 trials of up to 4)" in text
    one_look = TrialPlan(min_trials=3, max_trials=3)
    text = limit_finding([0, 0], [720] * 2, plan=one_look).finding.text
    assert "(share <= 0.26%, 95% interval, 2 trials): within" in text


def test_ten_million_requests_is_the_most_named() -> None:
    # 9,187 of 924,401 (found by bisection): exactly 10,000,000 would decide it
    assert tails.observations_needed(0.01, 0.95, 9187 / 924401) == slo_tails.MOST_NAMED
    text = limit_finding([9187], [924401]).finding.text
    assert text.endswith(": about 10,000,000 independent requests at this share would decide it")


def test_a_share_a_hair_under_the_limit_names_no_number() -> None:
    # 0.00999999: more than 10^12 requests would decide it, which observations_needed calls 0
    assert tails.observations_needed(0.01, 0.95, 999_999 / 100_000_000) == 0
    text = limit_finding([999_999], [100_000_000]).finding.text
    assert text.endswith("; 1 trials, a fixed number (no sequential plan)")
