"""Boundary tests of the judge issue 40 changed (``gate.clustering``, ``tails.judge_share_fixed``
and ``across_at``, ``slo_tails.judged_share``), written against its mutants
(``hack/mutants-changed-judge.sh``, docs/mutants-tail-judge.md): each pins an edge where a
moved threshold, a swapped operator or a dropped term would change a number the verdict
rests on. Expected values are worked out here from the definitions, not read off the code."""

from __future__ import annotations

import math

import pytest

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.gate import clustering, slo_tails, tails
from vllm_operator.gate.binomial import clopper_pearson_lower, clopper_pearson_upper
from vllm_operator.gate.tails import Exceedance as E
from vllm_operator.gate.tallies import SampleTally


def _robust_over_binomial(scaled: list[tuple[float, float]]) -> float:
    """The cluster-robust variance of a pooled share over its binomial variance, written out."""
    k = len(scaled)
    n = sum(m for _, m in scaled)
    p = sum(a for a, _ in scaled) / n
    robust = k / (k - 1) * sum((a - p * m) ** 2 for a, m in scaled) / n**2
    return robust / (p * (1 - p) / n)


def test_across_is_the_robust_variance_over_the_binomial_one_after_each_effect() -> None:
    plain = clustering._across([E(10, 1000), E(30, 1000)], [1.0, 1.0])
    assert plain == pytest.approx(_robust_over_binomial([(10, 1000), (30, 1000)]))
    assert plain == pytest.approx(10.204, abs=1e-3)
    divided = clustering._across([E(10, 1000), E(30, 1000)], [2.0, 1.0])
    assert divided == pytest.approx(_robust_over_binomial([(5, 500), (30, 1000)]))
    # three clusters: the small-sample factor is 3/2, not 2
    three = clustering._across([E(10, 1000), E(30, 1000), E(20, 1000)], [1.0, 1.0, 1.0])
    assert three == pytest.approx(_robust_over_binomial([(10, 1000), (30, 1000), (20, 1000)]))


def test_across_is_one_where_it_cannot_be_estimated() -> None:
    assert clustering._across([E(10, 1000)], [1.0]) == 1.0  # one cluster
    assert clustering._across([E(0, 1000), E(0, 1000)], [1.0, 1.0]) == 1.0  # share 0
    assert clustering._across([E(9, 9), E(9, 9)], [1.0, 1.0]) == 1.0  # share 1
    # an empty cluster is no cluster: one left, nothing to estimate
    assert clustering._across([E(0, 0), E(30, 1000)], [1.0, 1.0]) == 1.0
    # agreeing better than binomial noise is not rewarded
    assert clustering._across([E(10, 1000), E(10, 1000)], [1.0, 1.0]) == 1.0
    # an effect below 1 counts as 1
    assert clustering._across([E(10, 1000), E(30, 1000)], [0.5, 0.5]) == pytest.approx(
        _robust_over_binomial([(10, 1000), (30, 1000)])
    )


def test_fixed_judge_every_field_from_its_definition() -> None:
    # kept: the first two (the third is the stray); the first's counts halved by its effect
    clusters = [E(4, 1000, None, 2.0), E(10, 1000), E(50, 1000)]
    judged = tails.judge_share_fixed(clusters, 0.01, 0.95, 9.0, 2)
    n, hits = 500 + 1000, 2 + 10
    share = hits / n
    near = 1 + 8 * math.sqrt(share / 0.01)
    assert judged.share == pytest.approx(share)
    assert judged.high == pytest.approx(clopper_pearson_upper(hits / near, n / near, 0.025))
    assert judged.low == pytest.approx(clopper_pearson_lower(hits / 9, n / 9, 0.025))
    assert judged.effective == pytest.approx(n / near)
    assert (judged.observations, judged.clusters, judged.left_out) == (2000, 3, (2,))
    assert judged.allowed == 0.01
    assert judged.decision == "undecided"


def test_fixed_judge_asks_beyond_of_the_counts_surely_above() -> None:
    # from a histogram: 30 above the bucket bound below the limit, 5 surely above it
    histogram = [E(30, 1000, 5)]
    judged = tails.judge_share_fixed(histogram, 0.01, 0.95, 1.0, None)
    assert judged.low == pytest.approx(clopper_pearson_lower(5, 1000, 0.025))
    assert judged.decision == "undecided"
    exact = tails.judge_share_fixed([E(30, 1000)], 0.01, 0.95, 1.0, None)
    assert exact.decision == "beyond"


