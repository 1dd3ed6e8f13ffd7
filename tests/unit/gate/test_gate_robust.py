"""One outlier trial may not decide a figure alone (``gate.robust``): the rule's edges.

Values are log figures (paired: per-trial log ratios). The rule leaves out the trial farthest
from the median when it lies more than 0.15 *and* more than 5 robust sds (1.4826 x MAD) from
the others' median; one trial from 3 to 7 trials, two from 8.
"""

from __future__ import annotations

import math

import pytest
from gate_figures import limits, pair

from vllm_operator.gate import verdict
from vllm_operator.gate.interval import relative_interval, robust_interval
from vllm_operator.gate.robust import (
    MAD_TO_SD,
    OUTLIER_LOG_DISTANCE,
    OUTLIER_SPREADS,
    most_left_out,
    outlier,
    outliers,
)

TIGHT = [0.0, 0.001, -0.001]
"""Others with a robust sd of 0.0015: only the 0.15 distance can hold a trial back."""
LOOSE = [0.0, 0.05, -0.05]
"""Others with a robust sd of 1.4826 x 0.05: only the 5-spreads rule can hold it back."""


def test_the_constants_are_the_documented_ones() -> None:
    assert (OUTLIER_LOG_DISTANCE, OUTLIER_SPREADS, MAD_TO_SD) == (0.15, 5.0, 1.4826)


@pytest.mark.parametrize("sign", [1, -1])
def test_distance_exactly_0_15_stays_and_a_hair_beyond_is_left_out(sign: int) -> None:
    assert outlier([*TIGHT, sign * 0.15]) is None
    assert outlier([*TIGHT, sign * (0.15 + 1e-9)]) == 3
    assert outlier([*TIGHT, sign * 0.149]) is None


def test_the_spreads_rule_holds_back_a_trial_among_noisy_others() -> None:
    edge = 5 * 1.4826 * 0.05  # 0.37065: five robust sds of LOOSE
    assert outlier([*LOOSE, 0.3]) is None  # beyond 0.15 but within five sds
    assert outlier([*LOOSE, edge - 1e-4]) is None
    assert outlier([*LOOSE, edge + 1e-4]) == 3
    assert outlier([*LOOSE, -(edge + 1e-4)]) == 3


def test_fewer_than_three_trials_leave_nothing_out() -> None:
    assert outlier([0.0, 5.0]) is None
    assert outlier([5.0]) is None
    assert outliers([0.0, 5.0]) == []
    assert outlier([0.0, 0.0, 5.0]) == 2  # three is enough
    assert [most_left_out(n) for n in range(11)] == [0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2]


def test_the_farthest_trial_is_the_one_and_ties_go_to_the_first() -> None:
    assert outlier([0.0, -0.6, 0.001, -0.001, 0.0]) == 1
    assert outlier([-1.0, 0.0, 0.0, 0.0, 1.0]) == 0


def test_one_left_out_from_seven_trials_two_from_eight() -> None:
    normal = [0.0, 0.001, -0.001, 0.002, -0.002]
    assert outliers([*normal, -0.6, -0.7]) == [6]
    assert outliers([*normal, 0.003, -0.6, -0.7]) == [7, 6]
    assert outliers([*normal, 0.003, 0.001, -0.7]) == [7]  # a second only if it stands apart


def test_the_reason_names_the_trial_one_based_paired_and_unpaired() -> None:
    base = [700.0, 702.0, 698.0, 701.0, 699.0]
    cand = [700.0, 351.0, 698.0, 701.0, 699.0]  # trial 2 halved
    iv = robust_interval(cand, base, confidence=0.95, paired=True)
    assert iv is not None
    assert iv.left_out == ("trial 2",)
    assert iv.trials == (5, 5)  # as measured
    assert len(iv.kept[0]) == len(iv.kept[1]) == 4
    assert 351.0 not in iv.kept[0]
    base_dip = [350.0, 702.0, 698.0, 701.0, 699.0]
    cand_dip = [700.0, 702.0, 349.0, 701.0, 699.0]
    un = robust_interval(cand_dip, base_dip, confidence=0.95, paired=False)
    assert un is not None
    assert un.left_out == ("candidate trial 3", "baseline trial 1")
    assert un.kept == ((700.0, 702.0, 701.0, 699.0), (702.0, 698.0, 701.0, 699.0))


def test_a_dip_both_servers_share_is_no_outlier_when_paired_but_is_on_each_side_unpaired() -> None:
    base = [350.0, 702.0, 698.0, 701.0, 699.0]
    cand = [351.0, 701.0, 699.0, 700.0, 698.0]
    paired_iv = robust_interval(cand, base, confidence=0.95, paired=True)
    assert paired_iv is not None
    assert paired_iv.left_out == ()
    unpaired_iv = robust_interval(cand, base, confidence=0.95, paired=False)
    assert unpaired_iv is not None
    assert unpaired_iv.left_out == ("candidate trial 1", "baseline trial 1")


NOISE = (0.01, -0.008, 0.004, -0.003, 0.0)
BASE = [700.0 * math.exp(e) for e in NOISE]
SAME = [700.0 * math.exp(-e) for e in NOISE]


def test_a_jit_dip_no_longer_makes_an_identical_revision_inconclusive() -> None:
    cand = [SAME[0] * 0.5, *SAME[1:]]  # the first trial compiled a kernel: half the speed
    raw = relative_interval(cand, BASE, confidence=0.95, paired=True)
    assert raw is not None
    assert raw.low < -0.10 < raw.high  # with every trial kept it straddles the -10% limit
    result = verdict(pair(levels={2: (cand, BASE)}), limits(10), None)
    assert result.outcome == "Passed", result.reasons
    assert "outlier trial 1 left out" in result.reasons[0]
    assert "5 trials" in result.reasons[0]


def test_a_real_40_percent_regression_with_one_normal_looking_trial_still_fails() -> None:
    wobble = (0.01, -0.01, 0.005, -0.005, 0.0)
    slower = [0.6 * b * math.exp(e) for b, e in zip(BASE, wobble, strict=True)]
    slower[2] = BASE[2]  # one trial reads as fast as the baseline
    result = verdict(pair(levels={2: (slower, BASE)}), limits(10), None)
    assert result.outcome == "Failed", result.reasons
    assert "outlier trial 3 left out" in result.reasons[0]
    # three trials, one normal-looking: still not Passed
    three = verdict(pair(levels={2: (slower[1:4], BASE[1:4])}), limits(10), None)
    assert three.outcome == "Failed", three.reasons
