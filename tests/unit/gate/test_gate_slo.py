"""SLO limits of a load sweep (``gate.slo``): each edge, each reason, capacity and breach.

Interval edges are computed here by hand (Student's t on the logs of trial / limit) rather
than through the gate's own functions, so a change in how the gate builds its interval
moves a limit across a boundary and fails a test.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    BenchSummary,
    LoadLevelFigures,
    LoadSweep,
    PairedBaseline,
    TrialPlan,
)
from vllm_operator.gate import verdict
from vllm_operator.gate.slo import breached, capacity, judge_slo, share_interval

T_975_DF2 = 4.302652729911275
"""Student's t, 97.5% quantile, 2 degrees of freedom (tables: 4.303)."""


def lv(
    level: float,
    ttft_p99: list[float] | None = None,
    *,
    goodput: list[float] | None = None,
    errors: list[float] | None = None,
    requests: int = 300,
    **more: list[float],
) -> LoadLevelFigures:
    percentiles = {} if ttft_p99 is None else {"ttft.p99": ttft_p99}
    percentiles.update({k.replace("_", "."): v for k, v in more.items()})
    n = len(ttft_p99 or goodput or errors or [0.0])
    return LoadLevelFigures(
        level=level,
        requests=requests,
        percentiles=percentiles,
        goodput_percent=goodput if goodput is not None else [100.0] * n,
        error_percent=errors if errors is not None else [0.0] * n,
    )


def sweep(*levels: LoadLevelFigures, mode: str = "rate", stopped: float | None = None) -> Any:
    return LoadSweep.model_validate(
        {"mode": mode, "levels": [x.to_wire() for x in levels], "stoppedAt": stopped}
    )


def summary(*levels: LoadLevelFigures, stopped: float | None = None, **kw: Any) -> BenchSummary:
    return BenchSummary(model="m", load=sweep(*levels, stopped=stopped), **kw)


def slo(**spec: Any) -> Thresholds:
    return Thresholds.model_validate({"slo": spec})


def outcome(
    s: BenchSummary, th: Thresholds, plan: TrialPlan | None = None
) -> tuple[str, list[str]]:
    v = verdict(s, th, None, plan=plan)
    return v.outcome, v.reasons


def upper_edge(trials: list[float], limit: float) -> float:
    """The 95% interval's upper end (ms) of the trials' geometric mean, by hand, df = 2."""
    logs = [math.log(t / limit) for t in trials]
    half = T_975_DF2 * statistics.stdev(logs) / math.sqrt(len(logs))
    return limit * math.exp(statistics.fmean(logs) + half)


def lower_edge(trials: list[float], limit: float) -> float:
    logs = [math.log(t / limit) for t in trials]
    half = T_975_DF2 * statistics.stdev(logs) / math.sqrt(len(logs))
    return limit * math.exp(statistics.fmean(logs) - half)


TRIALS = [400.0, 420.0, 440.0]


def test_a_percentile_all_below_the_limit_passes_and_says_where() -> None:
    high = upper_edge(TRIALS, 500)  # the edge does not depend on the limit (log ratios)
    assert 440 < high < 500
    result, reasons = outcome(summary(lv(20, TRIALS)), slo(ttftMs={"p99": high * 1.001}))
    assert result == "Passed", reasons
    assert reasons[0].startswith("ttft p99 at 20 req/s: 420 ms [")
    assert "within the" in reasons[0]
    assert "(95% interval, 3 trials)" in reasons[0]
    # a hair tighter: the interval now reaches past the limit, undecided
    result, reasons = outcome(summary(lv(20, TRIALS)), slo(ttftMs={"p99": high * 0.999}))
    assert result == "Inconclusive", reasons
    assert "straddles the" in reasons[0]


def test_a_percentile_all_above_the_limit_fails_naming_metric_percentile_and_level() -> None:
    low = lower_edge(TRIALS, 500)
    assert 370 < low < 400
    result, reasons = outcome(summary(lv(40, TRIALS)), slo(ttftMs={"p99": low * 0.999}))
    assert result == "Failed", reasons
    first = reasons[0]
    assert first.startswith("ttft p99 at 40 req/s: 420 ms [")
    assert first.endswith(f"above the {low * 0.999:g} ms limit (95% interval, 3 trials)")
    result, reasons = outcome(summary(lv(40, TRIALS)), slo(ttftMs={"p99": low * 1.001}))
    assert result == "Inconclusive", reasons


