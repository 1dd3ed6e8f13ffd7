"""In-cluster calibration's pure parts: the annotation's value, a Job summary's runs, and the
proposal fitted from them (``rollout.calibration``, ``rollout.calibration_fit``), on the
recorded GPU summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from vllm_operator.api.gate_spec import GateSpec
from vllm_operator.api.summary import BenchSummary
from vllm_operator.gate.calibration import CalibrationError
from vllm_operator.render.labels import CALIBRATE_ANNOTATION
from vllm_operator.rollout.calibration import requested_runs
from vllm_operator.rollout.calibration_fit import proposal_of, run_of

CALIBRATION = Path(__file__).resolve().parents[3] / "docs" / "calibration"
SUMMARIES = [
    CALIBRATION / "h200-slo-bars-2026-12-02" / "summary-aa1.json",
    CALIBRATION / "h200-slo-bars-2026-12-02" / "summary-aa2.json",
    CALIBRATION / "h100-2026-12-07" / "summary-aa1.json",
    CALIBRATION / "h100-2026-12-07" / "summary-aa2.json",
]
KIT_CR = CALIBRATION / "h200-tails-2026-12-02" / "gpu-slo-aa.yaml"


def summary(path: Path) -> BenchSummary:
    return BenchSummary.model_validate(json.loads(path.read_text()))


def kit_gate() -> GateSpec:
    return GateSpec.model_validate(yaml.safe_load(KIT_CR.read_text())["spec"]["gate"])


@pytest.mark.parametrize(("raw", "runs"), [("3", 3), (" 20 ", 20), ("1", 1)])
def test_a_run_count_from_1_to_20_is_taken(raw: str, runs: int) -> None:
    assert requested_runs(raw) == runs


@pytest.mark.parametrize("raw", ["0", "21", "-1", "three", "", "3.5", "1e1", "٣"])
def test_any_other_value_is_refused_naming_the_annotation(raw: str) -> None:
    why = requested_runs(raw)
    assert isinstance(why, str)
    assert f"annotation {CALIBRATE_ANNOTATION}={raw!r}" in why
    assert "a whole number from 1 to 20" in why


def test_a_summarys_run_pairs_each_trial_with_the_twins() -> None:
    run = run_of(summary(SUMMARIES[2]), "job-1", 20)
    assert run is not None
    assert run.candidate["ttft.p99@8"] == [63.1, 71.8, 68.1, 72.2, 59.1]
    assert len(run.twin["ttft.p99@8"]) == 5
    assert set(run.candidate) == {"ttft.p99@8", "ttft.p99@24", "itl.p99@8", "itl.p99@24"}
    assert run.rates["8"] == pytest.approx(8.0)  # 800 requests over 5 trials of 20 s
    assert run.rates["24"] == pytest.approx(24.0)


def test_a_summary_without_a_twin_has_no_run() -> None:
    alone = summary(SUMMARIES[0]).model_copy(update={"paired_baseline": None})
    assert run_of(alone, "job-1", 20) is None


def test_the_shared_aa_summaries_give_the_calibrate_commands_model_floors() -> None:
    runs = [run_of(summary(p), f"job-{i}", 20) for i, p in enumerate(SUMMARIES)]
    proposal = proposal_of([r for r in runs if r is not None], kit_gate())
    # what `vllm-operator calibrate` fits from the full reports before its replays
    assert proposal.floors == {"itl": 21, "ttft": 6}
    assert (proposal.trials, proposal.seconds_per_level) == (5, 20)
    # gate.power's statement per limited figure and level (its wording is gate.power's)
    assert len(proposal.power) == 4
    assert all(p.startswith("detects ") for p in proposal.power)
    patch = yaml.safe_load(proposal.patch)
    assert patch["spec"]["gate"]["thresholds"]["slo"]["itlMs"] == {"regressionFloorPercent": 21}


def test_one_run_cannot_be_fitted() -> None:
    run = run_of(summary(SUMMARIES[0]), "job-1", 20)
    assert run is not None
    with pytest.raises(CalibrationError, match="two or more A/A runs"):
        proposal_of([run], kit_gate())
