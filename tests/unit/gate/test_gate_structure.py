"""The verdict's structure (``gate.finding``, ``gate.verdict.judge``): each figure's outcome,
why an undecided one stopped, the deciding findings first, and a headline short enough for a
status line."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gate_figures import PLAN_3_10, limits, pair

from vllm_operator.gate.verdict import HEADLINE_CHARS, judge, verdict


def around(value: float, logs: Sequence[float]) -> list[float]:
    return [value * math.exp(x) for x in logs]


MEDIUM = (around(300, [0.05, 0.12, 0.08]), [300.0] * 3)  # about +8.7%, noisy: undecided at 10%
LONG = (around(2000, [0.001, -0.001, 0.0]), [2000.0] * 3)  # within
TWO_SLOW = (around(500, [-0.30, -0.31, -0.29]), [500.0] * 3)  # -26%: beyond -10%
FOUR = ([800.0] * 3, [800.0] * 3)  # identical: within
FAILED = pair({"medium": MEDIUM, "long": LONG}, {2: TWO_SLOW, 4: FOUR})


def test_each_figure_has_its_outcome_and_numbers() -> None:
    judged = judge(FAILED, limits(10), None, plan=PLAN_3_10)
    assert judged.outcome == "Failed"
    by_figure = {f.figure: f for f in judged.figures}
    assert set(by_figure) == {
        "medium prompts, median latency",
        "long prompts, median latency",
        "2 streams tok/s",
        "4 streams tok/s",
    }
    two = by_figure["2 streams tok/s"]
    assert (two.outcome, two.deciding, two.stop) == ("beyond", True, None)
    assert two.comparison is not None
    assert two.comparison.limit == -0.10
    assert not two.comparison.higher_is_worse
    assert two.comparison.high < -0.10 < 0  # the whole interval beyond the limit
    assert two.comparison.trials == 3
    assert by_figure["long prompts, median latency"].outcome == "within"
    assert by_figure["4 streams tok/s"].comparison is not None
    assert by_figure["4 streams tok/s"].comparison.change == 0.0


def test_an_undecided_figure_says_another_failed_first_when_one_did() -> None:
    judged = judge(FAILED, limits(10), None, plan=PLAN_3_10)
    medium = next(f for f in judged.findings if f.figure == "medium prompts, median latency")
    assert (medium.outcome, medium.stop, medium.deciding) == ("undecided", "failed-first", False)
    assert "another figure had already failed" in medium.text
    assert "time budget" not in medium.text
    assert medium.brief.endswith("undecided (another figure failed first)")


def test_without_a_failure_the_budget_stopped_it() -> None:
    open_ = pair({"medium": MEDIUM, "long": LONG}, {4: FOUR})
    judged = judge(open_, limits(10), None, plan=PLAN_3_10)
    assert judged.outcome == "Inconclusive"
    medium = judged.deciding[0]
    assert (medium.figure, medium.stop) == ("medium prompts, median latency", "budget")
    assert "the time budget ran out" in medium.text


def test_a_full_plan_or_none_is_plan_exhausted() -> None:
    judged = judge(pair({"medium": MEDIUM}), limits(10), None)
    assert judged.deciding[0].stop == "plan-exhausted"


def test_the_deciding_findings_come_first_in_full_and_the_rest_briefly() -> None:
    result = verdict(FAILED, limits(10), None, plan=PLAN_3_10)
    assert result.outcome == "Failed"
    assert result.deciding == 1
    assert result.reasons[0].startswith("2 streams: 370.4 tok/s, -25.9%")
    assert "widened for 8 looks" in result.reasons[0]  # the full text
    assert not any("widened" in r for r in result.reasons[1:])  # the rest in a few words
    assert len(result.reasons) == 4
    assert result.headline.startswith(
        "2 streams: -25.9% (-32.7% to -18.4%) vs baseline, limit -10%: beyond"
    )
    assert result.headline.endswith(
        "other figures: 2 within, 1 undecided (another figure failed first)"
    )
    assert len(result.headline) <= HEADLINE_CHARS


def test_passed_counts_the_figures_within() -> None:
    same = pair({"long": LONG}, {4: FOUR})
    result = verdict(same, limits(10), None, plan=PLAN_3_10)
    assert result.outcome == "Passed"
    assert result.deciding == 2
    assert result.headline == "all 2 judged figure(s) within their limits"


def test_the_headline_is_bounded_however_many_figures_decide() -> None:
    levels = dict.fromkeys((1, 2, 4, 8, 16, 32), TWO_SLOW)
    result = verdict(pair({}, levels), limits(10), None, plan=PLAN_3_10)
    assert result.deciding == 6
    assert "; also 2 streams tok/s, 4 streams tok/s, 8 streams tok/s and 2 more" in (
        result.headline
    )
    assert len(result.headline) <= HEADLINE_CHARS


def test_a_judge_that_fills_no_structure_still_gets_outcome_and_figure() -> None:
    """``gate.slo``'s findings carry only severity and text: the verdict names the figure
    from the text's label and derives the outcome from the severity, so any judge slots in."""
    from test_gate_slo import TRIALS, lv, slo, summary

    judged = judge(summary(lv(20, TRIALS)), slo(ttftMs={"p99": 1000}), None)
    ttft = next(f for f in judged.findings if f.figure == "ttft p99 at 20 req/s")
    assert (ttft.outcome, ttft.deciding, ttft.comparison) == ("within", True, None)
    failed = judge(summary(lv(20, TRIALS)), slo(ttftMs={"p99": 100}), None)
    assert failed.outcome == "Failed"
    assert failed.deciding[0].figure == "ttft p99 at 20 req/s"
    assert failed.deciding[0].outcome == "beyond"
