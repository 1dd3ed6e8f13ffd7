"""The regression limit is max(maxRegressionPercent, absolute floor): every edge of it.

The figures are chosen so that the change equals the limit exactly in floating point (a
40 ms baseline and a 45 ms candidate: +12.5% against 5 ms / 40 ms = 12.5%; 32 -> 27 tok/s:
-15.625% against 5 / 32), so a comparison turned from ``>`` into ``>=`` (or ``<=`` into
``<``) changes the outcome. "A hair" is one part in 10^9. Each edge is checked as a point
(one trial each) and as an interval (three identical paired trials: the interval has no
width, so its ends sit exactly where the change does).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from gate_figures import limits, pair, stored

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.gate import verdict
from vllm_operator.gate.interval import robust_interval

HAIR = 1e-9


def latency_outcome(cand: float, base: float, trials: int, th: Thresholds) -> str:
    return verdict(pair({"medium": ([cand] * trials, [base] * trials)}), th, None).outcome


def tps_outcome(cand: float, base: float, trials: int, th: Thresholds) -> str:
    return verdict(pair(levels={8: ([cand] * trials, [base] * trials)}), th, None).outcome


def reason(cand: Sequence[float], base: Sequence[float], th: Thresholds, latency: bool) -> str:
    figures = {"medium": (cand, base)} if latency else {}
    levels = {} if latency else {8: (cand, base)}
    result = verdict(pair(figures, levels), th, None)
    assert len(result.reasons) == 1, result.reasons
    return result.reasons[0]


def test_the_chosen_figures_sit_exactly_on_their_limits() -> None:
    for cand, base, limit in ((45.0, 40.0, 5 / 40), (27.0, 32.0, -5 / 32), (125.0, 100.0, 0.25)):
        for n in (1, 3):
            iv = robust_interval([cand] * n, [base] * n, confidence=0.95, paired=True)
            assert iv is not None
            assert iv.change == iv.low == iv.high == limit


@pytest.mark.parametrize("trials", [1, 3])
def test_latency_exactly_at_the_ms_floor_is_within_and_a_hair_above_is_beyond(
    trials: int,
) -> None:
    th = limits(10)  # 10% of 40 ms is 4 ms: the default 5 ms floor sets the limit, +12.5%
    assert latency_outcome(45.0, 40.0, trials, th) == "Passed"
    assert latency_outcome(45.0 * (1 + HAIR), 40.0, trials, th) == "Failed"
    assert latency_outcome(45.0 * (1 - HAIR), 40.0, trials, th) == "Passed"


@pytest.mark.parametrize("trials", [1, 3])
def test_tokens_per_second_exactly_at_the_floor_is_within_and_a_hair_below_is_beyond(
    trials: int,
) -> None:
    th = limits(10)  # 10% of 32 tok/s is 3.2: the default 5 tok/s floor sets -15.625%
    assert tps_outcome(27.0, 32.0, trials, th) == "Passed"
    assert tps_outcome(27.0 * (1 - HAIR), 32.0, trials, th) == "Failed"
    assert tps_outcome(27.0 * (1 + HAIR), 32.0, trials, th) == "Passed"


@pytest.mark.parametrize("trials", [1, 3])
def test_relative_limit_edges_when_the_floor_is_below_it(trials: int) -> None:
    # 25% of 100 ms is 25 ms, far above the 5 ms floor; 50% of 40 tok/s is 20, above 5.
    assert latency_outcome(125.0, 100.0, trials, limits(25)) == "Passed"
    assert latency_outcome(125.0 * (1 + HAIR), 100.0, trials, limits(25)) == "Failed"
    assert tps_outcome(20.0, 40.0, trials, limits(50)) == "Passed"
    assert tps_outcome(20.0 * (1 - HAIR), 40.0, trials, limits(50)) == "Failed"


def test_one_trial_each_against_a_stored_baseline_is_the_same_point_comparison() -> None:
    th = limits(10)
    base = stored({"medium": [40.0]}, {8: [32.0]})
    at = verdict(stored({"medium": [45.0]}, {8: [27.0]}), th, base)
    assert at.outcome == "Passed", at.reasons
    assert all("one trial each: no interval, a point comparison" in r for r in at.reasons)
    slower = verdict(stored({"medium": [45.0 * (1 + HAIR)]}, {8: [27.0]}), th, base)
    assert slower.outcome == "Failed"
    fewer = verdict(stored({"medium": [45.0]}, {8: [27.0 * (1 - HAIR)]}), th, base)
    assert fewer.outcome == "Failed"


def test_the_default_floors_are_five_ms_and_five_tokens_per_second() -> None:
    th = Thresholds()
    assert th.regression_floor_ms == 5.0
    assert th.regression_floor_tokens_per_second == 5.0
    # and they act: 5 ms of a 40 ms baseline, 5 tok/s of 32 (a 4.9 or 5.1 floor moves these)
    assert latency_outcome(45.0, 40.0, 1, limits(10)) == "Passed"
    assert latency_outcome(45.0 * (1 + HAIR), 40.0, 1, limits(10)) == "Failed"
    assert tps_outcome(27.0, 32.0, 1, limits(10)) == "Passed"
    assert tps_outcome(27.0 * (1 - HAIR), 32.0, 1, limits(10)) == "Failed"


def test_floors_are_settable_and_zero_leaves_only_the_percentage() -> None:
    no_floor = limits(10, regressionFloorMs=0, regressionFloorTokensPerSecond=0)
    assert latency_outcome(45.0, 40.0, 3, no_floor) == "Failed"  # +12.5% > 10%
    assert tps_outcome(27.0, 32.0, 3, no_floor) == "Failed"  # -15.6% < -10%
    wide = limits(10, regressionFloorMs=8, regressionFloorTokensPerSecond=8)
    assert latency_outcome(47.9, 40.0, 3, wide) == "Passed"  # +19.75% < 8/40
    assert latency_outcome(48.1, 40.0, 3, wide) == "Failed"
    assert tps_outcome(24.1, 32.0, 3, wide) == "Passed"  # -24.7% > -8/32
    assert tps_outcome(23.9, 32.0, 3, wide) == "Failed"


def test_reason_names_the_floor_only_when_the_floor_set_the_limit() -> None:
    th = limits(10)
    floor_ms = reason([45.0], [40.0], th, latency=True)
    assert "limit +12.5% (the 5 ms floor; 10% would be +4 ms): within the limit" in floor_ms
    floor_tps = reason([27.0] * 3, [32.0] * 3, th, latency=False)
    assert "limit -15.6% (the 5 tok/s floor; 10% would be -3.2 tok/s): within the limit" in (
        floor_tps
    )
    relative_ms = reason([105.0], [100.0], th, latency=True)
    assert relative_ms.endswith("limit +10%: within the limit")
    assert "floor" not in relative_ms
    relative_tps = reason([95.0] * 3, [100.0] * 3, th, latency=False)
    assert relative_tps.endswith("limit -10%: within the limit")
    assert "floor" not in relative_tps
    # the floor a hair above 10% of the baseline sets the limit; a hair below it does not
    assert "floor" in reason([41.0], [40.0], limits(10, regressionFloorMs=4.0001), latency=True)
    assert "floor" not in reason([41.0], [40.0], limits(10, regressionFloorMs=3.9999), True)


def test_a_tokens_per_second_floor_above_the_baseline_caps_the_limit_at_100_percent() -> None:
    th = limits(10)  # 5 tok/s of a 4 tok/s baseline would be 125%; a drop cannot exceed 100%
    text = reason([0.5] * 3, [4.0] * 3, th, latency=False)
    assert "limit -100% (the 5 tok/s floor; 10% would be -0.4 tok/s): within the limit" in text
    assert tps_outcome(0.5, 4.0, 1, th) == "Passed"
    # latency has no such cap: 5 ms of a 4 ms baseline is +125%
    assert "limit +125% (the 5 ms floor" in reason([8.0], [4.0], th, latency=True)
    assert latency_outcome(9.01, 4.0, 1, th) == "Failed"
    assert latency_outcome(8.99, 4.0, 1, th) == "Passed"
