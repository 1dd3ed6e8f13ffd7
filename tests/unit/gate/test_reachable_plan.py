"""The trial plan cut to the trials its deadline can give (issue 40: the A/A row).

The looks' error rate is split over the plan's looks, half of it kept for the look at
``maxTrials`` (``gate.sequential``). The kit's plan (8 and 24 req/s, 20 s a level, 3-10
trials, timeoutSeconds 480, a twin) reaches 6 trials at most: uncut, every look it takes is
judged at 1 - 0.025/7 and the half kept for trial 10 is never spent. Cut to 3-6
(``gate.budget.reachable_plan``), the same 5% goes to the 4 looks it can take. The bench
(``BenchConfig.plan``) and the operator (``gate.decidable.gate_plan``) cut alike, and the
bench is held to the cut, so the union bound over the looks still holds.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from vllm_operator.api.gate_spec import GateSpec
from vllm_operator.api.summary import TrialPlan
from vllm_operator.bench.config import BenchConfig
from vllm_operator.gate.budget import (
    REPORT_RESERVE_FRACTION,
    RESERVE_FRACTION,
    SweepBudget,
    reachable_plan,
)
from vllm_operator.gate.decidable import gate_plan
from vllm_operator.gate.sequential import look_confidence
from vllm_operator.render.job import bench_deadline

KIT = {"levels": 2, "seconds_per_level": 20, "servers": 2, "trials": 3, "max_trials": 10}


def kit_spec(timeout: int = 480, **extra: Any) -> GateSpec:
    return GateSpec.model_validate(
        {
            "trials": 3,
            "maxTrials": 10,
            "timeoutSeconds": timeout,
            "suite": {"builtin": "none"},
            "baseline": {"mode": "twin"},
            "workload": {
                "synthetic": {"inputTokens": {"mean": 512}, "outputTokens": {"mean": 128}},
                "load": {"mode": "rate", "rates": [8, 24], "secondsPerLevel": 20},
            },
            "thresholds": {
                "maxRegressionPercent": 10,
                "slo": {"ttftMs": {"p99": 1000}, "itlMs": {"p99": 100}},
            },
            **extra,
        }
    )


def test_the_kits_plan_is_cut_to_the_six_trials_its_deadline_gives() -> None:
    budget = SweepBudget(450, **KIT, reserve=REPORT_RESERVE_FRACTION)
    assert [budget.most_trials(i) for i in range(2)] == [6, 6]
    plan = reachable_plan(budget)
    assert plan == TrialPlan(min_trials=3, max_trials=6)
    assert plan.looks == 4
    # every look it takes is judged wider than the uncut plan's 1 - 0.025/7
    uncut = TrialPlan(min_trials=3, max_trials=10)
    for trials in (3, 4, 5):
        assert look_confidence(0.95, plan, trials) == pytest.approx(1 - 0.025 / 3)
        assert look_confidence(0.95, uncut, trials) == pytest.approx(1 - 0.025 / 7)
    assert look_confidence(0.95, plan, 6) == pytest.approx(0.975)
    assert look_confidence(0.95, uncut, 6) == pytest.approx(1 - 0.025 / 7)


def test_a_deadline_that_reaches_max_trials_leaves_the_plan_whole() -> None:
    assert reachable_plan(SweepBudget(3000, **KIT)) == TrialPlan(min_trials=3, max_trials=10)


def test_a_deadline_short_of_the_first_look_leaves_one_look() -> None:
    budget = SweepBudget(100, **KIT)
    assert budget.most_trials(0) < 3
    assert reachable_plan(budget) == TrialPlan(min_trials=3, max_trials=3)
    assert look_confidence(0.95, reachable_plan(budget), 2) == 0.95


def test_the_cut_never_takes_a_trial_the_budget_gives_and_spends_exactly_the_error() -> None:
    rng = random.Random(40)
    for _ in range(2_000):
        trials = rng.randint(1, 5)
        budget = SweepBudget(
            deadline=rng.uniform(10, 3000),
            levels=rng.randint(1, 4),
            seconds_per_level=rng.choice([5, 10, 20, 30, 60]),
            servers=rng.choice([1, 2]),
            trials=trials,
            max_trials=rng.randint(trials, 10),
            warmup=rng.random() < 0.8,
            reserve=rng.choice([REPORT_RESERVE_FRACTION, RESERVE_FRACTION]),
        )
        plan = reachable_plan(budget)
        most = max(budget.most_trials(i) for i in range(budget.levels))
        assert plan.min_trials == budget.trials
        assert plan.max_trials == max(budget.trials, min(budget.max_trials, most))
        # the union bound: the looks the plan can take share exactly 1 - confidence
        spent = sum(1 - look_confidence(0.95, plan, t) for t in range(plan.min_trials, most + 1))
        assert spent <= 0.05 + 1e-12
        if plan.looks > 1 and most >= plan.max_trials:
            assert spent == pytest.approx(0.05)


def test_the_operator_cuts_as_the_bench_does() -> None:
    spec = kit_spec()
    deadline = bench_deadline(spec.timeout_seconds)
    assert gate_plan(spec, deadline, 2) == TrialPlan(min_trials=3, max_trials=6)
    config = BenchConfig(
        url="http://c:8000",
        model="m",
        baseline_url="http://b:8000",
        workload=spec.workload,
        deadline_seconds=deadline,
        trials=spec.trials,
        max_trials=spec.max_trials,
    )
    assert config.plan == gate_plan(spec, deadline, 2)
    # a stored baseline halves every round: more trials fit, the plan is cut later
    alone = BenchConfig(**{**vars(config), "baseline_url": None})
    assert alone.plan == gate_plan(spec, deadline, 1)
    assert alone.plan.max_trials > config.plan.max_trials
    # the bench's quality suite keeps a larger reserve, as the operator's spec says
    with_suite = kit_spec(suite={"builtin": "none", "configMap": "suite"})
    assert gate_plan(with_suite, deadline, 2).max_trials < 6


def test_a_study_gate_keeps_its_plan() -> None:
    spec = GateSpec.model_validate({"trials": 3, "maxTrials": 10, "timeoutSeconds": 200})
    assert spec.workload.is_study
    assert gate_plan(spec, 170, 2) == TrialPlan(min_trials=3, max_trials=10)
    study = BenchConfig(url="http://c:8000", model="m", trials=3, max_trials=10, deadline_seconds=9)
    assert study.plan == TrialPlan(min_trials=3, max_trials=10)


def test_a_sweep_without_levels_is_its_first_look() -> None:
    assert reachable_plan(SweepBudget(450, **{**KIT, "levels": 0})) == TrialPlan(
        min_trials=3, max_trials=3
    )


def spec_at(timeout: int, rates: list[float], seconds: int = 20, max_trials: int = 10) -> GateSpec:
    return GateSpec.model_validate(
        {
            "trials": 3,
            "maxTrials": max_trials,
            "timeoutSeconds": timeout,
            "workload": {
                "synthetic": {"inputTokens": {"mean": 512}, "outputTokens": {"mean": 128}},
                "load": {"mode": "rate", "rates": rates, "secondsPerLevel": seconds},
            },
            "thresholds": {"slo": {"ttftMs": {"p99": 1000}}},
        }
    )


def test_the_timeout_a_warning_names_decides_at_the_look_of_the_plan_cut_there() -> None:
    # 4 req/s, 80 requests a trial: 5 trials bring 400 (enough at 95%, 368), but at the
    # deadline that gives 5 the plan is cut to 3-5 and its last look needs 437: 6 trials
    from vllm_operator.gate.decidable import shortfalls

    def short(timeout: int) -> list[Any]:
        return shortfalls(spec_at(timeout, [4]), timeout - 30, servers=2, margin_seconds=30)

    (found,) = short(300)
    assert found.timeout_needed is not None
    fix = found.timeout_needed
    assert short(fix) == []
    assert len(short(fix - 1)) == 1
    budget = SweepBudget(fix - 30, **{**KIT, "levels": 1})
    assert budget.most_trials(0) == 6
    assert reachable_plan(budget) == TrialPlan(min_trials=3, max_trials=6)
    # the same at every timeout that warns, and with maxTrials the only trials that decide
    for timeout in range(100, 420, 9):
        for f in short(timeout):
            assert f.timeout_needed is not None
            assert short(f.timeout_needed) == []
            assert len(short(f.timeout_needed - 1)) == 1
    tight = shortfalls(spec_at(200, [4], max_trials=6), 170, servers=2, margin_seconds=30)
    assert [f.timeout_needed for f in tight] == [fix]


def test_when_max_trials_are_too_few_the_warning_names_the_level_length_and_its_timeout() -> None:
    from vllm_operator.gate.decidable import shortfalls

    # 1 req/s: 10 trials of 20 s bring 200 requests; the last look of 3-10 needs 437
    (found,) = shortfalls(spec_at(3600, [1]), 3570, servers=2, margin_seconds=30)
    assert found.seconds_per_level_needed == 44  # 437 / 10, rounded up
    timeout = found.timeout_needed
    assert timeout is not None
    assert shortfalls(spec_at(timeout, [1], seconds=44), timeout - 30, servers=2) == []
    assert shortfalls(spec_at(timeout - 1, [1], seconds=44), timeout - 31, servers=2) != []
    assert shortfalls(spec_at(timeout, [1], seconds=43), timeout - 30, servers=2) != []


def test_a_limit_no_plan_can_decide_names_no_fix() -> None:
    from vllm_operator.gate.decidable import shortfalls

    # one output token a request: no gap between chunks, an ITL limit never has one to count
    spec = GateSpec.model_validate(
        {
            "trials": 3,
            "maxTrials": 10,
            "timeoutSeconds": 480,
            "workload": {
                "synthetic": {"inputTokens": {"mean": 512}, "outputTokens": {"mean": 1}},
                "load": {"mode": "rate", "rates": [8], "secondsPerLevel": 20},
            },
            "thresholds": {"slo": {"itlMs": {"p99": 100}}},
        }
    )
    (found,) = shortfalls(spec, 450, servers=2)
    assert (found.timeout_needed, found.seconds_per_level_needed) == (None, None)