def test_one_trial_is_a_point_comparison_and_the_limit_itself_is_within() -> None:
    assert outcome(summary(lv(5, [500.0])), slo(ttftMs={"p99": 500}))[0] == "Passed"
    result, reasons = outcome(summary(lv(5, [500.0])), slo(ttftMs={"p99": 499.9}))
    assert result == "Failed"
    assert reasons[0] == (
        "ttft p99 at 5 req/s: 500 ms above the 499.9 ms limit "
        "(one trial: no interval, a point comparison)"
    )


def test_streams_are_named_as_streams() -> None:
    s = BenchSummary(model="m", load=sweep(lv(8, [900.0]), mode="concurrency"))
    reasons = verdict(s, slo(e2eMs={"p99": 100}), None).reasons
    assert reasons[0].startswith("e2e p99 at 8 streams: no figure")
    s1 = BenchSummary(model="m", load=sweep(lv(1, [900.0]), mode="concurrency"))
    assert (
        verdict(s1, slo(ttftMs={"p99": 100}), None)
        .reasons[0]
        .startswith("ttft p99 at 1 stream: 900 ms above")
    )


def test_a_level_override_replaces_the_common_limits_there() -> None:
    th = slo(ttftMs={"p99": 300}, levels=[{"at": 40, "ttftMs": {"p99": 900}}])
    s = summary(lv(20, [250.0, 251.0, 252.0]), lv(40, [800.0, 801.0, 802.0]))
    result, reasons = outcome(s, th)
    assert result == "Passed", reasons
    assert any(
        r.startswith("ttft p99 at 40 req/s: 801 ms") and "900 ms limit" in r for r in reasons
    )
    assert "capacity: 40 req/s, the highest level that met every SLO" in reasons


def test_goodput_edges() -> None:
    good = [96.0, 97.0, 98.0]
    mean, low, high, _ = share_interval(good, 0.95)
    half = T_975_DF2 * statistics.stdev(good) / math.sqrt(3)
    assert (mean, low, high) == pytest.approx((97.0, 97.0 - half, 97.0 + half))
    s = summary(lv(20, goodput=good))
    assert outcome(s, slo(minGoodputPercent=low))[0] == "Passed"
    result, reasons = outcome(s, slo(minGoodputPercent=low + 0.01))
    assert result == "Inconclusive"
    assert reasons[0].startswith("goodput at 20 req/s: 97.0% [")
    result, reasons = outcome(s, slo(minGoodputPercent=high + 0.01))
    assert result == "Failed"
    assert "below the least" in reasons[0]
    assert outcome(s, slo(minGoodputPercent=high - 0.01))[0] == "Inconclusive"


def test_error_share_edges_and_zero_errors() -> None:
    assert outcome(summary(lv(20, errors=[0.0, 0.0, 0.0])), slo(maxErrorPercent=0))[0] == "Passed"
    result, reasons = outcome(summary(lv(20, errors=[1.0])), slo(maxErrorPercent=0.99))
    assert result == "Failed"
    assert reasons[0].startswith("errors at 20 req/s: 1.0% above the largest 0.99%")
    assert outcome(summary(lv(20, errors=[1.0])), slo(maxErrorPercent=1))[0] == "Passed"


def test_capacity_is_the_highest_level_met_with_every_level_below() -> None:
    th = slo(ttftMs={"p99": 500})
    ok, bad = [100.0, 101.0, 102.0], [900.0, 901.0, 902.0]
    s = summary(lv(5, ok), lv(10, ok), lv(20, bad), lv(40, ok))
    assert capacity(s, th, None) == 10
    assert breached(s, th, 20, None)
    assert not breached(s, th, 10, None)
    assert capacity(summary(lv(5, bad), lv(10, ok)), th, None) is None
    # an undecided level ends the capacity too: it did not meet the SLO with confidence
    assert capacity(summary(lv(5, ok), lv(10, [400.0, 500.0, 600.0])), th, None) == 5
    assert not breached(summary(lv(5, ok), lv(10, [400.0, 500.0, 600.0])), th, 10, None)


