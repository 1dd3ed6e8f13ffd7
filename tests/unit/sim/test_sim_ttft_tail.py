"""A TTFT tail on the simulator (``--sim-ttft-tail-percent``, ``--sim-ttft-tail-ms``): that
share of requests waits the extra time for its first token, the others none (issue 29's
regression for ``benchmarks/slo_laptop.py``)."""

from __future__ import annotations

import random

import pytest

from vllm_operator.commands.sim import config_from_args
from vllm_operator.sim.noise import Noise, NoiseState


def test_the_tail_share_waits_the_extra_time_and_the_rest_none() -> None:
    state = NoiseState(Noise(ttft_tail_percent=2.0, ttft_tail_ms=3000.0), random.Random(7))
    waits = [state.ttft_tail_ms() for _ in range(20_000)]
    assert set(waits) == {0.0, 3000.0}
    share = waits.count(3000.0) / len(waits)
    assert 0.017 < share < 0.023  # 2%: binomial sd 0.1 percentage point


def test_no_tail_by_default() -> None:
    state = NoiseState(Noise(), random.Random(7))
    assert {state.ttft_tail_ms() for _ in range(100)} == {0.0}


def test_the_knobs_reach_the_config_and_bad_ones_are_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg = config_from_args(
        ["m", "--sim-ttft-tail-percent", "5", "--sim-ttft-tail-ms", "2000"], "sim", {}
    )
    assert (cfg.noise.ttft_tail_percent, cfg.noise.ttft_tail_ms) == (5.0, 2000.0)
    with pytest.raises(Exception, match="2"):
        config_from_args(["m", "--sim-ttft-tail-percent", "101"], "sim", {})
    assert "--sim-ttft-tail-percent" in capsys.readouterr().err
