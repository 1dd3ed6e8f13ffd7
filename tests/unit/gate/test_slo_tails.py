"""SLO tail limits judged on counts (``gate.slo_tails`` through ``gate.slo``): each edge.

The decisive counts are pinned numbers (computed once from the exact binomial interval and
checked against the closed form where there is one), so a change in how the judge builds
its interval, splits its error rate or compares with the allowed share moves a count across
a boundary and fails a test.
"""

from __future__ import annotations

from typing import Any

import pytest

from vllm_operator.api.spec import Thresholds
from vllm_operator.api.summary import (
    BenchSummary,
    LoadLevelFigures,
    LoadSweep,
    PairedBaseline,
    TailCounts,
    TailRegression,
    TrialPlan,
)
from vllm_operator.gate import verdict
from vllm_operator.gate.sequential import look_confidence
from vllm_operator.gate.slo import breached, judge_slo
from vllm_operator.gate.slo_tails import (
    regression_threshold,
    stored_bounds,
    stored_thresholds,
)

TTFT_P99 = {"ttftMs": {"p99": 1000}}


def th(slo: dict[str, Any], **more: Any) -> Thresholds:
    return Thresholds.model_validate({"slo": slo, **more})


def counts(
    above: list[int],
    total: list[int],
    limit: float = 1000.0,
    effects: list[float] | None = None,
    regression: TailRegression | None = None,
) -> TailCounts:
    return TailCounts(
        limit=limit, total=total, above=above, design_effect=effects, regression=regression
    )


def summary(
    tails: dict[str, TailCounts],
    *,
    level: float = 24.0,
    paired: bool = False,
    percentiles: dict[str, list[float]] | None = None,
) -> BenchSummary:
    trials = len(next(iter(tails.values())).total) if tails else 1
    figures = LoadLevelFigures(
        level=level,
        requests=1440,
        tails=tails,
        percentiles=percentiles or {},
        goodput_percent=[100.0] * trials,
        error_percent=[0.0] * trials,
    )
    sweep = LoadSweep(mode="rate", levels=[figures])
    base = PairedBaseline(load=LoadSweep(mode="rate", levels=[figures])) if paired else None
    return BenchSummary(model="m", load=sweep, paired_baseline=base)


def finding(s: BenchSummary, t: Thresholds, start: str, plan: TrialPlan | None = None) -> Any:
    found = [j for j in judge_slo(s, t, None, plan) if j.finding.text.startswith(start)]
    assert len(found) == 1, [j.finding.text for j in judge_slo(s, t, None, plan)]
    return found[0]


def decision(above: list[int], total: list[int], slo: dict[str, Any] = TTFT_P99) -> str:
    metric, by_p = next(iter(slo.items()))
    p, limit = next(iter(by_p.items()))
    key = f"{metric.removesuffix('Ms')}.{p}"
    s = summary({key: counts(above, total, limit=limit)})
    return str(finding(s, th(slo), key.replace(".", " ") + " at 24").finding.severity)


@pytest.mark.parametrize(
    ("above", "expected"),
    [(0, "note"), (7, "note"), (8, "inconclusive"), (22, "inconclusive"), (23, "fail")],
)
def test_each_edge_of_a_p99_limit_over_1440_requests(above: int, expected: str) -> None:
    # 7 of 1,440: upper 97.5% bound 0.99%; 8: 1.07% (undecided); 23: lower bound 1.01%
    assert decision([above], [1440]) == expected


@pytest.mark.parametrize(
    ("above", "expected"),
    [(682, "note"), (683, "inconclusive"), (757, "inconclusive"), (758, "fail")],
)
def test_each_edge_of_a_p50_limit_is_half_of_the_requests(above: int, expected: str) -> None:
    assert decision([above], [1440], {"ttftMs": {"p50": 100}}) == expected


def test_none_of_1440_requests_above_keeps_the_promise_with_the_reason_naming_it() -> None:
    s = summary({"ttft.p99": counts([0, 0, 0], [480, 480, 480])})
    plan = TrialPlan(min_trials=3, max_trials=10)
    judged = finding(s, th(TTFT_P99), "ttft p99 at 24", plan)
    assert judged.finding.severity == "note"
    # 1 - (0.0036 / 2) ** (1 / 1440): the closed form at 0 of n, at this look's confidence
    assert judged.finding.text == (
        "ttft p99 at 24 req/s: 0 of 1,440 requests above 1000 ms (share <= 0.44%, 95% "
        "interval widened for 8 looks, 3 trials of up to 10): within the 1% the p99 limit "
        "allows"
    )
    assert not judged.undecided


def test_three_percent_above_is_beyond_and_breaches_the_level() -> None:
    s = summary({"ttft.p99": counts([14, 15, 14], [480, 480, 480])})
    assert finding(s, th(TTFT_P99), "ttft p99").finding.severity == "fail"
    assert breached(s, th(TTFT_P99), 24.0, None)
    assert verdict(s, th(TTFT_P99), None).outcome == "Failed"


