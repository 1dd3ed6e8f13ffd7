"""Plans that can decide (issue 29): a tail limit needs enough observations, and a spec whose
levels cannot bring them in ``timeoutSeconds`` is warned about, naming the level, the limit,
the count and the fix. Boundaries: one request fewer flips the warning, the timeout a
warning names is exactly the one that removes it."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_operator.api.gate_spec import GateSpec
from vllm_operator.gate.binomial import clopper_pearson_upper
from vllm_operator.gate.budget import (
    REPORT_RESERVE_FRACTION,
    RESERVE_FRACTION,
    SweepBudget,
    extra_round_fits,
    reserve_for,
)
from vllm_operator.gate.decidable import needed, reach, shortfalls


def gate(
    *,
    rates: list[float] | None = None,
    seconds: int = 20,
    trials: int = 3,
    max_trials: int = 10,
    timeout: int = 500,
    output_tokens: int = 128,
    slo: dict[str, Any] | None = None,
    mode: str = "rate",
) -> GateSpec:
    load: dict[str, Any] = {"mode": mode, "secondsPerLevel": seconds}
    if mode == "rate":
        load["rates"] = rates or [8, 24]
    else:
        load["concurrency"] = [4, 8]
    return GateSpec.model_validate(
        {
            "trials": trials,
            "maxTrials": max_trials,
            "timeoutSeconds": timeout,
            "workload": {
                "synthetic": {
                    "inputTokens": {"mean": 512},
                    "outputTokens": {"mean": output_tokens},
                },
                "load": load,
            },
            "thresholds": {"slo": slo if slo is not None else {"ttftMs": {"p99": 1000}}},
        }
    )


def test_a_p99_needs_368_requests_at_95_percent_and_one_fewer_cannot_show_it() -> None:
    n = needed("p99", 0.95)
    assert n == 368
    assert clopper_pearson_upper(0, n, 0.025) <= 0.01 < clopper_pearson_upper(0, n - 1, 0.025)
    assert reach("p99", 184, 2, 0.95).decidable
    assert not reach("p99", 183.5, 2, 0.95).decidable
    assert needed("p50", 0.95) < 10  # a median needs a handful


def test_one_request_fewer_flips_the_warning() -> None:
    # one look (trials == maxTrials == 1): the stated 95%; 1 req/s for 368 s is 368 requests
    enough = gate(rates=[1], seconds=368, trials=1, max_trials=1, timeout=3600)
    assert shortfalls(enough, 3570, servers=1) == []
    short = gate(rates=[1], seconds=367, trials=1, max_trials=1, timeout=3600)
    (found,) = shortfalls(short, 3570, servers=1)
    assert (found.metric, found.percentile, found.where) == ("ttft", "p99", "at 1 req/s")
    assert found.reach.needed == 368
    assert found.reach.available == 367
    assert found.seconds_per_level_needed == 368
    assert "ttft p99 at 1 req/s cannot be decided" in found.message
    assert "at least 368 requests with none above it" in found.message
    assert "secondsPerLevel >= 368" in found.message


def test_itl_counts_the_gaps_between_chunks() -> None:
    slo = {"itlMs": {"p99": 50}}
    # 2 output tokens: one gap per request, like TTFT's one request
    one_gap = gate(
        rates=[1], seconds=367, trials=1, max_trials=1, timeout=3600, output_tokens=2, slo=slo
    )
    (found,) = shortfalls(one_gap, 3570, servers=1)
    assert found.unit == "gaps"
    assert "368 gaps" in found.message
    # 3 output tokens: two gaps per request, 184 requests are enough, 183 are not
    two = gate(
        rates=[1], seconds=184, trials=1, max_trials=1, timeout=3600, output_tokens=3, slo=slo
    )
    assert shortfalls(two, 3570, servers=1) == []
    fewer = gate(
        rates=[1], seconds=183, trials=1, max_trials=1, timeout=3600, output_tokens=3, slo=slo
    )
    assert len(shortfalls(fewer, 3570, servers=1)) == 1


def test_the_timeout_a_warning_names_is_exactly_the_one_that_removes_it() -> None:
    # the H200 SLO spec of 2026-12-02 (8 and 24 req/s, 20 s levels, 3 to 10 trials, twin)
    for timeout in range(100, 320, 7):
        for found in shortfalls(gate(timeout=timeout), timeout - 30, servers=2, margin_seconds=30):
            fix = found.timeout_needed
            assert fix is not None
            assert fix > timeout

            def same(t: int, f: Any = found) -> list[Any]:
                return [
                    x
                    for x in shortfalls(gate(timeout=t), t - 30, servers=2, margin_seconds=30)
                    if (x.where, x.metric) == (f.where, f.metric)
                ]

            assert same(fix) == []
            assert len(same(fix - 1)) == 1


def test_the_h200_spec_can_decide_and_its_budget_gives_the_trials_the_run_took() -> None:
    # timeoutSeconds 500: each level may get 4 trials (the real run of 2026-12-02 took 7 at
    # 8 req/s, before the budget held 24 req/s's warm-up and first three rounds for it)
    g = gate(timeout=500, slo={"ttftMs": {"p99": 1000}, "itlMs": {"p99": 100}})
    assert shortfalls(g, 470, servers=2) == []
    budget = SweepBudget(470, levels=2, seconds_per_level=20, servers=2, trials=3, max_trials=10)
    assert budget.most_trials(0) == 4
    assert budget.most_trials(1) == 4
    # without holding the next level's first look, 8 req/s would take 7 and leave it none
    assert budget.later(0) == 2 * 10 + 3 * 40
    assert budget.later(1) == 0
    # 200 s: 8 req/s gets only its 3 first trials and no level more, so the plan is cut to
    # 3-3 (gate.budget.reachable_plan): one look at 95%, 368 requests needed, 480 brought.
    # Uncut, that look was the first of eight (630 needed) and the warning asked for 484 s.
    assert [f.where for f in shortfalls(gate(timeout=200), 170, servers=2)] == ["at 24 req/s"]
    # 160 s: 2 trials fit (320 requests); the third, at 170 s, decides it
    (low, *_rest) = shortfalls(gate(timeout=160), 130, servers=2, margin_seconds=30)
    assert low.where == "at 8 req/s"
    assert (low.trials, low.reach.needed, low.reach.available) == (2, 368, 320)
    assert low.timeout_needed == 170
    assert "the 2 trials that fit in timeoutSeconds 160 bring 320" in low.message
    assert "it needs timeoutSeconds >= 170" in low.message


def test_a_level_no_trial_of_which_fits_says_so() -> None:
    found = shortfalls(gate(timeout=200), 170, servers=2, margin_seconds=30)
    top = [f for f in found if f.where == "at 24 req/s"]
    assert top
    assert top[0].trials == 0
    assert "no trial of it fits in timeoutSeconds 200" in top[0].message


def test_a_stored_baseline_halves_every_round() -> None:
    assert shortfalls(gate(timeout=200), 170, servers=2)
    assert shortfalls(gate(timeout=200), 170, servers=1) == []


@pytest.mark.parametrize(
    "g",
    [
        gate(mode="concurrency", seconds=1),  # requests per second unknown before measuring
        gate(rates=[100], seconds=20, slo={"minGoodputPercent": 90}),  # no latency limit
    ],
)
def test_what_cannot_be_known_or_has_no_tail_limit_is_not_warned(g: GateSpec) -> None:
    assert shortfalls(g, 30, servers=2) == []


def test_budget_rule_is_the_benchs() -> None:
    # an extra round fits while it is expected to end before the deadline less the reserve
    assert extra_round_fits(100, 40, 160 / (1 - RESERVE_FRACTION))
    assert not extra_round_fits(100.01, 40, 160 / (1 - RESERVE_FRACTION))
    budget = SweepBudget(1000, levels=3, seconds_per_level=30, servers=2, trials=3, max_trials=10)
    for index in range(3):
        for trials in range(1, 11):
            deadline = budget.deadline_for(index, trials)
            at = SweepBudget(deadline, 3, 30, 2, 3, 10)
            below = SweepBudget(deadline - 0.01, 3, 30, 2, 3, 10)
            assert at.most_trials(index) >= trials > below.most_trials(index)


def test_without_a_quality_suite_extra_rounds_leave_only_the_reports_reserve() -> None:
    assert (reserve_for(True), reserve_for(False)) == (RESERVE_FRACTION, REPORT_RESERVE_FRACTION)
    deadline = 160 / (1 - REPORT_RESERVE_FRACTION)
    assert extra_round_fits(100, 40, deadline, REPORT_RESERVE_FRACTION)
    assert not extra_round_fits(100.01, 40, deadline, REPORT_RESERVE_FRACTION)
    assert not extra_round_fits(100, 40, deadline)  # the suite's reserve refuses that round
    # the H200 A/A spec at timeoutSeconds 560 (bench deadline 530): each level may get 8
    # trials, not 5
    plan = {"levels": 2, "seconds_per_level": 20, "servers": 2, "trials": 3, "max_trials": 10}
    assert SweepBudget(530, **plan).most_trials(1) == 5
    assert SweepBudget(530, **plan, reserve=REPORT_RESERVE_FRACTION).most_trials(1) == 8


def test_the_plan_check_knows_whether_a_suite_runs_after_the_sweep() -> None:
    # 4 req/s: 80 requests a trial, so the extra rounds the suite's reserve refuses decide
    limits = {"ttftMs": {"p99": 1000}}
    with_suite = gate(timeout=520, slo=limits, rates=[4, 24])
    spec = with_suite.model_dump(by_alias=True)
    spec["suite"] = {"builtin": "none"}
    without = GateSpec.model_validate(spec)
    assert [s.where for s in shortfalls(with_suite, 490, servers=2)] == ["at 4 req/s"]
    assert shortfalls(without, 490, servers=2) == []
    spec["suite"] = {"builtin": "none", "configMap": "suite"}  # a suite of the team's own
    assert shortfalls(GateSpec.model_validate(spec), 490, servers=2) != []
