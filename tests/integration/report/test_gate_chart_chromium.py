"""The gate's interval chart in headless Chromium: one row per judged figure, each with its
change, interval and limit in plotly's data, and the points, error bars and limit ticks
drawn as SVG (``hack/chromium_page.py``'s ``REPORT_STATE``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from chromium import chromium_page
from test_report_chromium import ROLES, seen, written

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "bench"))
from test_report_gate_chart import ROWS, report_with_figures

pytestmark = pytest.mark.slow


def test_the_interval_chart_draws_one_row_per_judged_figure_with_its_limit(
    tmp_path: Path,
) -> None:
    page = written(tmp_path, report_with_figures())
    result, state = seen(page)
    assert chromium_page.report_problems(result, page, ROLES) == []
    charts = {c["id"]: c for c in state["charts"]}
    assert next(iter(charts)) == "gate-intervals"  # first, right under the verdict
    gate = charts["gate-intervals"]
    rows = {meta: (ys, xs) for meta, ys, xs in gate["rows"]}
    judged = [r for r in ROWS if "change" in r]
    names = [r["figure"] for r in judged]
    assert [y.replace("<b>", "").replace("</b>", "") for y in rows["change"][0]] == names
    assert rows["limit"][0] == rows["change"][0]
    assert [round(x, 1) for x in rows["limit"][1]] == [round(r["limit"] * 100, 1) for r in judged]
    assert [round(x, 1) for x in rows["change"][1]] == [round(r["change"] * 100, 1) for r in judged]
    drawn = dict(gate["drawn"])
    # plotly drew a path per point and per error bar, and one per limit tick
    assert drawn["change"] >= 2 * len(judged)
    assert drawn["limit"] >= len(judged)
    table = state["sections"]["verdict"]
    assert "2 streams tok/s\t1,058.2 tok/s\t1,310.3 tok/s\t-19.2%" in table
