"""benchmarks/gate_noise.py's pure part: the refitted H200 noise model through the real gate.

Small (40 gates a cell) and deterministic (seeded), with margins wide enough for 40 draws:
the full 2,000-gate figures are in benchmarks/results/gate_noise.json.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from vllm_operator.api.summary import TrialPlan

# Module fixtures computed once: all of its tests in one worker (conftest.py).
pytestmark = pytest.mark.xdist_group("gate-noise-model")

ROOT = Path(__file__).resolve().parents[3]
GATES = 40


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gate_noise", ROOT / "benchmarks/gate_noise.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gate_noise"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gn() -> ModuleType:
    return load()


@pytest.fixture(scope="module")
def sequential(gn: ModuleType) -> dict[str, Any]:
    rates: dict[str, Any] = gn.run_model(GATES)
    return rates


def test_every_cell_is_there_and_its_rates_add_up(
    gn: ModuleType, sequential: dict[str, Any]
) -> None:
    assert set(sequential) == {f"{m}/{s}" for m in gn.MODES for s in gn.SCENARIOS}
    for key, r in sequential.items():
        assert r["gates"] == GATES
        total = r["Failed"] + r["Inconclusive"] + r["Passed"] + r["Error"]
        assert total == pytest.approx(1.0), key
        assert r["Error"] == 0, key


def test_the_sequential_gate_passes_identical_twins_and_fails_a_real_regression(
    sequential: dict[str, Any],
) -> None:
    aa = sequential["twin/A/A"]
    assert aa["Passed"] >= 0.85, aa  # 96% at 2,000 gates
    assert aa["Failed"] == 0, aa
    assert sequential["twin/5% slower"]["Failed"] <= 0.1, sequential["twin/5% slower"]
    assert sequential["twin/20% slower"]["Failed"] >= 0.95, sequential["twin/20% slower"]
    assert sequential["stored/20% slower"]["Failed"] >= 0.95
    assert aa["most_trials_median"] > 3  # the noisy figures took extra rounds
    assert aa["seconds_median"] <= 2 * aa["today_seconds"], aa


def test_a_fixed_three_trials_on_the_same_model_is_mostly_inconclusive_for_twins(
    gn: ModuleType, sequential: dict[str, Any]
) -> None:
    fixed = gn.run_model(GATES, plan=TrialPlan(min_trials=3, max_trials=3))
    aa = fixed["twin/A/A"]
    assert aa["Inconclusive"] >= 0.8, aa  # what the H200 showed: 7 of 7
    assert aa["Passed"] < sequential["twin/A/A"]["Passed"] - 0.5
    assert aa["most_trials_median"] == 3
    assert fixed["twin/20% slower"]["Failed"] >= 0.95


def test_targets_check_the_twin_mode_only(gn: ModuleType, sequential: dict[str, Any]) -> None:
    checks = gn.targets(sequential)
    assert checks
    assert all(k.startswith("twin: ") for k in checks)
    bad = dict(sequential)
    bad["twin/A/A"] = {**sequential["twin/A/A"], "Passed": 0.5}
    assert not gn.targets(bad)["twin: A/A Passed >= 95%"]
    bad["twin/A/A"] = {**sequential["twin/A/A"], "Failed": 0.02}
    assert not gn.targets(bad)["twin: A/A Failed <= 1%"]
