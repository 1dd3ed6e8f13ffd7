"""`vllm-operator bench` as the Job runs it: a child process against a simulator process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench_simproc import MODEL, StartSim

from vllm_operator.api.summary import BenchSummary

FAST = [
    "--prompt-classes", "short,medium=64/16", "--iterations", "3", "--warmup", "0",
    "--concurrency", "1,2", "--requests-per-stream", "1", "--deadline-seconds", "60",
]  # fmt: skip


def bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "vllm_operator.commands", "bench", "--model", MODEL, *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, check=False, env=env or dict(os.environ)
    )


def test_job_mode_json_lines_report_and_termination_summary(sim: StartSim, tmp_path: Path) -> None:
    url = sim("--sim-time-scale", "0.05")
    summary_path, report_path = tmp_path / "termination-log", tmp_path / "report.json"
    thresholds = '{"quality": {"minPassed": 12}, "maxRegressionPercent": 10}'
    done = bench(
        "--url", url, *FAST, "--summary-path", str(summary_path), "--report-path",
        str(report_path), "--thresholds-json", thresholds, "--allow-code-execution",
        "--output", "jsonl", "--job-name", "qwen-gate-0123456789-1", "--revision", "0123456789",
        "--attempt", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start"
    assert kinds[-1] == "report"
    assert {"preflight", "request", "concurrency", "quality"} <= set(kinds)
    report = events[-1]["report"]
    assert report["schema"] == "vllm-operator.dev/bench-report/v1"
    assert report == json.loads(report_path.read_text())
    raw = summary_path.read_bytes()
    assert len(raw) < 4096
    summary = BenchSummary.model_validate_json(raw)
    assert summary.verdict == "Passed"
    # on a loaded machine the warm-up may end before two passes agree: a note, not a verdict
    assert summary.reasons[0] == "no baseline: regressions not checked (first revision)"
    assert all(r.startswith("the warm-up did not settle") for r in summary.reasons[1:])
    assert summary.identity is not None
    assert summary.identity.to_wire() == {
        "job": "qwen-gate-0123456789-1",
        "revision": "0123456789",
        "attempt": 1,
    }
    # the human tables go to stderr, in the study's layout
    assert (
        "| Configuration | Short lat. | Short tok/s | Medium lat. | Medium tok/s |" in done.stderr
    )
    assert "| multi-step-reason-1 | reasoning | ✗ FAIL |" in done.stderr
    assert "## Gate: Passed (exit 0)" in done.stderr


def test_degraded_simulator_fails_the_quality_gate(sim: StartSim, tmp_path: Path) -> None:
    url = sim("--sim-time-scale", "0.05", "--sim-degraded")
    summary_path = tmp_path / "termination-log"
    done = bench(
        "--url", url, *FAST, "--summary-path", str(summary_path),
        "--thresholds-json", '{"quality": {"minPassed": 12}}', "--allow-code-execution",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    summary = BenchSummary.model_validate_json(summary_path.read_text())
    assert summary.verdict == "Failed"
    assert summary.quality is not None
    assert summary.quality.passed <= 8
    assert summary.reasons[0].startswith(f"quality {summary.quality.passed}/13 passed")


def test_python_tests_are_refused_without_a_sandbox(sim: StartSim, tmp_path: Path) -> None:
    """No code from an answer runs unless asked: a gated run that could only end in Error is
    refused before any request (exit 2, the fixes named), and its summary says Error.

    minPassed 11 would hold (11/13 with code-1 not run), so only the refusal decides.
    """
    url = sim("--sim-time-scale", "0.05")
    summary_path = tmp_path / "termination-log"
    done = bench(
        "--url", url, *FAST, "--summary-path", str(summary_path),
        "--thresholds-json", '{"quality": {"minPassed": 11}}',
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "code-1 check(s) answer code" in done.stderr
    for fix in ("--allow-code-execution", "--sandbox-dir", "--suite builtin:none"):
        assert fix in done.stderr
    summary = BenchSummary.model_validate_json(summary_path.read_text())
    assert summary.verdict == "Error"
    assert summary.latency == []  # nothing was measured


def test_baseline_from_file_and_regression(sim: StartSim, tmp_path: Path) -> None:
    url = sim("--sim-time-scale", "0.05")
    fast = BenchSummary.model_validate(
        {
            "latency": [
                {"promptClass": "short", "requests": 3, "medianMs": 1, "ttftMs": 1,
                 "outputTokens": 2, "e2eTokensPerSecond": 1, "decodeTokensPerSecond": 1},
            ],
        }
    )  # fmt: skip
    baseline = tmp_path / "stable.json"
    baseline.write_text(json.dumps(fast.to_wire()))
    done = bench(
        "--url", url, *FAST, "--suite", "builtin:none", "--output", "jsonl",
        "--baseline-json", f"@{baseline}", "--thresholds-json", '{"maxRegressionPercent": 10}',
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])["report"]
    assert report["verdict"]["outcome"] == "Failed"
    assert any(
        "% vs baseline 1 ms (" in r and r.endswith("beyond the limit")
        for r in report["verdict"]["reasons"]
    )


def test_api_key_from_env_is_used_and_never_printed(sim: StartSim, tmp_path: Path) -> None:
    url = sim("--sim-time-scale", "0.05", "--api-key", "s3cret-key-value")
    env = {**os.environ, "BENCH_KEY": "s3cret-key-value"}
    args = ["--url", url, *FAST, "--suite", "builtin:none", "--report-path", str(tmp_path / "r")]
    good = bench(*args, "--api-key-env", "BENCH_KEY", env=env)
    assert good.returncode == 0, good.stderr[-2000:]
    for text in (good.stdout, good.stderr, (tmp_path / "r").read_text()):
        assert "s3cret" not in text
    wrong = bench(*args, "--api-key-env", "BENCH_KEY", env={**env, "BENCH_KEY": "other"})
    assert wrong.returncode == 3
    report = json.loads((tmp_path / "r").read_text())
    assert report["summary"]["errors"] == {"http_4xx": 1}
    assert "HTTP 401" in report["errors"]["http_4xx"]["examples"][0]
