"""The judged-figures table of a report with SLO figures, as Chromium shows it (issue 42):
each SLO row filled (measured percentile, limit, share above with its interval, share
allowed), the subtitle true without a baseline, and ``--element`` screenshots that table's
section alone (how docs/report-slo-figures.png was taken)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from chromium import chromium_page
from test_report_chromium import seen, written

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "bench"))
import report_fixtures
from test_report_slo_figures import judged_rows

pytestmark = pytest.mark.slow


def test_the_slo_rows_are_filled_in_chromium(tmp_path: Path) -> None:
    report = report_fixtures.load_report(baseline=False)
    report["verdict"] = {
        "outcome": "Passed",
        "reasons": ["ttft p90 at 4 req/s: within"],
        "deciding": 1,
        "figures": judged_rows(),
    }
    page = written(tmp_path, report)
    result, state = seen(page)
    assert chromium_page.report_problems(result, page, ("candidate",)) == []
    shown = state["sections"]["verdict"]
    row = (
        "ttft p90 at 4 req/s\t812 ms\tnone: limit 2,000 ms\t1.7% above the limit\t0.2% to 5.9%"
        "\tat most 10% above\twithin — decided the verdict"
    )
    assert row in shown, shown
    shot = chromium_page.open_page(page, screenshot=True, width=1200, element="verdict")
    assert shot.screenshot is not None
    assert shot.screenshot.startswith(b"\x89PNG")
    full = chromium_page.open_page(page, screenshot=True, width=1200)
    assert full.screenshot is not None
    assert len(shot.screenshot) < len(full.screenshot)  # the section, not the whole page
