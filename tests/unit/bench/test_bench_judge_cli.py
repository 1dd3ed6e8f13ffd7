"""`vllm-operator judge` replays the real H200 summaries through the gate's own code.

docs/calibration/h200-paired-2026-12-01: seven A/A gates and one against
``--max-num-seqs 4``, measured before the gate was made decisive (3 trials, no sequential
plan recorded); h200-decisive-2026-12-01: three A/A gates with the new bench (settling
warm-up, sequential trials). Issue 19's acceptance: with default limits aa2 and aa4 Pass,
the regression Fails, no A/A run Fails, and the three new ones Pass.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.commands.judge import main

ROOT = Path(__file__).resolve().parents[3]
PAIRED = ROOT / "docs/calibration/h200-paired-2026-12-01"
DECISIVE = ROOT / "docs/calibration/h200-decisive-2026-12-01"
TEN = '{"maxRegressionPercent": 10}'
OLD = sorted(PAIRED.glob("*.json"))
NEW = sorted(DECISIVE.glob("summary-*.json"))


def judge(*argv: str) -> int:
    return main(list(argv), "vllm-operator judge")


def test_the_stored_summaries_are_all_there() -> None:
    assert [p.name for p in OLD] == [
        *(f"summary-aa{i}.json" for i in range(1, 8)),
        "summary-reg-seqs4.json",
    ]
    assert [p.name for p in NEW] == [f"summary-aa{i}.json" for i in (1, 2, 3)]


@pytest.mark.parametrize("path", OLD, ids=lambda p: p.stem)
def test_old_h200_summaries_replay_as_the_issue_expects(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = judge("--summary", str(path), "--thresholds-json", TEN)
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    if path.stem in ("summary-aa2", "summary-aa4"):
        assert (code, first) == (0, "verdict: Passed"), out
    elif path.stem == "summary-reg-seqs4":
        assert (code, first) == (1, "verdict: Failed"), out
        assert "regression beyond the limit" in out
    else:
        assert code == 1, out
        assert first == "verdict: Inconclusive", out  # not Failed: an A/A run never fails


@pytest.mark.parametrize("path", NEW, ids=lambda p: p.stem)
def test_new_h200_summaries_pass(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert judge("--summary", str(path), "--thresholds-json", TEN) == 0
    out = capsys.readouterr().out
    assert out.startswith("verdict: Passed\n")
    assert "widened for 8 looks" in out  # the plan recorded in the summary


def test_a_full_report_is_judged_by_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    report = DECISIVE / "report-aa1.json"
    assert json.loads(report.read_text())["schema"] == "vllm-operator.dev/bench-report/v1"
    assert judge("--summary", str(report), "--thresholds-json", TEN, "--output", "json") == 0
    from_report = json.loads(capsys.readouterr().out)
    judge(
        "--summary",
        str(DECISIVE / "summary-aa1.json"),
        "--thresholds-json",
        TEN,
        "--output",
        "json",
    )
    assert from_report == json.loads(capsys.readouterr().out)
    assert from_report["outcome"] == "Passed"
    assert len(from_report["reasons"]) == 8  # seven figures, and the warm-up did not settle
    assert from_report["reasons"][-1].startswith("the warm-up did not settle (4 pass(es)")


def test_as_a_real_subprocess_through_the_top_level_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vllm_operator.commands", "judge", "--summary",
         str(PAIRED / "summary-reg-seqs4.json"), "--thresholds-json", TEN, "--output", "json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["outcome"] == "Failed"
    passed = subprocess.run(
        [sys.executable, "-m", "vllm_operator.commands", "judge", "--summary", "-",
         "--thresholds-json", TEN],
        input=(PAIRED / "summary-aa2.json").read_text(),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert passed.returncode == 0, passed.stderr
    assert passed.stdout.startswith("verdict: Passed\n")
    assert passed.stderr == ""


def test_the_plan_on_the_command_line_replaces_the_summarys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    aa1 = str(DECISIVE / "summary-aa1.json")
    assert (
        judge("--summary", aa1, "--thresholds-json", TEN, "--trials", "3", "--max-trials", "3") == 0
    )
    out = capsys.readouterr().out
    assert "widened" not in out
    # an old summary with no plan, judged as if the plan had allowed eight looks
    aa2 = str(PAIRED / "summary-aa2.json")
    judge("--summary", aa2, "--thresholds-json", TEN, "--trials", "3", "--max-trials", "10")
    assert "widened for 8 looks" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--summary", "/nonexistent/summary.json"], "--summary: cannot read"),
        (["--summary", "{notjson}"], "--summary: "),
        (["--summary", "{list}"], "--summary: (top level):"),
        (["--summary", "{notsummary}"], "--summary: latency:"),
        (["--summary", "{aa2}", "--baseline", "/nonexistent"], "--baseline: cannot read"),
        (["--summary", "{aa2}", "--thresholds-json", '{"maxRegressionPercent": 500}'],
         "--thresholds-json: maxRegressionPercent:"),
        (["--summary", "{aa2}", "--thresholds-json", '{"maxRegresionPercent": 5}'],
         "--thresholds-json: maxRegresionPercent:"),
        (["--summary", "{aa2}", "--thresholds-json", "nope"], "--thresholds-json: "),
        (["--summary", "{aa2}", "--trials", "5", "--max-trials", "3"],
         "--trials/--max-trials: maxTrials 3 is below the minimum 5"),
        (["--summary", "{aa2}", "--max-trials", "11"], "--trials/--max-trials:"),
        (["--summary", "{aa2}", "--output", "yaml"], "arguments: argument --output"),
    ],
)  # fmt: skip
def test_usage_errors_exit_2_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], option: str
) -> None:
    (tmp_path / "notjson").write_text("not json at all")
    (tmp_path / "list").write_text("[1, 2]")
    (tmp_path / "notsummary").write_text('{"latency": 5}')
    files = {
        "{notjson}": str(tmp_path / "notjson"),
        "{list}": str(tmp_path / "list"),
        "{notsummary}": str(tmp_path / "notsummary"),
        "{aa2}": str(PAIRED / "summary-aa2.json"),
    }
    args = [files.get(a, a) for a in argv]
    if "--thresholds-json" not in args:
        args += ["--thresholds-json", TEN]
    assert judge(*args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"vllm-operator judge: {option}"), captured.err
    assert "Traceback" not in captured.err


def test_require_paired_without_a_paired_baseline_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads((PAIRED / "summary-aa2.json").read_text())
    data.pop("pairedBaseline")
    alone = tmp_path / "alone.json"
    alone.write_text(json.dumps(data))
    code = judge("--summary", str(alone), "--thresholds-json", TEN, "--require-paired")
    out = capsys.readouterr().out
    assert code == 3, out
    assert out.startswith("verdict: Error\n")
    assert "a paired baseline was required" in out
    # the same summary with its paired baseline is not an Error
    paired = str(PAIRED / "summary-aa2.json")
    assert judge("--summary", paired, "--thresholds-json", TEN, "--require-paired") == 0


def test_a_stored_baseline_file_is_compared_unpaired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads((PAIRED / "summary-aa2.json").read_text())
    base = {**data, "latency": data["pairedBaseline"]["latency"],
            "concurrency": data["pairedBaseline"]["concurrency"]}  # fmt: skip
    data.pop("pairedBaseline")
    base.pop("pairedBaseline")
    (tmp_path / "cand.json").write_text(json.dumps(data))
    (tmp_path / "base.json").write_text(json.dumps(base))
    judge("--summary", str(tmp_path / "cand.json"), "--baseline", str(tmp_path / "base.json"),
          "--thresholds-json", TEN)  # fmt: skip
    out = capsys.readouterr().out
    assert "unpaired, 3/3 trials" in out
    assert "no baseline" not in out
    judge("--summary", str(tmp_path / "cand.json"), "--thresholds-json", TEN)
    assert "no baseline: regressions not checked" in capsys.readouterr().out


SLO_RUNS = ROOT / "docs/calibration/h200-slo-2026-12-01"
SLO_LIMITS = json.dumps(
    {
        "maxRegressionPercent": 10,
        "slo": {
            "ttftMs": {"p99": 1000},
            "itlMs": {"p99": 100},
            "minGoodputPercent": 90,
            "maxErrorPercent": 1,
        },
    }
)


@pytest.mark.parametrize("run", ["aa-slo", "aa-warm"])
def test_identical_h200_servers_never_fail_the_slo_gate(
    run: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # aa-warm failed when measured (2026-12-01): the 3-trial outlier rule left a TTFT p99
    # trial out and the two left made a tight +30% interval (docs/calibration
    # h200-slo-2026-12-01.md). Identical revisions may wait for more trials, never fail.
    path = SLO_RUNS / f"summary-{run}.json"
    code = judge("--summary", str(path), "--thresholds-json", SLO_LIMITS)
    out = capsys.readouterr().out
    assert (code, out.splitlines()[0]) == (1, "verdict: Inconclusive"), out
    failures = re.findall(r".*(?:regression beyond|\] above the|below the least).*", out)
    assert not failures, failures


def test_the_h200_max_num_seqs_4_regression_fails_the_slo_gate_both_ways(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = SLO_RUNS / "summary-reg-slo.json"
    code = judge("--summary", str(path), "--thresholds-json", SLO_LIMITS)
    out = capsys.readouterr().out
    assert (code, out.splitlines()[0]) == (1, "verdict: Failed"), out
    assert "ttft p99 at 8 req/s: 8696 ms [7137, 10595] above the 1000 ms limit" in out
    assert any(
        line.strip().startswith("- ttft p99 at 8 req/s: 8,695.9 ms")
        and line.endswith("regression beyond the limit")
        for line in out.splitlines()
    ), out
    assert "at 24 req/s: not measured, the sweep stopped at its first breach 8" in out


# -- SLO tails counted (issue 29): judge --report -----------------------------------------

TAILS = ROOT / "docs/calibration/h200-tails-2026-12-02"


def slo_aa_limits() -> str:
    """The thresholds of the CR the slo-aa run was measured with (gpu-slo-aa.yaml)."""
    spec = yaml.safe_load((TAILS / "gpu-slo-aa.yaml").read_text())
    return json.dumps(spec["spec"]["gate"]["thresholds"])


def test_slo_aa_summary_without_counts_is_judged_by_the_old_rule_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = judge("--summary", str(TAILS / "summary-slo-aa.json"), "--thresholds-json",
                 slo_aa_limits())  # fmt: skip
    out = capsys.readouterr().out
    assert (code, out.splitlines()[0]) == (1, "verdict: Inconclusive"), out
    assert "summary without exceedance counts (written before 2026-12-02)" in out
    assert "ttft p99 at 24 req/s: 170 ms [21.3, 1357] straddles the 1000 ms limit" in out


def test_slo_aa_report_recounted_keeps_the_ttft_promise_and_cannot_count_itl(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The H200 run of 2026-12-02: 0 of 1,440 requests over 1,000 ms at 24 req/s. Counted,
    # the p99 limit is met at both levels; the report predates gap counts, so ITL cannot
    # be judged from it (the bench writes them now).
    code = judge("--report", str(TAILS / "report-slo-aa.json.gz"), "--thresholds-json",
                 slo_aa_limits())  # fmt: skip
    out = capsys.readouterr().out
    assert (code, out.splitlines()[0]) == (1, "verdict: Inconclusive"), out
    assert (
        "ttft p99 at 24 req/s: 0 of 1,440 requests above 1000 ms (share <= 0.44%, 95% interval "
        "widened for 8 looks, 3 trials of up to 10): within the 1% the p99 limit allows"
    ) in out
    assert "ttft p99 at 8 req/s: 0 of 1,120 requests above 1000 ms (share <= 0.56%" in out
    for level in (8, 24):
        assert f"itl p99 at {level} req/s: not decidable from this report (no gap counts" in out
    lines = [line for line in out.splitlines() if "against the baseline" in line]
    assert any("24 req/s" in line and "3 trials of up to 10): within the limit" in line
               for line in lines), lines  # fmt: skip
    assert "regression beyond" not in out


@pytest.mark.parametrize("run", ["aa-slo", "aa-warm", "reg-slo"])
def test_the_2026_12_01_reports_recounted(run: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = judge("--report", str(SLO_RUNS / f"report-{run}.json.gz"), "--thresholds-json",
                 SLO_LIMITS)  # fmt: skip
    out = capsys.readouterr().out
    if run == "reg-slo":
        assert (code, out.splitlines()[0]) == (1, "verdict: Failed"), out
        assert "ttft p99 at 8 req/s: 429 of 480 requests above 1000 ms (share >= " in out
        # against the twin: each trial's bar is the twin's own p99 plus 100 ms
        assert "465 of the candidate's 480 requests above the baseline's p99 plus 10% or " in out
        assert "(bars 196.2-234.9 ms by trial)" in out
        assert "regression beyond the limit" in out
    else:
        assert (code, out.splitlines()[0]) == (1, "verdict: Inconclusive"), out
        assert not re.findall(r".*(?:regression beyond|beyond the|below the least).*", out)


def test_a_report_is_recounted_at_limits_its_summary_was_not_counted_at(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_bench_load_tails import make_run

    from vllm_operator.api.summary import BenchSummary, LoadSweep
    from vllm_operator.bench.load.figures import level_figures, run_json
    from vllm_operator.bench.report import REPORT_SCHEMA

    measured = {"ttftMs": {"p99": 1000}, "itlMs": {"p99": 100}}
    limits = Thresholds.model_validate({"slo": measured}).slo
    assert limits is not None
    runs = [make_run(i) for i in range(3)]
    for i, r in enumerate(runs):
        r.trial = i
    level = level_figures(24.0, runs, limits.at(24.0))
    summary = BenchSummary(model="m", load=LoadSweep(mode="rate", levels=[level]))
    report = {
        "schema": REPORT_SCHEMA,
        "summary": summary.to_wire(),
        "load": {"runs": [run_json(r, limits.at(24.0)) for r in runs]},
    }
    path = tmp_path / "report.json.gz"
    path.write_bytes(gzip.compress(json.dumps(report).encode()))
    (tmp_path / "summary.json").write_text(json.dumps(summary.to_wire()))
    same = json.dumps({"slo": measured})
    assert judge("--report", str(path), "--thresholds-json", same) == 0
    assert "0 of 23,040 gaps above 100 ms" in capsys.readouterr().out
    tighter = json.dumps({"slo": {"ttftMs": {"p99": 1000}, "itlMs": {"p99": 12}}})
    judge("--summary", str(tmp_path / "summary.json"), "--thresholds-json", tighter)
    out = capsys.readouterr().out
    assert "counted above 100 ms, but the limit judged is 12 ms: re-judge with --report" in out
    judge("--report", str(path), "--thresholds-json", tighter)
    out = capsys.readouterr().out
    assert re.search(r"itl p99 at 24 req/s: [\d,]+ of 23,040 gaps above 12 ms", out), out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--report", "{summary}"], "--report: "),
        (["--report", "{summary}", "--summary", "{summary}"], "arguments: argument --summary"),
        (["--report", "{notgz}"], "--report: "),
        ([], "arguments: one of the arguments --summary --report is required"),
    ],
)
def test_report_usage_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "notgz").write_bytes(b"\x1f\x8bnot gzip at all")
    files = {"{summary}": str(TAILS / "summary-slo-aa.json"), "{notgz}": str(tmp_path / "notgz")}
    assert judge(*[files.get(a, a) for a in argv], "--thresholds-json", TEN) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"vllm-operator judge: {message}"), captured.err
    assert "Traceback" not in captured.err
