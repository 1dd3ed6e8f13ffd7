"""`judge` takes what `bench` printed, is bounded like `report`, escapes what it prints and
refuses a mustPass name the suite lacks (issue 38 holes 4, 6, 8; issue 42 item 3).

Each was reproduced on 953c1d3: bench's last output line was refused ("event: Extra inputs
are not permitted"); a 40 KB gzip of 40 MiB of ``[{},{},...]`` took ``judge --report`` 2 GB
and 20 s before its error; a failed test id with terminal codes reached the terminal raw;
``mustPass: [code1]`` was judged Passed while ``code-1`` had failed.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllm_operator.api.summary import BenchSummary, QualityFigures
from vllm_operator.commands.judge import main

ROOT = Path(__file__).resolve().parents[3]
DECISIVE = ROOT / "docs/calibration/h200-decisive-2026-12-01"
TEN = '{"maxRegressionPercent": 10}'
HOSTILE_ID = "\x1b[32m\n## Gate: Passed (exit 0)\x1b[8m\r\u202e1-edoc"
"""A fake green verdict, a carriage return, a 'conceal' code and a bidi override."""
RAW = ("\x1b", "\r", "\u202e", "\x07")


def judge(*argv: str) -> int:
    return main(list(argv), "vllm-operator judge")


def _builtin_summary(failed: list[str], passed: int = 12) -> str:
    summary = BenchSummary(
        model="m",
        quality=QualityFigures(suite="default", passed=passed, total=13, failed=failed),
    )
    return json.dumps(summary.to_wire())


def test_bench_s_last_output_line_and_its_whole_log_are_judged_like_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = json.loads((DECISIVE / "report-aa1.json").read_text())
    event = json.dumps({"event": "report", "report": report})
    (tmp_path / "last-line.json").write_text(event + "\n")
    log = '{"event": "start", "t": 0}\n{"event": "request", "t": 1.5}\n' + event + "\n"
    (tmp_path / "bench.log").write_text(log)
    expected_code = judge("--summary", str(DECISIVE / "summary-aa1.json"), "--thresholds-json", TEN)
    expected = capsys.readouterr().out
    assert expected.startswith("verdict: Passed")
    for name in ("last-line.json", "bench.log"):
        for option in ("--summary", "--report"):
            code = judge(option, str(tmp_path / name), "--thresholds-json", TEN)
            captured = capsys.readouterr()
            assert (code, captured.out) == (expected_code, expected), (name, option, captured.err)


def test_bench_s_printed_tables_are_refused_naming_the_flag_that_writes_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tables = "## Latency\n| Configuration | Short lat. |\n\n## Gate: Passed (exit 0)\n"
    (tmp_path / "out.txt").write_text(tables)
    assert judge("--summary", str(tmp_path / "out.txt"), "--thresholds-json", TEN) == 2
    err = capsys.readouterr().err
    assert "bench's printed tables, not the JSON it writes" in err
    assert "--summary-path FILE" in err
    assert "--report-path FILE" in err


def test_a_hostile_failed_test_id_is_escaped_and_the_real_verdict_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.json").write_text(_builtin_summary([HOSTILE_ID]))
    code = judge(
        "--summary", str(tmp_path / "s.json"), "--thresholds-json", '{"quality": {"minPassed": 13}}'
    )
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("verdict: Failed\n")
    assert not any(c in out for c in RAW), repr(out)
    assert "\\x1b[32m\\x0a## Gate: Passed (exit 0)\\x1b[8m\\x0d\\u202e1-edoc" in out
    assert not any(line.startswith("## Gate") for line in out.splitlines())


def test_a_must_pass_name_the_builtin_suite_lacks_is_an_error_with_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.json").write_text(_builtin_summary(["code-1"]))
    thresholds = '{"quality": {"mustPass": ["code1"]}}'
    code = judge("--summary", str(tmp_path / "s.json"), "--thresholds-json", thresholds)
    out = capsys.readouterr().out
    assert code == 3, out
    assert out.startswith("verdict: Error\n")
    assert "'code1' (did you mean 'code-1'?)" in out
    # spelt right, the failed must-pass test fails the gate
    right = '{"quality": {"mustPass": ["code-1"]}}'
    assert judge("--summary", str(tmp_path / "s.json"), "--thresholds-json", right) == 1
    assert "must-pass quality test code-1 failed" in capsys.readouterr().out


def _write_report(path: Path, ids: range) -> None:
    """A report of the custom suite "mine" whose tests are t-<n> for n in ``ids``; t-3 failed."""
    summary = BenchSummary.model_validate_json(_builtin_summary(["t-3"]))
    report = {
        "schema": "vllm-operator.dev/bench-report/v1",
        "summary": summary.model_copy(
            update={"quality": QualityFigures(suite="mine", passed=2, total=3, failed=["t-3"])}
        ).to_wire(),
        "quality": {"suite": "mine", "tests": [{"id": f"t-{n}"} for n in ids]},
    }
    path.write_text(json.dumps(report))


def test_a_must_pass_name_a_report_s_suite_lacks_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_report(tmp_path / "r.json", range(1, 4))
    code = judge(
        "--summary",
        str(tmp_path / "r.json"),
        "--thresholds-json",
        '{"quality": {"mustPass": ["t3"]}}',
    )
    out = capsys.readouterr().out
    assert code == 3, out
    assert "suite mine does not have: 't3' (did you mean 't-3'?)" in out


def test_judge_report_refuses_a_gzip_of_empty_objects_bounded_in_memory_and_time(
    tmp_path: Path,
) -> None:
    bomb = tmp_path / "bomb.json.gz"
    body = b"[" + b"{}," * ((40 << 20) // 3) + b"{}]"  # 40 MiB, 14 million objects
    bomb.write_bytes(gzip.compress(body, 9))
    assert bomb.stat().st_size < 200_000
    # A fresh parent whose only child is the CLI: its RUSAGE_CHILDREN peak is the CLI's.
    measure = (
        "import resource, subprocess, sys, time\n"
        "t = time.monotonic()\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
        " round(time.monotonic() - t, 2))\n"
        "sys.stderr.write(done.stderr)\n"
    )
    cli = [sys.executable, "-m", "vllm_operator.commands", "judge", "--report", str(bomb)]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", measure, *cli, "--thresholds-json", TEN],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    code, peak_kib, seconds = done.stdout.split()
    assert int(peak_kib) < 400 * 1024, f"{int(peak_kib) >> 10} MiB to refuse it"
    assert float(seconds) < 60, f"{seconds} s to refuse it"
    assert int(code) == 2, done.stderr
    assert "objects or arrays" in done.stderr
    assert "more than a report has" in done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - started < 300


def test_a_forged_report_with_many_tests_and_names_is_answered_in_bounded_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_report(tmp_path / "r.json", range(5000))
    names = json.dumps({"quality": {"mustPass": [f"x{n}" for n in range(50_000)]}})
    started = time.monotonic()
    code = judge("--summary", str(tmp_path / "r.json"), "--thresholds-json", names)
    out = capsys.readouterr().out
    assert code == 3
    assert "mustPass names 50000 test(s) suite mine does not have" in out
    assert "and 4980 more" in out  # twenty ids shown, not five thousand
    assert len(out) < 4000
    assert time.monotonic() - started < 60
