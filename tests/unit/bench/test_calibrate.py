"""`vllm-operator calibrate` over the recorded GPU A/A reports (issue 40, item 4): it prints
floors and power, and its patch applied to the kit's SLO CR makes every A/A report Passed and
the ``--max-num-seqs 4`` regressions Failed when replayed through ``judge --report``."""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from vllm_operator.commands import calibrate as calibrate_mod
from vllm_operator.commands.calibrate import main as calibrate_main
from vllm_operator.commands.judge import main as judge_main

ROOT = Path(__file__).resolve().parents[3]
CALIBRATION = ROOT / "docs" / "calibration"
H200 = CALIBRATION / "h200-slo-bars-2026-12-02"
H100 = CALIBRATION / "h100-2026-12-07"
SHARED = [H200 / "report-aa1.json.gz", H200 / "report-aa2.json.gz",
          H100 / "report-aa1.json.gz", H100 / "report-aa2.json.gz"]  # fmt: skip
KIT_CR = CALIBRATION / "h200-tails-2026-12-02" / "gpu-slo-aa.yaml"  # the gpu-kit's SLO CR
HELD_OUT_AA = [  # A/A runs of the same workload and limits that the fit did not see
    CALIBRATION / "h100-slo-perfloor-2026-12-07" / "report-aa1.json.gz",
    CALIBRATION / "h200-slo-tails-2026-12-02" / "report-aa1.json.gz",
    CALIBRATION / "h200-slo-tails-2026-12-02" / "report-aa2.json.gz",
]
REGRESSIONS = [H200 / "report-r4.json.gz",
               CALIBRATION / "h100-slo-perfloor-2026-12-07" / "report-r4.json.gz"]  # fmt: skip


def calibrate(*argv: str | Path) -> int:
    return calibrate_main([str(a) for a in argv], "vllm-operator calibrate")


def merged(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 merge patch (what kubectl patch --type merge applies), no nulls here."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


@pytest.fixture(scope="module")
def outputs() -> tuple[str, str]:
    """(human, patch) of one run over the shared reports with the kit's CR."""
    argv = [*map(str, SHARED), "--cr", str(KIT_CR)]
    outcome = calibrate_mod.calibrate(
        calibrate_mod.parser("vllm-operator calibrate").parse_args(argv)
    )
    assert outcome.passed, outcome.human
    return outcome.human, outcome.patch


def test_calibrate_prints_floors_power_and_the_replays(outputs: tuple[str, str]) -> None:
    human, patch = outputs
    assert "floors (regressionFloorPercent): itl " in human
    power = human.split("power at this plan", 1)[1].split("\n\n", 1)[0]
    for metric in ("TTFT", "ITL"):
        for level in (8, 24):
            # gate.power's statement of each figure (a regression size, or "no regression")
            said = rf"detects (no )?{metric} p99 (\+[\d,]+ ms or more|regression) at {level} req/s"
            assert re.search(said, power), power
    for report in SHARED:
        assert f"{report}: Passed" in human
    assert patch.strip() in "\n".join(line[2:] for line in human.splitlines())


def test_the_patch_makes_every_aa_report_pass_and_r4_fail(
    outputs: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    patch = yaml.safe_load(outputs[1])
    cr = merged(yaml.safe_load(KIT_CR.read_text()), patch)
    gate = cr["spec"]["gate"]
    assert gate["trials"] == patch["spec"]["gate"]["trials"]
    thresholds = gate["thresholds"]
    floors = {m: thresholds["slo"][f"{m}Ms"]["regressionFloorPercent"] for m in ("ttft", "itl")}
    assert all(1 <= f <= 100 for f in floors.values())
    assert thresholds["slo"]["ttftMs"]["p99"] == 1000  # the limits stay the CR's
    capsys.readouterr()
    for report, expected in [*((r, "Passed") for r in SHARED + HELD_OUT_AA),
                             *((r, "Failed") for r in REGRESSIONS)]:  # fmt: skip
        judge_main(["--report", str(report), "--thresholds-json", json.dumps(thresholds)],
                   "vllm-operator judge")  # fmt: skip
        out = capsys.readouterr().out
        assert out.splitlines()[0] == f"verdict: {expected}", (report, out)


def test_without_a_cr_the_reports_own_limits_are_calibrated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert calibrate(*SHARED[2:], "--timeout-seconds", "600", "--output", "patch") == 0
    patch = yaml.safe_load(capsys.readouterr().out)  # --output patch: only the patch
    assert patch["spec"]["gate"]["timeoutSeconds"] == 600  # the flag's deadline is in it
    assert set(patch["spec"]["gate"]["thresholds"]["slo"]) == {"ttftMs", "itlMs"}
    assert calibrate(*SHARED[2:], "--timeout-seconds", "600") == 0
    out = capsys.readouterr().out
    assert "no --cr: the limits the reports were counted at" in out
    assert "timeoutSeconds: 600" in out  # the flag's deadline is part of the patch
    assert "itl p99 at 8 req/s" in out
    assert "give --cr: the power needs the CR's workload" in out


def test_fewer_than_two_reports_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert calibrate(SHARED[0]) == 2
    assert "give 2 to 50 A/A reports" in capsys.readouterr().err


def test_a_report_without_a_twin_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(gzip.decompress(SHARED[0].read_bytes()))
    data["load"]["runs"] = [r for r in data["load"]["runs"] if r["server"] != "baseline"]
    alone = tmp_path / "alone.json"
    alone.write_text(json.dumps(data))
    assert calibrate(SHARED[1], alone) == 2
    err = capsys.readouterr().err
    assert f"{alone} has no twin runs: not an A/A report" in err
    assert "bench --baseline-url" in err


def test_a_summary_is_not_a_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert calibrate(SHARED[0], H200 / "summary-aa1.json") == 2
    assert "is not a full report" in capsys.readouterr().err


def test_a_misspelt_flag_gets_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    assert calibrate(*SHARED[:2], "--timout-seconds", "480") == 2
    assert "did you mean --timeout-seconds?" in capsys.readouterr().err


def test_a_deadline_no_plan_fits_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert calibrate(*SHARED, "--cr", KIT_CR, "--timeout-seconds", "60") == 2
    assert "raise --timeout-seconds" in capsys.readouterr().err


def test_a_report_whose_twin_figures_are_not_numbers_reaches_no_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(gzip.decompress(SHARED[1].read_bytes()))
    for run in data["load"]["runs"]:
        if run["server"] == "baseline":
            run["percentiles"]["itl_ms"] = {"p95": "slow", "p99": -1}
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    assert calibrate(SHARED[0], forged) == 2
    err = capsys.readouterr().err
    assert "itl p99 at 8: measured against the twin in 1 run(s)" in err
    assert "two or more A/A runs" in err
