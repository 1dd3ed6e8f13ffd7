"""The clustering fixed once per run (``gate.clustering``) and the judge that uses it
(``tails.judge_share_fixed``): its decision moves one way with the counts (issue 40)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.api.summary import TrialPlan
from vllm_operator.api.tail_counts import TailCounts
from vllm_operator.gate import clustering, slo_tails, tails
from vllm_operator.gate.finding import FigureKey
from vllm_operator.gate.slo_tails import judge_limit
from vllm_operator.gate.tails import Exceedance as E
from vllm_operator.gate.tallies import ClusteredTally, SampleTally

RANK = {"beyond": 0, "undecided": 1, "within": 2}


@st.composite
def counts_and_fewer(draw: st.DrawFn) -> tuple[list[E], list[E], float, int | None]:
    """Clusters, the same clusters with each count lowered or kept (a looser bar), a design
    effect across and a stray."""
    k = draw(st.integers(1, 6))
    totals = [draw(st.integers(0, 3000)) for _ in range(k)]
    effects = [draw(st.floats(1.0, 8.0)) for _ in range(k)]
    above = [draw(st.integers(0, n)) for n in totals]
    fewer = [draw(st.integers(0, a)) for a in above]
    across = draw(st.floats(1.0, 300.0))
    stray = draw(st.one_of(st.none(), st.integers(0, k - 1)))
    before = [E(a, n, None, d) for a, n, d in zip(above, totals, effects, strict=True)]
    after = [E(a, n, None, d) for a, n, d in zip(fewer, totals, effects, strict=True)]
    return before, after, across, stray


@settings(max_examples=400, deadline=None)
@given(counts_and_fewer(), st.sampled_from([0.01, 0.05, 0.5]), st.sampled_from([0.95, 0.995]))
def test_fewer_above_never_gives_a_worse_decision(
    case: tuple[list[E], list[E], float, int | None], allowed: float, confidence: float
) -> None:
    before, after, across, stray = case
    tight = tails.judge_share_fixed(before, allowed, confidence, across, stray)
    loose = tails.judge_share_fixed(after, allowed, confidence, across, stray)
    assert RANK[loose.decision] >= RANK[tight.decision]
    assert loose.high <= tight.high + 1e-12
    assert loose.low <= tight.low + 1e-12


def test_the_earlier_rule_is_not_monotone_on_the_h100_aa2_counts() -> None:
    # ITL p99 against the twin at 8/s, floors 10 and 20 ms (counts of the recorded report):
    # the earlier rule left trial 1 out as a stray at 10 and not at 20 and estimated the
    # spread at each bar; fixed, the clustering is the same at both and the counts decide.
    totals = [20314, 20276, 20271, 20316]
    at_10 = [
        E(a, n, None, d)
        for a, n, d in zip([10, 151, 173, 174], totals, [1.0, 1.2, 1.4, 1.5], strict=True)
    ]
    at_20 = [
        E(a, n, None, d)
        for a, n, d in zip([2, 10, 83, 112], totals, [1.0, 1.0, 2.0, 2.1], strict=True)
    ]
    look = 0.994
    earlier = [tails.judge_share(c, 0.01, look, fewest=4) for c in (at_10, at_20)]
    assert earlier[0].left_out == (0,)
    assert earlier[1].left_out == ()
    assert earlier[0].effective > 10 * earlier[1].effective
    fixed = [tails.judge_share_fixed(c, 0.01, look, 68.2, None) for c in (at_10, at_20)]
    assert RANK[fixed[1].decision] >= RANK[fixed[0].decision]
    assert fixed[1].high < fixed[0].high


def test_across_at_is_one_at_no_share_and_the_whole_effect_from_the_allowed_share() -> None:
    assert tails.across_at(0.0, 50.0, 0.01) == 1.0
    assert tails.across_at(0.01, 50.0, 0.01) == pytest.approx(50.0)
    assert tails.across_at(0.02, 50.0, 0.01) == pytest.approx(50.0)
    assert tails.across_at(0.0025, 50.0, 0.01) == pytest.approx(1 + 49 * 0.5)
    assert tails.across_at(0.0025, 1.0, 0.01) == 1.0


def test_fixed_judge_without_clustering_is_the_exact_interval_of_the_pooled_counts() -> None:
    clusters = [E(1, 400), E(0, 400), E(2, 400)]
    fixed = tails.judge_share_fixed(clusters, 0.01, 0.95, 1.0, None)
    pooled = tails.judge_share([E(3, 1200)], 0.01, 0.95)
    assert (fixed.decision, fixed.low, fixed.high) == (pooled.decision, pooled.low, pooled.high)
    assert fixed.effective == 1200


def test_fixed_judge_leaves_the_stray_out_and_divides_by_each_effect() -> None:
    clusters = [E(0, 500), E(300, 500), E(0, 500, None, 2.0)]
    judged = tails.judge_share_fixed(clusters, 0.01, 0.95, 1.0, 1)
    assert judged.left_out == (1,)
    assert judged.observations == 1000
    assert judged.effective == pytest.approx(750)  # 500 + 500 / 2
    assert judged.decision == "within"
    kept = tails.judge_share_fixed(clusters, 0.01, 0.95, 1.0, None)
    assert kept.decision == "beyond"


def test_fixed_judge_boundaries() -> None:
    # 0 of n: within from the n whose exact bound reaches 1%, whatever the design effect
    needed = tails.observations_needed(0.01, 0.95)
    assert tails.judge_share_fixed([E(0, needed)], 0.01, 0.95, 40.0, None).decision == "within"
    below = tails.judge_share_fixed([E(0, needed - 1)], 0.01, 0.95, 40.0, None)
    assert below.decision == "undecided"
    # beyond is asked with the whole effect: 30 of 1,000 is beyond at 1, not at 10
    assert tails.judge_share_fixed([E(30, 1000)], 0.01, 0.95, 1.0, None).decision == "beyond"
    assert tails.judge_share_fixed([E(30, 1000)], 0.01, 0.95, 10.0, None).decision == ("undecided")
    assert tails.judge_share_fixed([E(0, 0)], 0.01, 0.95, 1.0, None).decision == "undecided"
    with pytest.raises(ValueError, match="at least 1"):
        tails.judge_share_fixed([E(0, 10)], 0.01, 0.95, 0.5, None)


def _stalled_levels() -> list[SampleTally]:
    """Four trials of 400 requests, the same tail each, and a fifth whose 40 slowest
    requests stalled at 5 s."""
    one = [10.0 + i * 0.1 for i in range(400)]
    stalled = [*one[:360], *([5000.0] * 40)]
    return [SampleTally.of(one)] * 4 + [SampleTally.of(stalled)]


def test_a_stalled_trial_is_left_out_and_a_fast_one_is_not() -> None:
    fixed = clustering.tail_clustering(_stalled_levels(), 0.01, 4)
    assert fixed.stray == 4
    fast = [SampleTally.of([10.0 + i * 0.1 for i in range(400)])] * 4 + [
        SampleTally.of([1.0] * 400)
    ]
    assert clustering.tail_clustering(fast, 0.01, 4).stray is None  # fewer slow: no stall
    assert clustering.tail_clustering(_stalled_levels()[1:], 0.01, 5).stray is None  # fewest


def test_trials_that_agree_have_no_effect_across_and_single_values_none_inside() -> None:
    fixed = clustering.tail_clustering([SampleTally.of(range(1, 1001))] * 3, 0.01, 4)
    assert fixed == clustering.Clustering((1.0, 1.0, 1.0), 1.0, None)
    assert clustering.tail_clustering([], 0.01, 4) == clustering.Clustering((), 1.0, None)


def test_trials_that_disagree_have_an_effect_across() -> None:
    slow = SampleTally.of([*range(1, 951), *([2000] * 50)])
    fast = SampleTally.of(range(1, 1001))
    fixed = clustering.tail_clustering([slow, fast, fast], 0.01, 4)
    assert fixed.stray is None
    assert fixed.across > 10


def test_gaps_of_one_stalled_request_make_an_effect_inside_its_trial() -> None:
    spread = [[1.0] * 99 + [100.0] for _ in range(50)]  # every request one slow gap
    bunched = [[1.0] * 100 for _ in range(49)] + [[100.0] * 50 + [1.0] * 50]
    fixed = clustering.tail_clustering(
        [ClusteredTally.of(spread), ClusteredTally.of(bunched)], 0.01, 4
    )
    assert fixed.effects[0] == 1.0
    assert fixed.effects[1] > 10


def test_against_a_baseline_the_grid_runs_over_each_trials_bar() -> None:
    # the candidate 20% slower than each trial's baseline percentile in every trial: the
    # trials agree on the ratio scale, though their values differ tenfold
    trials = [SampleTally.of([b * (0.5 + i / 1000) for i in range(1000)]) for b in (10, 100)]
    assert clustering.tail_clustering(trials, 0.01, 4, [10.0, 100.0]).across == 1.0
    assert clustering.tail_clustering(trials, 0.01, 4).across > 5
    none_set = clustering.tail_clustering(trials, 0.01, 4, [None, None])
    assert none_set == clustering.Clustering((1.0, 1.0), 1.0, None)


def test_the_memo_estimates_once_per_tallies_and_arguments() -> None:
    memo = clustering.ClusteringMemo()
    levels = _stalled_levels()
    first = memo(levels, 0.01, 4, None)
    assert memo(levels, 0.01, 4, None) is first
    assert memo(levels, 0.01, 6, None) == clustering.tail_clustering(levels, 0.01, 6)
    assert memo(levels, 0.05, 4, None) == clustering.tail_clustering(levels, 0.05, 4)


def test_the_summary_carries_the_clustering_and_the_judge_uses_it() -> None:
    plan = TrialPlan(min_trials=3, max_trials=3)
    key = FigureKey.load(8.0)
    counts = {
        "limit": 100.0,
        "total": [500, 500, 500],
        "above": [0, 30, 0],
    }
    earlier = TailCounts.model_validate(counts)
    fixed = TailCounts.model_validate({**counts, "across": 1.0, "strayTrial": 2})
    assert fixed.to_wire()["strayTrial"] == 2
    args = ("itl p99 at 8 req/s", "itl", "p99")
    old = judge_limit(*args, earlier, 100.0, 0.95, plan, key)
    new = judge_limit(*args, fixed, 100.0, 0.95, plan, key)
    assert old.finding.severity == "inconclusive"
    assert new.finding.severity == "note"  # trial 2 left out: 0 of 1,000
    bad = TailCounts.model_validate({**counts, "across": 1.0, "strayTrial": 4})
    text = judge_limit(*args, bad, 100.0, 0.95, plan, key).finding.text
    assert "counts do not agree (stray trial 4 of 3 trials)" in text
    for wrong in ({"across": 0.5}, {"strayTrial": 0}, {"strayTrial": 11}):
        with pytest.raises(ValueError, match=r"greater than|less than"):
            TailCounts.model_validate({**counts, **wrong})
    assert math.isfinite(fixed.across or 0)


def test_a_stall_is_a_share_above_the_others_not_equal_to_it() -> None:
    rest = [E(5, 500)] * 3
    assert clustering._stalled([*rest, E(6, 500)], 3) == 3
    assert clustering._stalled([*rest, E(5, 500)], 3) is None  # the others' share exactly
    assert clustering._stalled([*rest, E(4, 500)], 3) is None
    assert clustering._stalled([*rest, E(6, 500)], None) is None


def test_a_grid_bound_counts_the_ties_at_its_rank() -> None:
    pooled = [9.0, 7.0, 7.0, 7.0, 3.0, 1.0]
    assert clustering._below(pooled, 1) == 7.0  # one above 7
    assert clustering._below(pooled, 2) == 3.0  # the three 7s all above 3
    assert clustering._below(pooled, 4) == 3.0
    assert clustering._below(pooled, 5) == 1.0
    assert clustering._below([5.0, 5.0, 5.0], 1) is None


def test_the_stray_trial_must_be_one_of_the_trials() -> None:
    clusters = [E(0, 500), E(300, 500), E(0, 500)]
    last = slo_tails.judged_share(clusters, 0.01, 0.95, 1.0, 3)
    assert last.left_out == (2,)
    with pytest.raises(ValueError, match="stray trial 4 of 3 trials"):
        slo_tails.judged_share(clusters, 0.01, 0.95, 1.0, 4)
    earlier = slo_tails.judged_share(clusters, 0.01, 0.95, None, None)
    assert earlier == tails.judge_share(clusters, 0.01, 0.95, fewest=slo_tails.FEWEST)
