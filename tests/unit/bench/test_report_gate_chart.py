"""The page's gate section: what decided first, every judged figure in a table, and an
interval chart with one row per figure and its limit (``bench.page.gate_chart``)."""

from __future__ import annotations

import re
from typing import Any

from report_fixtures import study_report
from test_report_page import figures, page

from vllm_operator.bench.page.gate_chart import CHART_ID

ROWS: list[dict[str, Any]] = [
    {
        "figure": "2 streams tok/s",
        "outcome": "beyond",
        "deciding": True,
        "candidate": 1058.2,
        "baseline": 1310.3,
        "unit": "tok/s",
        "change": -0.192,
        "low": -0.268,
        "high": -0.109,
        "limit": -0.10,
        "higher_is_worse": False,
        "trials": 5,
    },
    {
        "figure": "short prompts, median latency",
        "outcome": "undecided",
        "stop": "failed-first",
        "candidate": 14.0,
        "baseline": 15.7,
        "unit": "ms",
        "change": -0.111,
        "low": -0.492,
        "high": 0.558,
        "limit": 0.178,
        "trials": 5,
    },
    {
        "figure": "long prompts, median latency",
        "outcome": "within",
        "candidate": 939.0,
        "baseline": 891.0,
        "unit": "ms",
        "change": 0.054,
        "low": 0.016,
        "high": 0.094,
        "limit": 0.10,
        "trials": 5,
    },
    {"figure": "ttft p99 at 2 req/s", "outcome": "within"},  # no numbers: table only
]


def report_with_figures() -> dict[str, Any]:
    report = study_report()
    report["verdict"] = {
        "outcome": "Failed",
        "reasons": [
            "2 streams: 1,058.2 tok/s, -19.2% vs baseline 1,310.3 tok/s (...): regression "
            "beyond the limit",
            "short prompts, median latency: -11.1% (...): undecided",
            "long prompts, median latency: +5.4% (...): within the limit",
        ],
        "deciding": 1,
        "headline": "2 streams: -19.2% (-26.8% to -10.9%) vs baseline, limit -10%: beyond",
        "figures": ROWS,
    }
    return report


def test_the_interval_chart_has_one_row_per_judged_figure_with_its_limit() -> None:
    chart = figures(page(report_with_figures()))[CHART_ID]
    change, limit = chart["data"]
    assert (change["meta"], limit["meta"]) == ("change", "limit")
    names = [
        "<b>2 streams tok/s</b>",
        "short prompts, median latency",
        "long prompts, median latency",
    ]
    assert change["y"] == names  # deciding first and marked; the figure without numbers is not
    assert limit["y"] == names
    assert [round(x, 3) for x in change["x"]] == [-19.2, -11.1, 5.4]
    assert [round(x, 3) for x in limit["x"]] == [-10.0, 17.8, 10.0]
    assert [round(x, 3) for x in change["error_x"]["arrayminus"]] == [7.6, 38.1, 3.8]
    assert [round(x, 3) for x in change["error_x"]["array"]] == [8.3, 66.9, 4.0]
    colours = change["marker"]["color"]
    assert colours[0] != colours[2]  # beyond and within look different


def test_the_verdict_section_leads_with_what_decided_and_tables_every_figure() -> None:
    text = page(report_with_figures())
    verdict = text[
        text.index('id="verdict"') : text.index("</section>", text.index('id="verdict"'))
    ]
    decided = verdict.index("Decided by:")
    assert verdict.index("regression beyond the limit") > decided
    assert verdict.index("2 more: the figures and notes") > verdict.index("regression beyond")
    table = re.search(r'<table id="gate-figures">(.*?)</table>', verdict, re.S)
    assert table is not None
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1), re.S)
    assert len(rows) == 1 + len(ROWS)  # the head, then one row per judged figure
    first = re.findall(r"<td[^>]*>(.*?)</td>", rows[1])
    assert first == [
        "2 streams tok/s",
        "1,058.2 tok/s",
        "1,310.3 tok/s",
        "-19.2%",
        "-26.8% to -10.9%",
        "-10.0%",
        "beyond the limit — decided the verdict",
    ]
    second = re.findall(r"<td[^>]*>(.*?)</td>", rows[2])
    assert second[-1] == "undecided (another figure failed first)"
    assert re.findall(r"<td[^>]*>(.*?)</td>", rows[4])[1:6] == ["–"] * 5


def test_a_page_without_judged_figures_has_no_gate_chart() -> None:
    assert CHART_ID not in figures(page(study_report()))
