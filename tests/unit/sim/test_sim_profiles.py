"""Timing profiles: selection by version and mode, and the model's shape."""

from __future__ import annotations

import pytest

from vllm_operator.bench.prompts import SIZES
from vllm_operator.engine.version import v
from vllm_operator.sim import profiles
from vllm_operator.sim.config import SimConfig

TABLE = profiles.load_profiles()


@pytest.mark.parametrize(
    ("version", "mode", "expected"),
    [
        ("0.16.0", "eager", "0.16.0-eager"),
        ("0.17.0", "eager", "0.17.0-eager"),
        ("0.17.1", "throughput", "0.17.0-throughput"),
        ("0.17.0", "default", "0.17.0-default"),
        ("0.16.0", "default", "0.16.0-default"),
        ("0.22.0", "eager", "0.22.0-eager"),
        ("0.33.0", "throughput", "0.22.0-default"),  # throughput only raises batch limits
        ("0.12.0", "eager", "0.16.0-eager"),  # older than every profile: the oldest
    ],
)
def test_profile_follows_version_and_mode(version: str, mode: str, expected: str) -> None:
    assert profiles.choose(TABLE, v(version), mode).name == expected


@pytest.mark.parametrize(
    ("eager", "level", "perf", "mode"),
    [
        (True, None, "throughput", "eager"),
        (False, "0", None, "eager"),
        (False, "3", "throughput", "throughput"),
        (False, None, "balanced", "default"),
        (False, None, None, "default"),
    ],
)
def test_launch_mode(eager: bool, level: str | None, perf: str | None, mode: str) -> None:
    got = profiles.mode_of(enforce_eager=eager, optimization_level=level, performance_mode=perf)
    assert got == mode


def test_compiled_warms_up_longer_than_eager() -> None:
    for version in ("0.16.0", "0.17.0", "0.22.0"):
        eager = profiles.choose(TABLE, v(version), "eager")
        compiled = profiles.choose(TABLE, v(version), "default")
        assert compiled.warmup_seconds > 1.5 * eager.warmup_seconds


def test_ttft_grows_with_prompt_and_itl_with_running_requests() -> None:
    p = TABLE["0.17.0-throughput"]
    assert p.ttft_ms(SIZES["long"].prompt_tokens) > p.ttft_ms(SIZES["short"].prompt_tokens)
    assert p.itl_ms_at(8, 300) > p.itl_ms_at(2, 300) > p.itl_ms_at(1, 300)
    assert p.batch_factor(16) > p.batch_factor(8)  # extrapolated past the last point


def test_single_stream_latency_matches_the_published_medium_row() -> None:
    # the model itself, without a server: medium = 256 prompt / 105 output tokens
    published = {"0.16.0-eager": 4602, "0.17.0-eager": 5151, "0.17.0-throughput": 886}
    for name, ms in published.items():
        p = TABLE[name]
        n, prompt = SIZES["medium"].output_tokens, SIZES["medium"].prompt_tokens
        latency = p.ttft_ms(prompt) + sum(p.itl_ms_at(1, prompt + k) for k in range(1, n))
        assert abs(latency / ms - 1) < 0.10, (name, latency)


def test_flat_override_removes_batch_and_context_effects() -> None:
    p = TABLE["0.17.0-eager"].flat(ttft_ms=50, itl_ms=10)
    assert p.ttft_ms(5000) == 50
    assert p.itl_ms_at(64, 9000) == 10


def test_config_scales_warmup_and_doubles_seqs_in_throughput_mode() -> None:
    c = SimConfig.create("m", version="0.22.0", mode="throughput", time_scale=0.01)
    assert c.profile.name == "0.22.0-default"
    assert c.max_num_seqs == 2 * c.profile.max_num_seqs
    assert c.warmup_seconds == pytest.approx(c.profile.warmup_seconds * 0.01)
    assert SimConfig.create("m", warmup_seconds=3.0, time_scale=0.01).warmup_seconds == 3.0
    with pytest.raises(ValueError, match="unknown profile"):
        SimConfig.create("m", profile="nope")
