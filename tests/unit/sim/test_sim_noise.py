"""Simulator noise: buckets, one stall per bucket, per-start draws, presets on the command line."""

from __future__ import annotations

import random

import pytest

from vllm_operator.commands.sim import config_from_args
from vllm_operator.sim.noise import Noise, NoiseState, bucket


def test_buckets_are_powers_of_two() -> None:
    assert [bucket(n) for n in (1, 2, 3, 4, 5, 8, 9)] == [1, 2, 4, 4, 8, 8, 16]


def test_each_bucket_stalls_once_and_the_stall_adds_up() -> None:
    state = NoiseState(Noise(jit_stall_ms=1000), random.Random(1))
    state.on_batch(1, now=10.0, scale=0.001)
    assert state.stall_until == pytest.approx(11.0)
    state.on_batch(1, now=12.0, scale=0.001)  # same bucket: no second compile
    state.on_batch(2, now=10.5, scale=0.001)  # during the first stall: queued after it
    assert state.stall_until == pytest.approx(12.0)
    state.on_batch(3, now=13.0, scale=0.001)
    state.on_batch(4, now=20.0, scale=0.001)  # 3 and 4 share a bucket
    assert state.stalls == [1, 2, 4]
    assert state.stall_until == pytest.approx(14.0)


def test_quiet_by_default() -> None:
    state = NoiseState(Noise(), random.Random(1))
    state.on_batch(8, now=1.0, scale=1.0)
    assert state.stall_until == 0.0
    assert {state.request_factor() for _ in range(10)} == {1.0}


def test_stalled_buckets_differ_between_starts_unless_seeded() -> None:
    noise = Noise(jit_stall_ms=100, jit_stall_chance=0.5)

    def start(rng: random.Random) -> tuple[int, ...]:
        state = NoiseState(noise, rng)
        for size in (1, 2, 4, 8, 16, 32, 64, 128):
            state.on_batch(size, now=0.0, scale=0.001)
        return tuple(state.stalls)

    assert start(random.Random(7)) == start(random.Random(7))
    assert len({start(random.Random()) for _ in range(20)}) > 1


def test_jitter_is_log_normal_with_the_given_spread() -> None:
    state = NoiseState(Noise(jitter_percent=5), random.Random(3))
    factors = [state.request_factor() for _ in range(4000)]
    mean = sum(factors) / len(factors)
    spread = (sum((f - mean) ** 2 for f in factors) / len(factors)) ** 0.5
    assert mean == pytest.approx(1.0, abs=0.005)
    assert spread == pytest.approx(0.05, rel=0.1)


def test_preset_sets_defaults_and_flags_win() -> None:
    cfg = config_from_args(["m", "--sim-preset", "h200-noisy"], "sim", {})
    assert str(cfg.version) == "0.22.0"
    assert cfg.profile.name == "0.22.0-default"
    assert cfg.noise == Noise(jitter_percent=1.0, jit_stall_ms=1600.0, jit_stall_chance=0.5)
    assert cfg.seed is None
    mine = config_from_args(
        ["m", "--sim-preset", "h200-noisy", "--sim-jitter", "3", "--sim-seed", "5"],
        "sim",
        {"VLLMOP_SIM_JIT_STALL_MS": "10"},
    )
    assert (mine.noise.jitter_percent, mine.noise.jit_stall_ms, mine.seed) == (3.0, 10.0, 5)
    slow = config_from_args(["m", "--sim-speed", "0.7"], "sim", {})
    assert slow.noise.speed == 0.7


@pytest.mark.parametrize(
    "args", [["--sim-preset", "nope"], ["--sim-speed", "0"], ["--sim-jit-stall-chance", "2"]]
)
def test_bad_noise_knobs_are_named(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(Exception, match="2"):
        config_from_args(["m", *args], "sim", {})
    assert args[0] in capsys.readouterr().err
