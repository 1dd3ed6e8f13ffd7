"""Smoke test of benchmarks/gate_noise.py's pure part: the noise model through the real gate."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gate_noise", ROOT / "benchmarks/gate_noise.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gate_noise"] = module
    spec.loader.exec_module(module)
    return module


def test_model_rates_meet_the_targets_on_a_small_sample() -> None:
    gn = load()
    rates = gn.run_model(60)
    assert set(rates) == {f"{m}/{s}" for m in gn.MODES for s in gn.SCENARIOS}
    assert all(gn.targets(rates).values()), rates
    for key, r in rates.items():
        assert r["Failed"] + r["Inconclusive"] + r["Passed"] + r["Error"] == 1.0, key


def test_the_old_single_trial_gate_rejects_identical_revisions() -> None:
    gn = load()
    before = gn.run_model(60, noise=gn.NoiseModel(jit_chance=0.5), trials=1)
    assert before["stored/A/A"]["Failed"] > 0.5  # what the H200 A/A run showed
    assert not all(gn.targets(before).values())
