"""The stated power (issue 40, item 3): the smallest regression the plan detects with 95%
probability moves the right way with every input of the plan, and is what the judge itself
fails at on draws from the same tail model."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from vllm_operator.api.gate_spec import GateSpec
from vllm_operator.api.summary import TrialPlan
from vllm_operator.gate.power import Power, figure_power, plan_power
from vllm_operator.gate.power_noise import DEFAULT_NOISE, NoiseModel, TailNoise
from vllm_operator.gate.tails import Exceedance, judge_share_fixed
from vllm_operator.render.job import bench_deadline


def gate(
    *,
    rates: list[float] | None = None,
    seconds: int = 20,
    trials: int = 3,
    max_trials: int = 10,
    timeout: int = 480,
    confidence: float = 95,
    slo: dict[str, Any] | None = None,
    regression: float | None = 10,
    baseline: str = "twin",
) -> GateSpec:
    return GateSpec.model_validate(
        {
            "trials": trials,
            "maxTrials": max_trials,
            "timeoutSeconds": timeout,
            "baseline": {"mode": baseline},
            "workload": {
                "synthetic": {"inputTokens": {"mean": 512}, "outputTokens": {"mean": 128}},
                "load": {"mode": "rate", "rates": rates or [8, 24], "secondsPerLevel": seconds},
            },
            "thresholds": {
                "maxRegressionPercent": regression,
                "confidencePercent": confidence,
                "slo": slo
                if slo is not None
                else {"ttftMs": {"p99": 1000}, "itlMs": {"p99": 100}, "e2eMs": {"p99": 5000}},
            },
        }
    )


def stated(spec: GateSpec) -> dict[tuple[str, float], float | None]:
    got = plan_power(spec, bench_deadline(spec.timeout_seconds), servers=2)
    return {(p.metric, p.rate): p.detects_ms for p in got}


def number(value: float | None) -> float:
    assert value is not None
    return value


def test_the_kit_plan_states_a_power_for_every_limited_figure_and_level() -> None:
    found = stated(gate())
    assert set(found) == {(m, r) for m in ("ttft", "itl", "e2e") for r in (8.0, 24.0)}
    # every statement lies past the bar's offset (the floor: 10% of 1000 ms for TTFT)
    assert all(number(found[("ttft", r)]) > 100 for r in (8.0, 24.0))
    assert all(number(found[("itl", r)]) > 25 for r in (8.0, 24.0))  # the ITL default 25%


@pytest.mark.parametrize(
    ("smaller", "larger"),
    [
        ({"rates": [9, 24]}, {"rates": [8, 24]}),  # more requests per trial
        ({"seconds": 22}, {"seconds": 20}),  # longer levels
        ({"timeout": 560}, {"timeout": 420}),  # a later deadline: more trials
        ({"confidence": 90}, {"confidence": 95}),  # a looser confidence
        (
            {"slo": {"ttftMs": {"p99": 1000, "regressionFloorPercent": 8}}},
            {"slo": {"ttftMs": {"p99": 1000, "regressionFloorPercent": 10}}},
        ),  # a smaller floor
        (
            {"regression": 10, "slo": {"ttftMs": {"p99": 1000, "regressionFloorPercent": 1}}},
            {"regression": 50, "slo": {"ttftMs": {"p99": 1000, "regressionFloorPercent": 1}}},
        ),  # a relative limit above the floor
    ],
)
def test_each_input_moves_the_stated_regression_the_right_way(
    smaller: dict[str, Any], larger: dict[str, Any]
) -> None:
    low, high = stated(gate(**smaller)), stated(gate(**larger))
    first = next(v for (m, _), v in low.items() if m == "ttft")
    assert number(first) < number(high[("ttft", 8.0)])


def test_more_trials_detect_less_and_fewer_looks_do_not_hurt() -> None:
    noise = DEFAULT_NOISE.figures[("ttft", 24.0)]
    kwargs: dict[str, Any] = {
        "noise": noise,
        "percentile": "p99",
        "observations_per_trial": 480,
        "confidence": 0.95,
        "relative_percent": 10,
        "floor_ms": 100,
    }
    plan = TrialPlan(min_trials=3, max_trials=10)
    by_trials = [number(figure_power(trials=k, plan=plan, **kwargs)) for k in range(3, 11)]
    assert by_trials == sorted(by_trials, reverse=True)
    assert by_trials[-1] < by_trials[0]
    one_look = figure_power(trials=3, plan=TrialPlan(min_trials=3, max_trials=3), **kwargs)
    assert number(one_look) < by_trials[0]  # the 3-trial look at full confidence


def test_a_plan_too_short_for_any_regression_says_so() -> None:
    spec = gate(rates=[1], seconds=1, trials=1, max_trials=1, slo={"ttftMs": {"p99": 1000}})
    (power,) = plan_power(spec, bench_deadline(spec.timeout_seconds), servers=2)
    assert power.detects_ms is None
    assert power.message == "detects no TTFT p99 regression at 1 req/s in 1 trial"


def test_the_message_rounds_up_never_claiming_more_power() -> None:
    assert Power("ttft", "p99", 24, 179.2, 6).message == (
        "detects TTFT p99 +180 ms or more at 24 req/s"
    )
    assert Power("itl", "p99", 8, 4.21, 6).message == "detects ITL p99 +4.3 ms or more at 8 req/s"
    assert Power("e2e", "p99", 8, 1234.5, 6).message == (
        "detects E2E p99 +1,240 ms or more at 8 req/s"
    )


def test_no_statement_without_a_paired_comparison() -> None:
    assert stated(gate(regression=None)) == {}
    spec = gate(baseline="stored")
    assert plan_power(spec, bench_deadline(480), servers=1) == []


def test_a_rate_between_fitted_ones_takes_the_nearest_on_a_log_scale() -> None:
    assert DEFAULT_NOISE.at("ttft", 13) is DEFAULT_NOISE.figures[("ttft", 8.0)]
    assert DEFAULT_NOISE.at("ttft", 14) is DEFAULT_NOISE.figures[("ttft", 24.0)]
    assert NoiseModel({}).at("ttft", 8) is None


def shifted_trial(
    rng: random.Random, noise: TailNoise, n: int, bar: float, shift: float
) -> Exceedance:
    """One trial of ``n`` observations on the model's log-normal tail, shifted by ``shift``
    ms: how many lie above ``bar`` (independent draws: design effect 1)."""
    z99 = 2.3263478740408408
    above = 0
    for _ in range(n):
        value = noise.p99_ms * math.exp(noise.tail_sigma * (rng.gauss(0, 1) - z99)) + shift
        above += value > bar
    return Exceedance(float(above), float(n))


@pytest.mark.parametrize("scale", [1.0, 0.6])
def test_the_judge_fails_the_stated_regression_95_percent_of_the_time(scale: float) -> None:
    """On draws from the model itself (across 1, within 1, one look of 4 trials of 400),
    the tails judge fails a candidate shifted by the stated amount at least 95% of the time,
    and one shifted by well under it (60% of the way past the bar) far less often."""
    noise = TailNoise(100.0, 0.3, 1.0, 1.0)
    plan = TrialPlan(min_trials=4, max_trials=4)
    floor = 50.0
    power = number(
        figure_power(
            noise=noise,
            percentile="p99",
            observations_per_trial=400,
            trials=4,
            confidence=0.95,
            plan=plan,
            relative_percent=10,
            floor_ms=floor,
        )
    )
    shift = floor + scale * (power - floor)
    rng = random.Random(40)
    gates = 300
    failed = 0
    for _ in range(gates):
        trials = [shifted_trial(rng, noise, 400, 100.0 + floor, shift) for _ in range(4)]
        failed += judge_share_fixed(trials, 0.01, 0.95, 1.0, None).decision == "beyond"
    if scale == 1.0:
        assert failed / gates >= 0.95
    else:
        assert failed / gates < 0.8
