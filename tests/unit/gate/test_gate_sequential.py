"""Sequential looks (``gate.sequential``): each look's confidence, which figures stay open,
and what the verdict says about looks and trials."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from gate_figures import PLAN_3_10, limits, pair

from vllm_operator.api.summary import TrialPlan, Warmup
from vllm_operator.gate import open_figures, verdict
from vllm_operator.gate.interval import relative_interval
from vllm_operator.gate.sequential import LAST_LOOK_SHARE, look_confidence, more_allowed


def around(value: float, logs: Sequence[float]) -> list[float]:
    return [value * math.exp(x) for x in logs]


@pytest.mark.parametrize("trials", [3, 4, 5, 6, 7, 8, 9])
def test_earlier_looks_share_half_the_error_rate_equally(trials: int) -> None:
    assert look_confidence(0.95, PLAN_3_10, trials) == pytest.approx(1 - 0.025 / 7, abs=1e-15)
    assert look_confidence(0.95, PLAN_3_10, trials) < 0.9965


def test_the_last_look_gets_the_other_half() -> None:
    assert LAST_LOOK_SHARE == 0.5
    assert look_confidence(0.95, PLAN_3_10, 10) == pytest.approx(0.975, abs=1e-15)
    assert look_confidence(0.95, PLAN_3_10, 11) == pytest.approx(0.975, abs=1e-15)
    assert look_confidence(0.95, PLAN_3_10) == pytest.approx(1 - 0.025 / 7, abs=1e-15)
    # the union bound over the plan's looks adds up to the stated error rate
    total = sum(1 - look_confidence(0.95, PLAN_3_10, n) for n in range(3, 11))
    assert total == pytest.approx(0.05, abs=1e-12)


def test_other_plans_split_the_same_way() -> None:
    plan = TrialPlan(min_trials=2, max_trials=4)  # three looks
    assert look_confidence(0.9, plan, 2) == pytest.approx(1 - 0.05 / 2, abs=1e-15)
    assert look_confidence(0.9, plan, 3) == pytest.approx(1 - 0.05 / 2, abs=1e-15)
    assert look_confidence(0.9, plan, 4) == pytest.approx(0.95, abs=1e-15)
    two = TrialPlan(min_trials=3, max_trials=4)
    assert look_confidence(0.95, two, 3) == pytest.approx(0.975, abs=1e-15)
    assert look_confidence(0.95, two, 4) == pytest.approx(0.975, abs=1e-15)


def test_no_plan_or_one_look_leaves_the_confidence_unchanged() -> None:
    assert look_confidence(0.95, None, 3) == 0.95
    assert look_confidence(0.95, None) == 0.95
    for n in (1, 3, 10):
        one_look = TrialPlan(min_trials=n, max_trials=n)
        assert one_look.looks == 1
        assert look_confidence(0.95, one_look, n) == 0.95
        assert look_confidence(0.8, one_look, n) == 0.8


def test_more_allowed_until_max_trials() -> None:
    assert more_allowed(PLAN_3_10, 3)
    assert more_allowed(PLAN_3_10, 9)
    assert not more_allowed(PLAN_3_10, 10)
    assert not more_allowed(None, 1)
    assert not more_allowed(TrialPlan(min_trials=3, max_trials=3), 3)


# Two figures straddle the 10% limit at three trials, two are decided.
MEDIUM = (around(300, [0.05, 0.12, 0.08]), [300.0] * 3)  # about +8.7%, noisy
LONG = (around(2000, [0.001, -0.001, 0.0]), [2000.0] * 3)  # within
TWO = (around(500, [-0.12, -0.03, -0.08]), [500.0] * 3)  # about -7.4%, noisy
FOUR = ([800.0] * 3, [800.0] * 3)  # identical
MIXED = pair({"medium": MEDIUM, "long": LONG}, {2: TWO, 4: FOUR})
WOBBLE = [0.1, -0.1, 0.05, -0.05, 0.12, -0.12, 0.02, -0.02, 0.08, -0.08]


def test_open_figures_are_exactly_the_straddling_ones() -> None:
    assert open_figures(MIXED, limits(10), None, PLAN_3_10) == {
        ("latency", "medium"),
        ("concurrency", "2"),
    }
    # a wider limit decides them: nothing open
    assert open_figures(MIXED, limits(60), None, PLAN_3_10) == set()


def test_nothing_is_open_when_the_plan_is_exhausted_or_absent() -> None:
    assert open_figures(MIXED, limits(10), None, TrialPlan(min_trials=3, max_trials=3)) == set()
    assert open_figures(MIXED, limits(10), None, None) == set()
    ten = pair(levels={2: (around(500, [-0.09 + w for w in WOBBLE]), [500.0] * 10)})
    assert open_figures(ten, limits(10), None, PLAN_3_10) == set()
    nine = pair(levels={2: (around(500, [-0.09 + w for w in WOBBLE[:9]]), [500.0] * 9)})
    assert open_figures(nine, limits(10), None, PLAN_3_10) == {("concurrency", "2")}


def test_reasons_say_the_interval_was_widened_and_how_the_trials_ran() -> None:
    result = verdict(MIXED, limits(10), None, plan=PLAN_3_10)
    assert result.outcome == "Inconclusive"
    deciding = result.reasons[: result.deciding]
    assert all("widened for 8 looks" in r for r in deciding), result.reasons
    open_ = [r for r in result.reasons if "straddles" in r]
    assert open_ == deciding
    assert len(open_) == 2
    # nothing failed, so what stopped the trials was the time budget, and the reason says so
    stopped = "; 3 of up to 10 trials run (stopped early: the time budget ran out before"
    assert all(stopped in r for r in open_)
    ten = pair(levels={2: (around(500, [-0.09 + w for w in WOBBLE]), [500.0] * 10)})
    last = verdict(ten, limits(10), None, plan=PLAN_3_10)
    assert last.outcome == "Inconclusive"
    assert "; 10 trials, the most allowed (gate.maxTrials)" in last.reasons[0]
    fixed = verdict(MIXED, limits(10), None)
    assert fixed.outcome == "Inconclusive"
    assert not any("widened" in r for r in fixed.reasons)
    assert sum("; 3 trials, a fixed number (no sequential plan)" in r for r in fixed.reasons) == 2


def test_the_summary_plan_is_used_when_none_is_given_and_a_given_one_wins() -> None:
    with_plan = MIXED.model_copy(update={"trial_plan": PLAN_3_10})
    planned = verdict(with_plan, limits(10), None)
    assert all("widened for 8 looks" in r for r in planned.reasons[: planned.deciding])
    three = TrialPlan(min_trials=3, max_trials=3)
    given = verdict(with_plan, limits(10), None, plan=three)
    assert not any("widened" in r for r in given.reasons)
    assert sum("3 trials, the most allowed (gate.maxTrials)" in r for r in given.reasons) == 2
    # widening is what turns a decided figure into an open one: -8% +- a little
    near = pair(levels={2: (around(500, [-0.05, -0.065, -0.08]), [500.0] * 3)})
    assert verdict(near, limits(10), None).outcome == "Passed"
    assert verdict(near, limits(10), None, plan=PLAN_3_10).outcome == "Inconclusive"


def test_about_how_many_trials_would_decide_it() -> None:
    result = verdict(MIXED, limits(10), None)
    medium = next(r for r in result.reasons if r.startswith("medium"))
    iv = relative_interval(*MEDIUM, confidence=0.95, paired=True)
    assert iv is not None
    half = (math.log1p(iv.high) - math.log1p(iv.low)) / 2
    needed = math.ceil(3 * (half / (math.log1p(iv.change) - math.log1p(0.10))) ** 2)
    assert needed == 160  # past MOST_TRIALS_NAMED: no count is given, only that it is many
    assert medium.endswith(": more than 100 trials at this spread would be needed")
    two = next(r for r in result.reasons if r.startswith("2 streams"))
    assert two.endswith(": about 46 trials at this spread would decide it")


def test_an_estimate_on_the_limit_says_more_trials_would_not_decide_it() -> None:
    on = pair(levels={2: (around(500 * 0.9, [-0.05, 0.0, 0.05]), [500.0] * 3)})
    result = verdict(on, limits(10), None)
    assert result.outcome == "Inconclusive"
    assert result.reasons[0].endswith(
        "3 trials, a fixed number (no sequential plan): the estimate sits on the limit, "
        "more trials would not decide it"
    )


def test_an_unsettled_warm_up_is_noted_and_a_settled_one_is_not() -> None:
    same = pair(levels={2: ([500.0] * 3, [500.0] * 3)})
    unsettled = same.model_copy(
        update={"warmup": Warmup(candidate_passes=4, baseline_passes=4, settled=False)}
    )
    result = verdict(unsettled, limits(10), None)
    assert result.outcome == "Passed"
    assert any(
        r.startswith("the warm-up did not settle (4 pass(es) on the candidate, 4 on the baseline)")
        for r in result.reasons
    ), result.reasons
    alone = same.model_copy(update={"warmup": Warmup(candidate_passes=3, settled=False)})
    assert any(
        "(3 pass(es) on the candidate)" in r for r in verdict(alone, limits(10), None).reasons
    )
    settled = same.model_copy(
        update={"warmup": Warmup(candidate_passes=2, baseline_passes=2, settled=True)}
    )
    assert not any("warm-up" in r for r in verdict(settled, limits(10), None).reasons)