def test_a_trial_that_disagrees_widens_the_interval() -> None:
    agree = decision([2, 2, 2], [480, 480, 480])
    one_trial = decision([0, 0, 6], [480, 480, 480])
    assert (agree, one_trial) == ("note", "inconclusive")
    assert decision([10, 10, 10], [480] * 3) == "fail"
    assert decision([0, 0, 30], [480] * 3) == "inconclusive"  # one bad trial: not yet beyond


def test_the_design_effect_of_gaps_widens_their_interval() -> None:
    slo = {"itlMs": {"p99": 100}}
    plain = summary({"itl.p99": counts([14, 14, 14], [2000, 2000, 2000], limit=100)})
    bunched = summary({"itl.p99": counts([14, 14, 14], [2000] * 3, limit=100, effects=[3.0] * 3)})
    assert finding(plain, th(slo), "itl p99").finding.severity == "note"
    judged = finding(bunched, th(slo), "itl p99")
    assert judged.finding.severity == "inconclusive"
    assert "42 of 6,000 gaps above 100 ms" in judged.finding.text
    assert "worth 2,000 independent gaps (clustered)" in judged.finding.text


def test_undecided_stays_open_only_while_the_plan_allows_more_trials() -> None:
    s = summary({"ttft.p99": counts([3, 3, 3], [480, 480, 480])})
    plan = TrialPlan(min_trials=3, max_trials=10)
    open_ = finding(s, th(TTFT_P99), "ttft p99", plan)
    assert (open_.finding.severity, open_.undecided, open_.figure) == (
        "inconclusive",
        True,
        ("load", "24"),
    )
    assert "about " in open_.finding.text
    last = finding(s, th(TTFT_P99), "ttft p99", TrialPlan(min_trials=3, max_trials=3))
    assert not last.undecided
    assert "the most allowed (gate.maxTrials)" in last.finding.text


def test_counts_taken_at_another_limit_ask_for_the_report() -> None:
    s = summary({"ttft.p99": counts([0], [1440], limit=1000)})
    judged = finding(s, th({"ttftMs": {"p99": 900}}), "ttft p99")
    assert judged.finding.severity == "inconclusive"
    assert "counted above 1000 ms, but the limit judged is 900 ms: re-judge with --report" in (
        judged.finding.text
    )


def test_counts_that_could_not_be_taken_say_why() -> None:
    missing = TailCounts(limit=100, missing="not decidable from this report (no gap counts)")
    s = summary({"itl.p99": missing})
    judged = finding(s, th({"itlMs": {"p99": 100}}), "itl p99")
    assert judged.finding.text == (
        "itl p99 at 24 req/s: not decidable from this report (no gap counts)"
    )
    assert judged.finding.severity == "inconclusive"


def test_damaged_counts_are_inconclusive_not_a_crash() -> None:
    s = summary({"ttft.p99": counts([0, 0], [480, 480], effects=[1.0])})
    assert "counts do not agree" in finding(s, th(TTFT_P99), "ttft p99").finding.text


def test_a_summary_without_counts_keeps_the_old_rule_and_says_so() -> None:
    old = summary({}, percentiles={"ttft.p99": [150.0, 160.0, 170.0]})
    found = [j.finding.text for j in judge_slo(old, th(TTFT_P99), None, None)]
    assert any(t.startswith("ttft p99 at 24 req/s: 160 ms [") for t in found), found
    assert any(t.startswith("summary without exceedance counts (written before") for t in found)
    new = summary({"ttft.p99": counts([0], [1440])}, percentiles={"ttft.p99": [150.0]})
    found = [j.finding.text for j in judge_slo(new, th(TTFT_P99), None, None)]
    assert not any("summary without exceedance counts" in t for t in found)


# -- against the paired baseline ---------------------------------------------------------


REGRESSION = {"maxRegressionPercent": 10}


def test_the_threshold_is_the_relative_limit_or_the_floor_whichever_is_larger() -> None:
    t = th(TTFT_P99, **REGRESSION)
    threshold = regression_threshold(t, 1000)  # floor: 10% of the 1000 ms limit
    assert threshold(100) == 200
    assert threshold(999) == 1099
    assert threshold(2000) == pytest.approx(2200)
    floor_ms = th(TTFT_P99, maxRegressionPercent=10, regressionFloorMs=150)
    assert regression_threshold(floor_ms, 1000)(100) == 250
    share = th({"ttftMs": {"p99": 1000}, "regressionFloorPercent": 20}, **REGRESSION)
    assert regression_threshold(share, 1000)(100) == 300