def test_levels_after_the_breach_are_a_note_others_not_measured_inconclusive() -> None:
    th = slo(ttftMs={"p99": 500})
    s = summary(lv(5, [100.0]), lv(20, [900.0]), lv(40, requests=0), stopped=20)
    result, reasons = outcome(s, th)
    assert result == "Failed"
    assert "at 40 req/s: not measured, the sweep stopped at its first breach 20" in reasons
    cut = summary(lv(5, [100.0]), lv(20, requests=0))
    result, reasons = outcome(cut, th)
    assert result == "Inconclusive"
    assert "at 20 req/s: not measured (the run ended before this level)" in reasons


def test_undecided_levels_are_open_while_the_plan_allows() -> None:
    plan = TrialPlan(min_trials=3, max_trials=5)
    th = slo(ttftMs={"p99": 500})
    s = summary(lv(20, [400.0, 500.0, 600.0]), lv(40, [100.0, 101.0, 102.0]))
    judged = judge_slo(s, th, None, plan)
    assert {j.figure for j in judged if j.undecided} == {("load", "20")}
    five = summary(lv(20, [400.0, 500.0, 600.0, 450.0, 550.0]))
    assert not any(j.undecided for j in judge_slo(five, th, None, plan))
    assert "widened for 3 looks" in judge_slo(s, th, None, plan)[0].finding.text


def test_against_the_paired_baseline_each_limited_percentile_is_compared() -> None:
    th = Thresholds.model_validate(
        {
            "maxRegressionPercent": 10,
            "slo": {"ttftMs": {"p99": 5000}, "itlMs": {"p50": 100}, "regressionFloorPercent": 0},
        }
    )
    cand = lv(20, [300.0, 303.0, 306.0], itl_p50=[20.0, 20.2, 20.4])
    base = lv(20, [200.0, 202.0, 204.0], itl_p50=[20.1, 20.2, 20.3])
    s = BenchSummary(
        model="m",
        load=sweep(cand),
        paired_baseline=PairedBaseline(load=sweep(base)),
    )
    result, reasons = outcome(s, th)
    assert result == "Failed", reasons
    failed = [r for r in reasons if r.endswith("regression beyond the limit")]
    assert len(failed) == 1
    assert failed[0].startswith("ttft p99 at 20 req/s: 303.0 ms, +50.0% vs baseline 202.0 ms")
    assert any(r.startswith("itl p50 at 20 req/s:") and "within the limit" in r for r in reasons)
    # a 5 ms floor: a 2 ms rise of a 20 ms ITL is within, whatever its percentage
    base2 = lv(20, [300.0, 303.0, 306.0], itl_p50=[18.0, 18.2, 18.4])
    s2 = s.model_copy(update={"paired_baseline": PairedBaseline(load=sweep(base2))})
    reasons2 = outcome(s2, th)[1]
    assert any("itl p50 at 20 req/s" in r and "5 ms floor" in r and "within" in r for r in reasons2)


@pytest.mark.parametrize(
    ("rise_ms", "outcome_"),
    [(99.9, "Passed"), (100.0, "Passed"), (100.2, "Failed")],
)
def test_a_regression_counts_only_beyond_the_share_of_the_slo_limit(
    rise_ms: float, outcome_: str
) -> None:
    # TTFT p99 limit 1000 ms, floor share 10%: 100 ms. A 200 ms baseline rising by 100 ms
    # (+50%, far beyond maxRegressionPercent 10) is replica noise inside the SLO; beyond
    # 100 ms it counts. Identical ratios in every trial: the interval is the point.
    th = Thresholds.model_validate({"maxRegressionPercent": 10, "slo": {"ttftMs": {"p99": 1000}}})
    base = lv(20, [200.0, 200.0, 200.0])
    cand = lv(20, [200.0 + rise_ms] * 3)
    s = BenchSummary(model="m", load=sweep(cand), paired_baseline=PairedBaseline(load=sweep(base)))
    result, reasons = outcome(s, th)
    assert result == outcome_, reasons
    assert any("the 100 ms floor" in r for r in reasons), reasons


