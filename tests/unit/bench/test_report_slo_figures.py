"""The report's "Judged figures" table for SLO figures, from the gate to the page (issue 42).

Before, an SLO percentile judged against its limit carried no numbers: its row read "–" in
every column, and the page's subtitle said "candidate and baseline on the same axes" above
"baseline: none in this report". Here a summary with counted tails is judged by the gate
(``gate.verdict.judge``), its findings written as the report carries them
(``bench.report.figure_json``), and the page's row read back: the measured percentile, the
limit, the share of requests above it with its interval, and the share the percentile allows.
"""

from __future__ import annotations

import re
from typing import Any

from report_fixtures import load_report
from test_report_page import page

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary, LoadLevelFigures, LoadSweep, TailCounts
from vllm_operator.bench.report import figure_json
from vllm_operator.gate.verdict import judge


def judged_rows() -> list[dict[str, object]]:
    """The gate's figures of one rate level: TTFT p90 <= 2000 ms, 3 trials of 40 requests,
    2 of them above (pooled p90 812.5 ms)."""
    figures = LoadLevelFigures(
        level=4.0,
        requests=120,
        percentiles={"ttft.p90": [790.0, 812.5, 840.0]},
        pooled={"ttft.p90": 812.5},
        tails={"ttft.p90": TailCounts(limit=2000.0, total=[40, 40, 40], above=[1, 0, 1])},
        goodput_percent=[100.0] * 3,
        error_percent=[0.0] * 3,
    )
    summary = BenchSummary(model="m", load=LoadSweep(mode="rate", levels=[figures]))
    thresholds = Thresholds.model_validate({"slo": {"ttftMs": {"p90": 2000}}})
    judgement = judge(summary, thresholds, None)
    return [figure_json(f) for f in judgement.findings if f.outcome is not None]


def test_an_slo_figure_carries_its_percentile_limit_and_share() -> None:
    (row,) = judged_rows()
    assert row["figure"] == "ttft p90 at 4 req/s"
    assert row["outcome"] == "within"
    assert row["against"] == "limit"
    assert (row["candidate"], row["baseline"], row["unit"]) == (812.5, 2000.0, "ms")
    assert row["change"] == round(2 / 120, 6)  # the share above the limit
    low, high = row["low"], row["high"]
    assert isinstance(low, float)
    assert isinstance(high, float)
    assert 0 <= low <= 2 / 120 < high < 0.10  # within: the interval stays below 10%
    assert row["limit"] == 0.1  # a p90 lets 10% be above


def table_rows(text: str) -> list[list[str]]:
    table = re.search(r'<table id="gate-figures">(.*?)</table>', text, re.S)
    assert table is not None
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1), re.S)
    return [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows[1:]]


def test_the_page_fills_every_column_of_an_slo_row() -> None:
    report: dict[str, Any] = load_report(baseline=False)
    rows = judged_rows()
    report["verdict"] = {
        "outcome": "Passed",
        "reasons": ["ttft p90 at 4 req/s: within"],
        "deciding": 1,
        "figures": rows,
    }
    (cells,) = table_rows(page(report))
    assert cells == [
        "ttft p90 at 4 req/s",
        "812 ms",  # the measured p90 (pooled over the trials)
        "none: limit 2,000 ms",
        "1.7% above the limit",  # 2 of 120 requests
        "0.2% to 5.9%",  # its interval (the reason: "share <= 5.9%")
        "at most 10% above",  # what a p90 limit allows
        "within — decided the verdict",
    ]


def test_a_page_without_a_baseline_does_not_promise_one() -> None:
    text = page(load_report(baseline=False))
    head = text[text.index("<h1>") : text.index("</section>", text.index("<h1>"))]
    assert "none in this report" in head
    assert "candidate and baseline on the same axes" not in head
    assert "the candidate alone in every chart" in head
    both = page(load_report())
    assert "candidate and baseline on the same axes in every chart" in both