def test_fixed_judge_names_only_a_stray_that_is_one_of_the_clusters() -> None:
    clusters = [E(300, 500), E(0, 500), E(0, 500)]
    first = tails.judge_share_fixed(clusters, 0.01, 0.95, 1.0, 0)
    assert first.left_out == (0,)
    assert first.observations == 1000
    beyond = tails.judge_share_fixed(clusters, 0.01, 0.95, 1.0, 3)
    assert beyond.left_out == ()
    assert beyond.observations == 1500
    assert tails.judge_share_fixed(clusters, 0.01, 0.95, 1.0, -1).left_out == ()


def test_fixed_judge_with_nothing_measured_is_undecided_over_the_whole_range() -> None:
    empty = tails.judge_share_fixed([E(0, 0), E(0, 0)], 0.05, 0.95, 3.0, None)
    assert empty == tails.ShareJudgement("undecided", 0.0, 0.0, 1.0, 0.05, 0.0, 0.0, 2, ())
    only_stray = tails.judge_share_fixed([E(0, 0), E(3, 10)], 0.05, 0.95, 3.0, 1)
    assert only_stray == tails.ShareJudgement("undecided", 0.0, 0.0, 1.0, 0.05, 0.0, 0.0, 2, (1,))


def test_fixed_judge_refuses_a_share_or_confidence_outside_0_to_1() -> None:
    for allowed, confidence in ((0.0, 0.95), (1.0, 0.95), (0.01, 1.0), (0.01, 0.0)):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            tails.judge_share_fixed([E(0, 100)], allowed, confidence, 1.0, None)
    assert tails.judge_share_fixed([E(0, 100)], 0.01, 0.95, 1.0, None).decision == "undecided"


def test_a_summary_of_the_earlier_rule_leaves_a_stray_out_from_four_trials() -> None:
    # no 'across': the counts' own estimate, with a stray from FEWEST (4) trials on
    four = [E(0, 500), E(0, 500), E(0, 500), E(200, 500)]
    judged = slo_tails.judged_share(four, 0.01, 0.95, None, None)
    assert judged.left_out == (3,)
    assert slo_tails.judged_share(four[1:], 0.01, 0.95, None, None).left_out == ()


def _uniform(scale: float, n: int = 1000, shift: int = 0) -> SampleTally:
    return SampleTally.of([scale * (shift + i + 1) for i in range(n)])


def test_against_a_baseline_each_trial_is_read_on_the_scale_of_its_own_base() -> None:
    # the definition: each trial's values divided by its base, then the grid as without a
    # baseline
    # three alike trials, the third's bar twice the others': on the scale of the bars the
    # first two hold the whole tail (exact: the bases are powers of two)
    trials = [_uniform(1.0), _uniform(1.0), _uniform(1.0)]
    bases = [0.5, 0.5, 1.0]
    divided = [
        SampleTally.of([v / b for v in t.values]) for t, b in zip(trials, bases, strict=True)
    ]
    fixed = clustering.tail_clustering(trials, 0.01, 4, bases)
    assert fixed == clustering.tail_clustering(divided, 0.01, 4)
    assert fixed.across > 2
    assert clustering.tail_clustering(trials, 0.01, 4).across == 1.0


def test_a_trial_without_a_bar_is_left_out_of_the_grid_and_the_spread() -> None:
    a, b = _uniform(1.0), _uniform(1.0, shift=30)
    with_gap = clustering.tail_clustering([a, _uniform(5.0), b], 0.01, 4, [4.0, None, 4.0])
    without = clustering.tail_clustering([a, b], 0.01, 4, [4.0, 4.0])
    assert without.across > 1
    assert with_gap.across == without.across
    assert with_gap.effects == (without.effects[0], 1.0, without.effects[1])
    assert with_gap.stray is None


def test_the_grid_of_a_median_limit_starts_below_every_observation() -> None:
    # p50: the 2x point would be every observation (a share of 1) and is skipped; the rest of
    # the grid still measures two trials that disagree
    fixed = clustering.tail_clustering([_uniform(1.0), _uniform(1.0, shift=300)], 0.5, 4)
    assert fixed.across > 10
    assert fixed.stray is None


