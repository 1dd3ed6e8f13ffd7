"""benchmarks/tail_noise.py's model against the recorded A/A GPU runs it is fitted on (issue 40).

The SLO noise model once drew tails the cards never showed (pooled tail shapes; ITL gaps past
the p99 on the p95-p99 slope), and its A/A gates stayed undecided on the twin where the cards
Passed. These check the modelled tails against the recorded ones, and that the benchmark's
faster clustering estimate is the gate's own. Seeded; a few hundred draws, wide margins.
"""

from __future__ import annotations

import importlib.util
import math
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]


def load() -> ModuleType:
    path = ROOT / "benchmarks/tail_noise.py"
    spec = importlib.util.spec_from_file_location("tail_noise", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tail_noise"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tn() -> ModuleType:
    return load()


@pytest.fixture(scope="module")
def fitted(tn: ModuleType) -> tuple[Any, Any]:
    runs = tn.load_runs()
    models = tn.Models(
        {level: tn.fit_ttft(runs, level) for level in tn.LEVELS},
        {level: tn.fit_itl(runs, level) for level in tn.LEVELS},
        {level: tn.fit_ttft(runs, level, "e2e") for level in tn.LEVELS},
    )
    return runs, models


def test_the_run_length_clustering_is_the_gates_own(tn: ModuleType, fitted: Any) -> None:
    _, models = fitted
    assert tn.check_clustering(random.Random(3), models) == 0


@pytest.mark.parametrize("level", [8.0, 24.0])
def test_modelled_gaps_above_the_itl_limit_are_as_rare_as_recorded(
    tn: ModuleType, fitted: Any, level: float
) -> None:
    """Recorded: 4-6 gaps in a million above 100 ms; the slope-extended model had 1-2 in a
    thousand, which kept A/A gates undecided on the ITL limit."""
    runs, models = fitted
    kept = [r for r in runs if r.level == level and r.itl_above_p99]
    gaps = sum(len(r.ttft) * (tn.OUTPUT_TOKENS - 1) for r in kept)
    above = sum(sum(1 for x in r.itl_above_p99 if x > math.log(100 / r.itl["p99"])) for r in kept)
    rng = random.Random(5)
    n = int(level * tn.SECONDS) * (tn.OUTPUT_TOKENS - 1)
    counted = [
        tn.itl_trial(rng, models.itl[level], n, (rng.random(), rng.random()), tn.Change())
        for _ in range(300)
    ]
    modelled = sum(c.exceedance(100.0).above for c in counted) / (300 * n)
    recorded = above / gaps
    assert recorded > 0
    assert recorded / 4 < modelled < recorded * 4


@pytest.mark.parametrize("level", [8.0, 24.0])
def test_a_modelled_trials_slowest_request_is_as_close_to_its_p99_as_recorded(
    tn: ModuleType, fitted: Any, level: float
) -> None:
    """The 90th percentile over trials of (slowest TTFT / TTFT p99): recorded 1.26-1.29;
    with every run's tail pooled the model drew 1.52-1.63, requests above the twin's bars
    that the cards never showed."""
    runs, models = fitted
    at = [r for r in runs if r.level == level]

    def ratio(values: Any) -> float:
        return float(values[-1] / tn.quantile(values, 0.99))

    recorded = tn.quantile(sorted(ratio(r.ttft) for r in at), 0.9)
    rng = random.Random(7)
    modelled = sorted(
        ratio(
            tn.ttft_trial(
                rng,
                models.ttft[level],
                len(at[0].ttft),
                (rng.gauss(0, 1), rng.gauss(0, 1), rng.random()),
                tn.Change(),
            ).values
        )
        for _ in range(600)
    )
    assert tn.quantile(modelled, 0.9) < recorded * 1.12
