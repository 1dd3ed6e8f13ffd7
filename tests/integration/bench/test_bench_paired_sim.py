"""Acceptance of the noisy gate: `vllm-operator bench --baseline-url` against simulator processes.

Time-scaled (0.1) so each run takes a few seconds; the figures the gate compares are
relative, so scaling time changes nothing it decides.
"""

from __future__ import annotations

import json
import random
import urllib.request
from pathlib import Path

import pytest
from bench_simproc import StartSim
from test_bench_cli_sim import bench

from vllm_operator.api.summary import BenchSummary
from vllm_operator.sim.noise import PRESETS, Noise, NoiseState

# Verdicts on measured latency and rates: in the timing phase, alone (conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.timing]

SCALE = ["--sim-time-scale", "0.1"]
PAIRED = [
    "--prompt-classes", "medium", "--iterations", "3", "--concurrency", "1,2,4,8",
    "--requests-per-stream", "2", "--trials", "3", "--suite", "builtin:none",
    "--thresholds-json", '{"maxRegressionPercent": 10}', "--deadline-seconds", "120",
]  # fmt: skip


def run(tmp_path: Path, *args: str) -> tuple[int, BenchSummary]:
    path = tmp_path / "summary.json"
    done = bench(*args, "--summary-path", str(path), "--output", "jsonl")
    assert done.returncode in (0, 1, 3), done.stderr[-2000:]
    return done.returncode, BenchSummary.model_validate_json(path.read_text())


def stalls(url: str) -> list[int]:
    with urllib.request.urlopen(f"{url}/sim/config", timeout=5) as resp:
        return list(json.load(resp)["noise"]["stalled_buckets"])


def test_same_profile_is_passed_or_inconclusive_never_failed(sim: StartSim, tmp_path: Path) -> None:
    a, b = sim(*SCALE, "--sim-jitter", "1"), sim(*SCALE, "--sim-jitter", "1")
    code, summary = run(tmp_path, "--url", a, "--baseline-url", b, *PAIRED)
    assert summary.verdict in ("Passed", "Inconclusive"), summary.reasons
    assert code == (0 if summary.verdict == "Passed" else 1)
    assert summary.paired_baseline is not None
    assert all(len(f.trials) == 3 for f in [*summary.concurrency, *summary.latency])
    assert any("paired, 3 trials" in r for r in summary.reasons)


def test_a_candidate_at_07_speed_fails_naming_figures_and_interval(
    sim: StartSim, tmp_path: Path
) -> None:
    a, b = sim(*SCALE, "--sim-speed", "0.7"), sim(*SCALE)
    code, summary = run(tmp_path, "--url", a, "--baseline-url", b, *PAIRED)
    assert (code, summary.verdict) == (1, "Failed"), summary.reasons
    failed = [r for r in summary.reasons if r.endswith("regression beyond the limit")]
    assert len(failed) == 5, summary.reasons  # medium latency and all four levels
    latency = next(r for r in failed if r.startswith("medium prompts, median latency:"))
    assert "% vs baseline" in latency
    assert "(95% interval +" in latency
    assert "limit +10%" in latency
    assert any(r.startswith("8 streams:") and "limit -10%" in r for r in failed)


def _levels(summary: BenchSummary) -> dict[int, float]:
    return {f.concurrency: f.aggregate_tokens_per_second for f in summary.concurrency}


def test_jit_stalls_of_a_fresh_server_are_absorbed_by_the_warm_up(
    sim: StartSim, tmp_path: Path
) -> None:
    single = [
        "--prompt-classes", "medium", "--iterations", "3", "--concurrency", "1,2,4,8",
        "--requests-per-stream", "2", "--trials", "1", "--suite", "builtin:none",
    ]  # fmt: skip
    quiet = _levels(run(tmp_path, "--url", sim(*SCALE), *single)[1])
    stalled_url = sim(*SCALE, "--sim-jit-stall-ms", "2000")
    warmed = _levels(run(tmp_path, "--url", stalled_url, *single)[1])
    assert stalls(stalled_url) == [1, 2, 4, 8]  # every bucket did stall, in the warm-ups
    for level, figure in quiet.items():
        assert warmed[level] == pytest.approx(figure, rel=0.15), level
    # the same fresh server without the warm-up: the stalls fall inside measured levels
    # a longer stall than above: on a loaded machine every level runs longer, and a 2 s
    # stall then cost the level only 39% (0.606 against the 0.6 asserted below)
    cold_url = sim(*SCALE, "--sim-jit-stall-ms", "4000")
    no_warmup = ("--warmup", "0", "--settle-max-passes", "0")
    cold = _levels(run(tmp_path, "--url", cold_url, *single[:-2], *no_warmup)[1])
    assert min(cold[level] / quiet[level] for level in quiet) < 0.6


def _seed_stalling(buckets: set[int]) -> int:
    """A --sim-seed whose h200-noisy start compiles exactly ``buckets`` of 1, 2, 4, 8."""
    chance = float(str(PRESETS["h200-noisy"]["jit-stall-chance"]))
    for seed in range(1000):
        state = NoiseState(Noise(jit_stall_ms=1, jit_stall_chance=chance), random.Random(seed))
        for size in (1, 2, 4, 8):
            state.on_batch(size, now=0.0, scale=1.0)
        if set(state.stalls) == buckets:
            return seed
    raise AssertionError(buckets)


def test_h200_a_a_sequence_on_two_fresh_starts_is_not_failed(sim: StartSim, tmp_path: Path) -> None:
    # As on the H200: start 1 compiled during the 2- and 4-stream levels, start 2 during 4, 8.
    # Buckets are drawn on first use; the latency phase always uses bucket 1 first.
    first = sim(*SCALE, "--sim-preset", "h200-noisy", "--sim-seed", str(_seed_stalling({2, 4})))
    stored = tmp_path / "start1.json"
    one = bench("--url", first, *PAIRED, "--summary-path", str(stored), "--output", "jsonl")
    assert one.returncode in (0, 1), one.stderr[-2000:]  # no baseline: Passed, exit 0
    second = sim(*SCALE, "--sim-preset", "h200-noisy", "--sim-seed", str(_seed_stalling({4, 8})))
    code, summary = run(tmp_path, "--url", second, "--baseline-json", f"@{stored}", *PAIRED)
    assert (stalls(first), stalls(second)) == ([2, 4], [4, 8])
    assert summary.verdict in ("Passed", "Inconclusive"), summary.reasons
    assert code == (0 if summary.verdict == "Passed" else 1)
    assert any("unpaired, 3/3 trials" in r for r in summary.reasons)