def record(
    t: Thresholds,
    within: list[int],
    beyond: list[int],
    base: tuple[float, float | None] = (150.0, 180.0),
    confidence: float = 0.95,
) -> TailRegression:
    low, high = stored_bounds(base[0], base[1] if base[1] is not None else float("inf"))
    t_low, t_high = stored_thresholds(regression_threshold(t, 1000), low, high)
    return TailRegression(
        confidence=confidence,
        baseline=[low, high],
        thresholds=[t_low, t_high],
        within=within,
        beyond=beyond if t_high is not None else [],
    )


def against(within: list[int], beyond: list[int], **kw: Any) -> Any:
    t = th(TTFT_P99, **REGRESSION)
    rec = kw.pop("rec", None) or record(t, within, beyond, **kw)
    s = summary({"ttft.p99": counts([0] * len(within), [1440] * len(within), regression=rec)},
                paired=True)  # fmt: skip
    return finding(s, kw.pop("judged_with", t), "ttft p99 at 24 req/s against the baseline")


@pytest.mark.parametrize(
    ("within", "beyond", "expected"),
    [
        (0, 0, "note"),
        (6, 0, "note"),  # half of the error rate: 97.5% two-sided, 6 of 1,440 upper 0.99%
        (7, 0, "inconclusive"),
        (30, 23, "inconclusive"),
        (30, 24, "fail"),
    ],
)
def test_each_edge_against_the_baseline(within: int, beyond: int, expected: str) -> None:
    judged = against([within], [beyond])
    assert judged.finding.severity == expected, judged.finding.text


def test_the_reason_against_the_baseline_names_its_bounds_and_thresholds() -> None:
    text = against([0], [0]).finding.text
    assert text.startswith(
        "ttft p99 at 24 req/s against the baseline: its pooled p99 lies in [150, 180] ms, so "
        "the candidate may reach 250-280 ms (+10% or the 100 ms floor, the larger); 0 of "
        "1,440 requests above 250 ms (share <= "
    ), text
    assert text.endswith(", 95% interval, 1 trial): within the limit")
    failed = against([30], [40]).finding.text
    assert "40 of 1,440 requests above 280 ms (share >= " in failed
    assert "regression beyond the limit" in failed


def test_without_a_high_bound_of_the_baseline_beyond_cannot_be_shown() -> None:
    judged = against([200], [], base=(150.0, None))
    assert judged.finding.severity == "inconclusive"
    assert "[150, no bound] ms" in judged.finding.text


def test_counts_against_other_thresholds_or_confidence_ask_for_the_report() -> None:
    t = th(TTFT_P99, **REGRESSION)
    other = th(TTFT_P99, maxRegressionPercent=20, regressionFloorMs=200)
    stale = against([0], [0], judged_with=other, rec=record(t, [0], [0]))
    assert stale.finding.severity == "inconclusive"
    assert "counted above 250/280 ms, these limits give 350/380 ms: re-judge with --report" in (
        stale.finding.text
    )
    plan = TrialPlan(min_trials=3, max_trials=10)
    s = summary(
        {"ttft.p99": counts([0] * 3, [480] * 3, regression=record(t, [0] * 3, [0] * 3))},
        paired=True,
    )
    looked = finding(s, t, "ttft p99 at 24 req/s against", plan)
    assert "counted at 95% confidence, this look needs 99.64% " in looked.finding.text
    at_look = record(t, [0] * 3, [0] * 3, confidence=look_confidence(0.95, plan, 3))
    s = summary({"ttft.p99": counts([0] * 3, [480] * 3, regression=at_look)}, paired=True)
    assert finding(s, t, "ttft p99 at 24 req/s against", plan).finding.severity == "note"


def test_new_counts_without_a_record_ask_for_the_report() -> None:
    s = summary({"ttft.p99": counts([0], [1440])}, paired=True)
    judged = finding(s, th(TTFT_P99, **REGRESSION), "ttft p99 at 24 req/s against")
    assert judged.finding.severity == "inconclusive"
    assert "re-judge with --report" in judged.finding.text


def test_the_baseline_sweep_is_not_needed_with_counts() -> None:
    t = th(TTFT_P99, **REGRESSION)
    s = summary({"ttft.p99": counts([0], [1440], regression=record(t, [0], [0]))}, paired=True)
    assert s.paired_baseline is not None
    cut = s.model_copy(
        update={"paired_baseline": s.paired_baseline.model_copy(update={"load": None})}
    )
    assert verdict(cut, t, None).outcome == "Passed"


def test_stored_bounds_and_thresholds_round_outwards() -> None:
    assert stored_bounds(1.234567, 2.345678) == (1.23, 2.35)
    assert stored_bounds(5.0, float("inf")) == (5.0, None)
    # the low threshold down (more counted above it: "within" stays safe), the high one up
    assert stored_thresholds(lambda x: x + 0.004, 1.0, 2.0) == (1.0, 2.01)
    assert stored_thresholds(lambda x: x + 0.004, 1.0, None) == (1.0, None)
