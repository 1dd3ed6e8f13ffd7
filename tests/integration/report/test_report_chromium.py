"""A report page in headless Chromium, as a person sees it.

Each page is written by the real command (``vllm-operator report``) and opened in headless
Chromium (``hack/chromium_page.py``, over the DevTools protocol): it must render with no
console error, no uncaught exception and no Content-Security-Policy violation, ask for
nothing but its own file, draw every chart with data of both revisions (plotly's own state:
``div.data`` and the SVG trace groups it drew), and show the verdict with its reasons. The
real bench writing a page (``bench --html``) is in tests/integration/bench/test_bench_html.py;
the demo's pages in tests/integration/demo/test_story.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chromium import chromium_page, report_fixtures, require_chromium

from vllm_operator.commands import main

pytestmark = pytest.mark.slow

ROLES = ("candidate", "baseline")


def written(tmp_path: Path, report: dict[str, Any], *extra: str) -> Path:
    src = tmp_path / "report.json"
    src.write_text(json.dumps(report))
    out = tmp_path / "report.html"
    assert main(["report", str(src), *extra, "-o", str(out)]) == 0
    return out


def seen(page: Path) -> tuple[Any, dict[str, Any]]:
    require_chromium()
    result = chromium_page.open_page(page, expression=chromium_page.REPORT_STATE)
    return result, result.value


def test_a_load_sweep_page_renders_both_revisions_in_every_chart(tmp_path: Path) -> None:
    page = written(tmp_path, report_fixtures.load_report())
    result, state = seen(page)
    assert chromium_page.report_problems(result, page, ROLES) == []
    assert [c["id"] for c in state["charts"]] == [
        "load-percentiles",
        "load-ttft-ms",
        "load-itl-ms",
        "load-throughput",
    ]
    verdict = state["sections"]["verdict"]
    assert "Verdict: FAILED" in verdict
    assert "20 requests/s: TTFT p99 812.4 ms, limit 500 ms: SLO breached" in verdict
    assert "capacity: 10 requests/s" in state["sections"]["load"]
    assert "test-3\treasoning\tFAIL" in state["sections"]["quality"]


def test_a_study_page_against_another_runs_report(tmp_path: Path) -> None:
    other = tmp_path / "last-week.json"
    other.write_text(json.dumps(report_fixtures.study_report(baseline=False)))
    page = written(
        tmp_path,
        report_fixtures.study_report(baseline=False, outcome="Passed"),
        "--baseline",
        str(other),
    )
    result, state = seen(page)
    assert chromium_page.report_problems(result, page, ROLES) == []
    assert "Verdict: PASSED" in state["sections"]["verdict"]
    assert f"the charts compare with {other}" in state["sections"]["verdict"]


def test_a_hostile_report_runs_nothing_and_shows_its_text(tmp_path: Path) -> None:
    hostile = report_fixtures.HOSTILE
    for report in (report_fixtures.study_report(), report_fixtures.load_report()):
        page = written(tmp_path, report_fixtures.hostile(report))
        result, state = seen(page)
        # no CSP violation either: nothing was injected for the policy to block
        assert chromium_page.report_problems(result, page, ROLES) == []
        assert state["pwned"] == "undefined"
        assert hostile in state["sections"]["verdict"]  # shown as text, whole
        assert hostile in state["sections"]["errors"]
        assert state["title"] == f"Benchmark report: {hostile}"