def test_with_three_trials_no_slo_trial_is_left_out_as_an_outlier() -> None:
    # The H200 A/A run (2026-12-01): paired TTFT p99 ratios 0.73, 1.30, 1.30. Leaving the
    # first out made a tight +30% interval and failed an identical revision; from three
    # trials the SLO judge keeps all of them (four trials: the study's rule applies).
    th = Thresholds.model_validate(
        {"maxRegressionPercent": 10, "slo": {"ttftMs": {"p99": 1000}, "regressionFloorPercent": 0}}
    )
    cand, base = lv(8, [94.0, 157.0, 130.0]), lv(8, [129.0, 121.0, 100.0])
    s = BenchSummary(model="m", load=sweep(cand), paired_baseline=PairedBaseline(load=sweep(base)))
    result, reasons = outcome(s, th)
    assert result == "Inconclusive", reasons
    assert not any("left out" in r for r in reasons), reasons
    four_c, four_b = lv(8, [94.0, 157.0, 130.0, 131.0]), lv(8, [129.0, 121.0, 100.0, 101.0])
    s4 = BenchSummary(
        model="m", load=sweep(four_c), paired_baseline=PairedBaseline(load=sweep(four_b))
    )
    assert any("outlier trial 1 left out" in r for r in outcome(s4, th)[1])


def test_a_baseline_without_a_sweep_is_inconclusive_and_no_baseline_is_a_note() -> None:
    th = Thresholds.model_validate({"maxRegressionPercent": 10, "slo": {"ttftMs": {"p99": 500}}})
    s = summary(lv(20, [100.0]), paired_baseline=PairedBaseline())
    result, reasons = outcome(s, th)
    assert result == "Inconclusive"
    assert "baseline has no load sweep: SLO percentiles not compared with it" in reasons
    assert outcome(summary(lv(20, [100.0])), th)[0] == "Passed"


def test_limits_without_a_sweep_are_an_error_a_sweep_without_limits_a_note() -> None:
    result, reasons = outcome(BenchSummary(model="m"), slo(ttftMs={"p99": 500}))
    assert result == "Error"
    assert "no load sweep was measured" in reasons[0]
    result, reasons = outcome(summary(lv(20, [100.0])), Thresholds())
    assert result == "Passed"
    assert reasons == [
        "load sweep measured without SLO limits (thresholds.slo): figures not judged"
    ]


def test_one_stalled_trial_is_left_out_as_in_the_regression_judge() -> None:
    trials = [100.0, 101.0, 102.0, 260.0]
    result, reasons = outcome(summary(lv(20, trials)), slo(ttftMs={"p99": 150}))
    assert result == "Passed", reasons
    assert "outlier trial 4 left out" in reasons[0]


def test_a_level_without_limits_of_its_own_has_nothing_to_miss() -> None:
    th = slo(levels=[{"at": 40, "ttftMs": {"p99": 500}}])
    s = summary(lv(20, [900.0]), lv(40, [100.0]))
    result, reasons = outcome(s, th)
    assert result == "Passed", reasons
    assert capacity(s, th, None) == 40
    assert capacity(summary(lv(20, [900.0]), lv(40, requests=0)), th, None) == 20


def test_capacity_none_names_the_first_level_and_an_empty_sweep_says_nothing() -> None:
    th = slo(ttftMs={"p99": 500})
    reasons = outcome(summary(lv(5, [900.0])), th)[1]
    assert "capacity: none, the first level (5 req/s) did not meet every SLO" in reasons
    assert judge_slo(summary(), th, None, None) == []


def test_a_percentile_exactly_at_its_limit_in_every_trial_is_within() -> None:
    # The limit is allowed: 500 ms in each of three trials is a point interval on the limit,
    # within it; a hair above in every trial is beyond it.
    th = slo(ttftMs={"p99": 500})
    result, reasons = outcome(summary(lv(20, [500.0, 500.0, 500.0])), th)
    assert result == "Passed", reasons
    assert "500 ms [500, 500] within the 500 ms limit" in reasons[0], reasons
    assert outcome(summary(lv(20, [500.01, 500.01, 500.01])), th)[0] == "Failed"
