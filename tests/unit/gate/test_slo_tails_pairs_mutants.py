"""Mutants of ``gate.slo_tails.judge_against_baseline`` (the candidate's counts above each
pair's bar, ``gate.pair_tails``) killed: each of its limits and reasons pinned
(docs/mutants-tail-judge.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import TrialPlan
from vllm_operator.api.tail_counts import TailCounts, TailRegression
from vllm_operator.api.workload import LatencyMetric
from vllm_operator.gate import slo_tails, tails
from vllm_operator.gate.finding import FigureKey, Finding, Judged
from vllm_operator.gate.tails import Exceedance

KEY = FigureKey("load", "24")


def pairs_finding(
    above: list[int],
    total: list[int],
    *,
    relative: float = 10,
    floor: float = 100,
    limits: dict[str, Any] | None = None,
    slo_floor_percent: float | None = None,
    effects: list[float] | None = None,
    plan: TrialPlan | None = None,
    metric: LatencyMetric = "ttft",
) -> Judged:
    record = TailRegression(
        relative_percent=relative,
        floor=floor,
        bars=[250.0] * len(total),
        total=total,
        above=above,
        design_effect=effects,
    )
    counts = TailCounts(limit=1000, total=[1440] * len(total), above=[0] * len(total))
    counts = counts.model_copy(update={"regression": record})
    slo: dict[str, Any] = {f"{metric}Ms": {"p99": 1000}}
    if slo_floor_percent is not None:
        slo["regressionFloorPercent"] = slo_floor_percent
    elif metric == "itl":  # its default is 25: these counts were taken at 10
        slo["itlMs"]["regressionFloorPercent"] = 10
    thresholds = Thresholds.model_validate({"slo": slo, **(limits or {"maxRegressionPercent": 10})})
    label = f"{metric} p99 at 24 req/s"
    assert thresholds.slo is not None
    return slo_tails.judge_against_baseline(
        label, metric, "p99", counts, thresholds, 1000.0, plan, KEY, thresholds.slo.at(24)
    )


def test_pair_counts_must_be_taken_at_both_of_these_limits() -> None:
    assert pairs_finding([0], [1440]).finding.severity == "note"
    for relative, floor in [(10, 150), (20, 100), (10.5, 100), (10, 100.5)]:
        judged = pairs_finding([0], [1440], relative=relative, floor=floor)
        assert judged.finding.severity == "inconclusive", (relative, floor)
        assert "re-judge with --report" in judged.finding.text
    # to a billionth, absolute, even where the limits are small
    small = {"maxRegressionPercent": 0.1, "regressionFloorMs": 0}
    near = pairs_finding(
        [0], [1440], relative=0.1 + 5e-10, floor=5e-10, limits=small, slo_floor_percent=0
    )
    assert near.finding.severity == "note", near.finding.text


def test_damaged_pair_counts_are_inconclusive() -> None:
    assert pairs_finding([0, 0], [480, 480], effects=[1.0]) == Judged(
        Finding(
            "inconclusive",
            "ttft p99 at 24 req/s against the baseline: counts do not agree "
            "(design effects and totals differ in length)",
        )
    )


def test_no_pairs_measured_is_inconclusive_and_open_while_trials_may_follow() -> None:
    plan = TrialPlan(min_trials=3, max_trials=10)
    text = "itl p99 at 24 req/s against the baseline: no gaps measured to compare"
    assert pairs_finding([0] * 3, [0] * 3, metric="itl", plan=plan) == Judged(
        Finding("inconclusive", text), KEY, True
    )
    assert pairs_finding([0] * 3, [0] * 3, metric="itl") == Judged(
        Finding("inconclusive", text), KEY, False
    )
    one = pairs_finding([0], [1])
    assert "measured to compare" not in one.finding.text


def test_the_pairs_look_and_its_confidence() -> None:
    plan = TrialPlan(min_trials=3, max_trials=10)
    # 0 of 480 in each of ten trials: within at the last look, not with three at an earlier one
    assert pairs_finding([0] * 10, [480] * 10, plan=plan).finding.severity == "note"
    assert pairs_finding([0] * 3, [100] * 3, plan=plan).finding.severity == "inconclusive"
    # 7 of 1,440 at 95%: within; 8: undecided
    assert pairs_finding([7], [1440]).finding.severity == "note"
    assert pairs_finding([8], [1440]).finding.severity == "inconclusive"


def test_pair_reasons_word_for_word() -> None:
    plan = TrialPlan(min_trials=3, max_trials=10)
    within = pairs_finding([0, 0, 0], [20_000] * 3, plan=plan, effects=[2.0] * 3, metric="itl")
    assert within == Judged(
        Finding(
            "note",
            "itl p99 at 24 req/s against the baseline: 0 of the candidate's 60,000 gaps above "
            "the baseline's p99 plus 10% or 100 ms, whichever is more, the floor from "
            "itlMs.regressionFloorPercent 10% of 1000 ms (bar 250 ms) (share <= "
            "0.021%, 95% interval widened for 8 looks, 3 trials of up to 10, worth 30,000 "
            "independent gaps (clustered)): within the limit, below the 1% its p99 at that "
            "limit would put there",
        ),
        KEY,
        False,
    )
    undecided = pairs_finding([15], [1440], plan=plan)
    assert "undecided against the 1% its p99 at that limit would put there" in (
        undecided.finding.text
    )
    assert (undecided.finding.severity, undecided.figure, undecided.undecided) == (
        "inconclusive",
        KEY,
        True,
    )
    beyond = pairs_finding([40], [1440])
    assert beyond.finding.text.endswith("regression beyond the limit, above the 1% its p99 at "
                                        "that limit would put there")  # fmt: skip
    assert beyond.finding.severity == "fail"


def test_bars_and_strays_in_words() -> None:
    assert slo_tails._bars([250.0, 250.0], [480, 480]) == "bar 250 ms"
    assert slo_tails._bars([250.0, 310.5], [480, 480]) == "bars 250-310.5 ms by trial"
    assert slo_tails._bars([0.0, 310.5], [0, 480]) == "bar 310.5 ms"  # no bar: left out
    assert slo_tails._bars([0.0], [0]) == "no bar set"
    judged = tails.judge_share([Exceedance(0, 10)], 0.5, 0.95)
    assert slo_tails._left_out(judged) == ""
    assert slo_tails._left_out(replace(judged, left_out=(0, 2))) == ", stray trial 1, 3 left out"