def test_the_stray_is_chosen_at_the_allowed_share_not_deeper_in_the_tail() -> None:
    # four trials 1..1000; a fifth whose 40 slowest sit at 995.5, just under the others'
    # slowest five: a stall at the 1% bound (40 of its 1,000 above 995 against 5 of each
    # other's), nothing at the 0.1% bound (0 above 998 against 2 of each other's)
    normal = [float(i) for i in range(1, 1001)]
    stalled = [float(i) for i in range(1, 961)] + [995.5] * 40
    trials = [SampleTally.of(normal)] * 4 + [SampleTally.of(stalled)]
    assert clustering.tail_clustering(trials, 0.01, 4).stray == 4


def test_the_memo_keeps_apart_other_tallies_and_other_bases() -> None:
    memo = clustering.ClusteringMemo()
    first = [_uniform(1.0), _uniform(1.0, shift=300)]
    second = [_uniform(1.0), _uniform(1.0)]
    assert memo(first, 0.01, 4, None) == clustering.tail_clustering(first, 0.01, 4)
    assert memo(second, 0.01, 4, None) == clustering.tail_clustering(second, 0.01, 4)
    assert memo(first, 0.01, 4, None) != memo(second, 0.01, 4, None)
    bases = [1.0, 4.0]  # on the scale of the bars the first trial holds the whole tail
    assert memo(first, 0.01, 4, bases) == clustering.tail_clustering(first, 0.01, 4, bases)
    other = [1.0, 1.3]  # and here their tails overlap
    assert memo(first, 0.01, 4, other) == clustering.tail_clustering(first, 0.01, 4, other)
    assert memo(first, 0.01, 4, bases) != memo(first, 0.01, 4, other)


def test_a_cluster_of_one_observation_counts_in_the_spread() -> None:
    clusters = [E(1, 1), E(1, 1), E(0, 1000), E(0, 1000)]
    spread = clustering._across(clusters, [1.0] * 4)
    assert spread == pytest.approx(_robust_over_binomial([(1, 1), (1, 1), (0, 1000), (0, 1000)]))
    assert spread > 1


def test_one_observation_is_judged_not_taken_for_none() -> None:
    one = tails.judge_share_fixed([E(0, 1)], 0.01, 0.95, 1.0, None)
    assert one.observations == 1
    assert one.high == pytest.approx(clopper_pearson_upper(0, 1, 0.025))
    assert one.high < 1


def test_a_fixed_clustering_without_a_stray_leaves_every_trial_in() -> None:
    clusters = [E(0, 500), E(3, 500), E(0, 500)]
    judged = slo_tails.judged_share(clusters, 0.01, 0.95, 1.0, None)
    assert judged.left_out == ()
    assert judged.observations == 1500


def test_the_reason_names_regression_floor_ms_when_it_is_larger() -> None:
    # 150 ms against the TTFT default 10% of 1,000 ms (100 ms)
    t = Thresholds.model_validate(
        {"slo": {"ttftMs": {"p99": 1000}}, "maxRegressionPercent": 10, "regressionFloorMs": 150}
    )
    assert t.slo is not None
    assert slo_tails.floor_source(t, 1000, "ttft", t.slo.at(8)) == "regressionFloorMs"
    below = Thresholds.model_validate(
        {"slo": {"ttftMs": {"p99": 1000}}, "maxRegressionPercent": 10, "regressionFloorMs": 99}
    )
    assert below.slo is not None
    assert slo_tails.floor_source(below, 1000, "ttft", below.slo.at(8)) == (
        "the ttft default 10% of 1000 ms"
    )


def test_within_rests_on_the_hits_divided_and_beyond_on_the_whole_effect() -> None:
    # 2 of 3,000 with an effect of 9 at the allowed share: worth 0.65 of 977 for "within"
    assert tails.judge_share_fixed([E(2, 3000)], 0.01, 0.95, 9.0, None).decision == "within"
    # 30 of 1,000 with an effect of 2: 15 of 500, still beyond 1%
    assert tails.judge_share_fixed([E(30, 1000)], 0.01, 0.95, 2.0, None).decision == "beyond"


def test_a_stall_is_found_beside_a_trial_without_a_bar() -> None:
    one = SampleTally.of([10.0 + i * 0.1 for i in range(400)])
    stalled = SampleTally.of([*one.values[:360], *([5000.0] * 40)])
    trials = [one] * 4 + [_uniform(1.0), stalled]
    assert clustering.tail_clustering(trials, 0.01, 4, [1.0] * 4 + [None, 1.0]).stray == 5
