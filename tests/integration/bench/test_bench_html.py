"""`bench --html`: a real run against simulator processes writes a page people read.

The candidate runs at 0.7 of the baseline's speed, measured in the same run (paired); the
page must open in headless Chromium with both revisions in every chart and the verdict
naming the regression. Without plotly, ``--html`` is refused before any request is sent.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bench_simproc import MODEL, StartSim
from test_bench_cli_sim import FAST, bench

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


def _chromium():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "report_chromium", ROOT / "tests" / "integration" / "report" / "chromium.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["report_chromium"] = module
    spec.loader.exec_module(module)
    return module


def test_a_paired_run_writes_a_page_with_both_revisions(sim: StartSim, tmp_path: Path) -> None:
    chromium = _chromium()
    chromium.require_chromium()
    slow, fast = (
        # 2.5 x slower: a regression two trials show beyond 10% on a loaded machine too
        sim("--sim-time-scale", "0.05", "--sim-speed", "0.4"),
        sim("--sim-time-scale", "0.05"),
    )
    page, report = tmp_path / "gate.html", tmp_path / "report.json"
    done = bench(
        "--url", slow, "--baseline-url", fast, *FAST, "--trials", "2", "--suite",
        "builtin:default", "--thresholds-json", '{"maxRegressionPercent": 10}',
        "--report-path", str(report), "--html", str(page), "--output", "jsonl",
        "--allow-code-execution",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"bench: report page written to {page}" in done.stderr
    reasons = json.loads(report.read_text())["verdict"]["reasons"]
    regression = next(r for r in reasons if "regression beyond the limit" in r)
    result = chromium.chromium_page.open_page(page, expression=chromium.chromium_page.REPORT_STATE)
    problems = chromium.chromium_page.report_problems(result, page, ("candidate", "baseline"))
    assert problems == []
    sections = result.value["sections"]
    assert "Verdict: FAILED" in sections["verdict"]
    assert regression in sections["verdict"]
    assert re.search(r"candidate \d+/13 passed \(default\); baseline \d+/13", sections["quality"])


def test_html_without_plotly_is_refused_before_any_request(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['plotly'] = None\n"  # as if plotly were not installed
        "from vllm_operator.commands import main\n"
        "raise SystemExit(main(sys.argv[1:]))"
    )
    summary = tmp_path / "summary.json"
    done = subprocess.run(
        [
            sys.executable, "-c", code, "bench", "--model", MODEL, "--url",
            "http://127.0.0.1:9", "--html", str(tmp_path / "p.html"), "--summary-path",
            str(summary),
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert (
        "--html: plotly is not installed (fix: pip install 'vllm-operator[report]'" in done.stderr
    )
    assert "usage: --html: plotly is not installed" in json.loads(summary.read_text())["reasons"][0]
    assert not (tmp_path / "p.html").exists()
