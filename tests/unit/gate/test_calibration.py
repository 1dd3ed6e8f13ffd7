"""The calibration fit and plan search (``gate.calibration``, ``gate.calibration_plan``) on
figures whose answers are known by hand."""

from __future__ import annotations

import math

import pytest

from vllm_operator.gate.calibration import (
    CalibrationError,
    FigureKey,
    FigureNoise,
    PairedTrial,
    fit_noise,
    floor_percent,
    tail_model,
)
from vllm_operator.gate.calibration_plan import Shape, propose
from vllm_operator.gate.power_noise import DEFAULT_NOISE

ITL24 = FigureKey("itl", "p99", 24.0)


def trials(run: str, diffs: list[float], key: FigureKey = ITL24) -> list[PairedTrial]:
    return [PairedTrial(run, key, 50 + d, 50.0) for d in diffs]


def test_offsets_across_runs_are_the_instance_spread_and_trials_the_within_noise() -> None:
    # Run a: +1, +3 ms (mean +2), run b: -1, -3 (mean -2), limit 100 ms: within-run SD
    # sqrt((1+1+1+1)/2) = sqrt(2); instance^2 = mean(m^2 - within^2/n) = 4 - 1 = 3.
    (noise,) = fit_noise(trials("a", [1, 3]) + trials("b", [-1, -3]), {ITL24: 100.0}, 20)
    assert noise.within == pytest.approx(math.sqrt(2))
    assert noise.instance == pytest.approx(math.sqrt(3))
    assert noise.offsets == pytest.approx((2.0, -2.0))
    assert noise.within_at(80) == pytest.approx(math.sqrt(2) / 2)  # 4x the requests


def test_offsets_no_larger_than_the_noise_explains_give_no_instance_spread() -> None:
    (noise,) = fit_noise(trials("a", [5, -5]) + trials("b", [4, -4]), {ITL24: 100.0}, 20)
    assert noise.instance == 0.0
    assert noise.within > 4


def test_a_figure_one_run_reached_cannot_be_fitted() -> None:
    with pytest.raises(CalibrationError, match="itl p99 at 24: measured against the twin in 1"):
        fit_noise(trials("a", [1, 2]), {ITL24: 100.0}, 20)


def test_runs_of_one_trial_have_no_within_noise() -> None:
    with pytest.raises(CalibrationError, match=r"gate\.trials >= 2"):
        fit_noise(trials("a", [1]) + trials("b", [2]), {ITL24: 100.0}, 20)


def noise(instance: float, within: float, key: FigureKey = ITL24) -> FigureNoise:
    return FigureNoise(key, 100.0, (0.0, 0.0), instance, within, 20.0, 6)


def test_the_floor_grows_with_the_instance_spread_and_shrinks_with_trials() -> None:
    quiet, noisy = noise(1, 5), noise(8, 5)
    assert floor_percent(noisy, 3, 20, 0.95, 4) > floor_percent(quiet, 3, 20, 0.95, 4)
    assert floor_percent(quiet, 6, 20, 0.95, 4) < floor_percent(quiet, 3, 20, 0.95, 4)
    assert floor_percent(quiet, 3, 40, 0.95, 4) < floor_percent(quiet, 3, 20, 0.95, 4)
    # more figures judged at once: each must clear its floor more surely
    assert floor_percent(quiet, 3, 20, 0.95, 8) > floor_percent(quiet, 3, 20, 0.95, 4)


def test_the_power_model_takes_the_twins_tail_and_keeps_the_default_design_effects() -> None:
    # p95 50, p99 100 ms: ln 2 over the 0.68 normal scores between them; medians of 3 trials
    twin = {("itl", 24.0): [(50.0, 100.0), (40.0, 80.0), (60.0, 120.0)],
            ("ttft", 24.0): [(0.0, 10.0)]}  # fmt: skip
    fitted = tail_model(twin, DEFAULT_NOISE)
    itl = fitted.at("itl", 24.0)
    assert itl is not None
    assert itl.p99_ms == 100.0
    assert itl.tail_sigma == pytest.approx(math.log(2) / (2.3263478740408408 - 1.6448536269514722))
    default = DEFAULT_NOISE.at("itl", 24.0)
    assert default is not None
    assert (itl.across, itl.within) == (default.across, default.within)
    assert fitted.at("ttft", 24.0) is None  # no usable tail: no model, no stated power


def shape(deadline: float, rate: float = 24.0) -> Shape:
    return Shape(
        levels=(8.0, 24.0),
        requests_per_second={8.0: 8.0, 24.0: rate},
        gaps_per_request=127.0,
        max_trials=10,
        confidence=0.95,
        deadline_seconds=deadline,
        shortest_seconds=20,
    )


FIGURES = [noise(3.5, 7.5), noise(0, 2.6, FigureKey("ttft", "p99", 24.0)),
           noise(0, 1.7, FigureKey("ttft", "p99", 8.0))]  # fmt: skip


def test_the_plan_fits_the_deadline_and_a_longer_one_never_asks_larger_floors() -> None:
    short, long = propose(FIGURES, shape(450)), propose(FIGURES, shape(1800))
    for p in (short, long):
        assert set(p.floors) == {"itl", "ttft"}
        assert p.seconds_per_level >= 20
        # the first look of both levels on both servers, warm-ups included, fits
        assert 2 * (2 * 10 + p.trials * 2 * p.seconds_per_level) <= 450 or p is long
    assert all(long.floors[m] <= short.floors[m] for m in short.floors)
    assert sum(long.floors.values()) < sum(short.floors.values())
    for f in short.figures:
        assert f.floor <= short.floors[f.noise.key.metric]


def test_a_deadline_too_short_for_any_plan_says_what_to_raise() -> None:
    with pytest.raises(CalibrationError, match="raise --timeout-seconds"):
        propose(FIGURES, shape(60))


def test_a_level_too_slow_to_show_a_p99_met_gets_a_longer_plan() -> None:
    # 1 request/s at 24: a p99 needs hundreds of requests at its look
    slow = Shape(
        levels=(24.0,), requests_per_second={24.0: 1.0}, gaps_per_request=None,
        max_trials=10, confidence=0.95, deadline_seconds=3000, shortest_seconds=20,
    )  # fmt: skip
    p = propose([noise(0, 2.6, FigureKey("ttft", "p99", 24.0))], slow)
    assert p.trials * p.seconds_per_level * 1.0 >= 368
