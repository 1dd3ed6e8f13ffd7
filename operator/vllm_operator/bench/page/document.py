"""The report page: one self-contained HTML file, safe to open whoever wrote the report.

Self-contained: plotly.js, the figures and the styles are inline, and a Content-Security-
Policy forbids every fetch (``default-src 'none'``), so the page works offline, from an
e-mail attachment or a CI artifact, and cannot call out. Safe: every string from the report
is escaped here with ``html.escape`` (model and class names, server versions, reasons, test
ids and categories, error meanings, workload values: written by the measured side or by
users); the figures travel as a JSON data island (``type="application/json"``, never run)
whose ``<``, ``>`` and ``/`` are \\u-escaped by plotly's encoder; and the only scripts that may
run are the two the page was built with, named by their SHA-256 in the policy, so even a
string that slipped through could not execute.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

import plotly.io as pio  # type: ignore[import-untyped]
from plotly.offline import get_plotlyjs  # type: ignore[import-untyped]

from vllm_operator import __version__
from vllm_operator.bench.page.charts import Chart, level_word, load_charts, study_charts
from vllm_operator.bench.page.compare import Comparison, Side, compare
from vllm_operator.bench.page.gate_chart import figure_cells, interval_chart
from vllm_operator.bench.page.view import Figure, Load, LoadRun, Quality, Report
from vllm_operator.gate.glossary import used_in

MAX_WORKLOAD_ROWS = 40

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;
background:#f6f7f9}
main{max-width:1200px;margin:0 auto;padding:24px}
h1{font-size:1.5rem;margin:0 0 4px}h2{font-size:1.15rem;margin:0 0 4px}
section{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:16px;margin:16px 0}
.caption,.muted{color:#5b6472;font-size:.9rem;margin:0 0 8px}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eceff3;vertical-align:top}
th{background:#f0f2f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{border-left:6px solid #8a93a3}.verdict p.outcome{font-size:1.3rem;font-weight:700;
margin:0 0 8px}.Passed{border-left-color:#2a9d3c}.Failed,.Error{border-left-color:#c62828}
.Inconclusive{border-left-color:#e0a100}.pass{color:#1f7a30;font-weight:600}
.fail{color:#b71c1c;font-weight:600}.chart{width:100%}
td.beyond{color:#b71c1c;font-weight:600}td.within{color:#1f7a30}td.undecided{color:#8a6100}
tr.deciding td:first-child{font-weight:700}p.headline{margin:0 0 8px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:8px 0}
dt{color:#5b6472}dd{margin:0;overflow-wrap:anywhere}
"""

DRAW = """(function () {
  var island = document.getElementById("report-figures");
  var figures = JSON.parse(island.textContent);
  var config = {displaylogo: false, responsive: true};
  Promise.all(figures.map(function (f) {
    return Plotly.newPlot(f.id, f.figure.data, f.figure.layout, config);
  })).then(function () {
    document.body.setAttribute("data-rendered", String(figures.length));
  }, function (error) {
    document.body.setAttribute("data-render-error", String(error));
    console.error("report: a chart failed to draw", error);
  });
})();"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _script_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def _fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def render(comparison: Comparison) -> str:
    """The whole page of ``comparison`` as one HTML string."""
    report = comparison.report
    load = report.load
    charts = study_charts(comparison) if load is None else load_charts(comparison, load)
    gate = interval_chart(report.verdict.figures) if report.verdict is not None else None
    charts = charts if gate is None else [gate, *charts]
    body = [
        _header(comparison),
        _verdict(comparison),
        *([] if load is None else [_load_summary(comparison, load)]),
        *(_chart_section(c) for c in charts),
        _quality(comparison),
        _errors(comparison),
        _footer(),
    ]
    island = _figures_json(charts)
    plotly_js = get_plotlyjs()
    policy = (
        "default-src 'none'; "
        f"script-src {_script_hash(plotly_js)} {_script_hash(DRAW)}; "
        "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; "
        "base-uri 'none'; form-action 'none'"
    )
    title = f"Benchmark report: {report.config.model or 'model'}"
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{esc(policy)}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{esc(title)}</title>",
            f"<style>{STYLE}</style>",
            f"<script>{plotly_js}</script>",
            "</head><body><main>",
            *body,
            "</main>",
            f'<script type="application/json" id="report-figures">{island}</script>',
            f"<script>{DRAW}</script>",
            "</body></html>",
            "",
        ]
    )


def _figures_json(charts: Sequence[Chart]) -> str:
    parts = [
        f'{{"id": {json.dumps(c.id)}, "figure": {pio.to_json(c.figure, validate=False)}}}'
        for c in charts
    ]
    # plotly's encoder already writes <, > and / as \\u escapes; this keeps it so regardless.
    return "[" + ",".join(parts).replace("<", "\\u003c").replace(">", "\\u003e") + "]"


def _dl(items: Iterable[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items) + "</dl>"


def _header(comparison: Comparison) -> str:
    report = comparison.report
    items = [("candidate", comparison.candidate.source)]
    if comparison.baseline is not None:
        items.append(("baseline", comparison.baseline.source))
    else:
        items.append(("baseline", "none in this report (--baseline OTHER.json adds one)"))
    if report.started_unix is not None:
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(report.started_unix))
        items.append(("started", started))
    if report.duration_seconds is not None:
        items.append(("duration", f"{report.duration_seconds:,.1f} s"))
    if report.config.trials is not None:
        items.append(("trials", str(report.config.trials)))
    if report.deadline_hit:
        items.append(("run", "cut short by its deadline"))
    if report.aborted:
        items.append(("run", f"stopped early: {report.aborted}"))
    model = report.config.model or "(model not named)"
    drawn = (
        "candidate and baseline on the same axes in every chart"
        if comparison.baseline is not None
        else "the candidate alone in every chart (no baseline to draw beside it)"
    )
    shapes = "load sweep" if report.load else "the study&#x27;s shapes"
    return (
        f"<section><h1>Benchmark report: {esc(model)}</h1>"
        f'<p class="muted">{shapes}: {drawn}</p>'
        f"{_dl(items)}</section>"
    )


def _verdict(comparison: Comparison) -> str:
    verdict = comparison.report.verdict
    if verdict is None:
        return (
            '<section class="verdict" id="verdict"><p class="outcome">No verdict</p>'
            '<p class="muted">This run had no gate (no thresholds): figures only.</p></section>'
        )
    deciding = verdict.deciding or 0
    shown = verdict.reasons[:deciding] if deciding else verdict.reasons
    reasons = "".join(f"<li>{esc(r)}</li>" for r in shown)
    rest = verdict.reasons[deciding:] if deciding else []
    more = ""
    if rest:
        items = "".join(f"<li>{esc(r)}</li>" for r in rest)
        more = (
            f"<details><summary>{len(rest)} more: the figures and notes that did not "
            f"decide</summary><ul>{items}</ul></details>"
        )
    headline = f'<p class="headline">{esc(verdict.headline)}</p>' if verdict.headline else ""
    decided = '<p class="muted">Decided by:</p>' if deciding else ""
    note = ""
    if comparison.baseline_file is not None:
        note = (
            '<p class="muted">The verdict is the report&#x27;s own, judged against its own '
            f"baseline; the charts compare with {esc(comparison.baseline_file)}.</p>"
        )
    return (
        f'<section class="verdict {esc(verdict.outcome)}" id="verdict">'
        f'<p class="outcome">Verdict: {esc(verdict.outcome.upper())}</p>{headline}{decided}'
        f"<ul>{reasons or '<li>no reasons given</li>'}</ul>{more}{note}"
        f"{_figure_table(verdict.figures)}{_words(verdict.reasons)}</section>"
    )


def _words(reasons: Sequence[str]) -> str:
    """What the reasons' own terms mean ("looks", "floor", "undecided"...), from the one
    glossary (``gate.glossary``, docs/glossary.md), so no word on the page goes unexplained."""
    used = used_in(list(reasons))
    if not used:
        return ""
    items = "".join(f"<dt>{esc(term)}</dt><dd>{esc(text)}</dd>" for term, text in used)
    return (
        '<h2>Words in these reasons</h2><p class="muted">From the glossary '
        f'(docs/glossary.md).</p><dl id="glossary">{items}</dl>'
    )


def _figure_table(figures: Sequence[Figure]) -> str:
    """Every judged figure, deciding first: candidate, baseline, change, interval, limit,
    what the gate decided and why it stopped."""
    if not figures:
        return ""
    head = "".join(
        f"<th>{h}</th>"
        for h in ("figure", "candidate", "baseline", "change", "interval", "limit", "outcome")
    )
    rows = []
    for figure in figures:
        cells = figure_cells(figure)
        tds = [f"<td>{esc(cells[0])}</td>"]
        tds += [f'<td class="num">{esc(c)}</td>' for c in cells[1:6]]
        tds.append(f'<td class="{esc(figure.outcome or "")}">{esc(cells[6])}</td>')
        rows.append(f'<tr class="{"deciding" if figure.deciding else ""}">{"".join(tds)}</tr>')
    return (
        '<h2>Judged figures</h2><table id="gate-figures"><tr>'
        + head
        + "</tr>"
        + "".join(rows)
        + "</table>"
    )


def _flatten(value: Any, prefix: str = "") -> Iterable[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _flatten(item, f"{prefix}{key}.")
    elif isinstance(value, list) and value and isinstance(value[0], (dict, list)):
        for n, item in enumerate(value):
            yield from _flatten(item, f"{prefix}{n}.")
    else:
        text = json.dumps(value) if not isinstance(value, str) else value
        yield prefix.rstrip("."), text[:300]


def _load_summary(comparison: Comparison, load: Load) -> str:
    word = level_word(load)
    how = "open loop, Poisson arrivals" if load.mode == "rate" else "closed loop, streams"
    asked = ", ".join(f"{v:g}" for v in load.levels_asked if v is not None) or "–"
    lines = [f"{how} at {asked} {word}"]
    if load.capacity is not None:
        lines.append(f"capacity: {load.capacity:g} {word} (the highest level meeting every SLO)")
    else:
        lines.append("capacity: none (no level met every SLO, or no SLO was set)")
    if load.stopped_at is not None:
        lines.append(f"the sweep stopped at {load.stopped_at:g} {word}: an SLO was breached")
    rows = []
    for n, (key, value) in enumerate(_flatten(load.workload)):
        if n == MAX_WORKLOAD_ROWS:
            rows.append(("…", "more workload fields not shown"))
            break
        rows.append((key, value))
    return (
        '<section id="load"><h2>Load</h2>'
        + "".join(f"<p>{esc(line)}</p>" for line in lines)
        + _power(comparison.report.stated_power)
        + (f"<h2>Workload</h2>{_dl(rows)}" if rows else "")
        + _level_table(comparison, load)
        + "</section>"
    )


def _power(lines: Sequence[str]) -> str:
    """The plan's stated power beside the SLO figures (``bench.report_power``)."""
    if not lines:
        return ""
    items = "".join(f"<li>{esc(line)}</li>" for line in lines[1:])
    return f'<h2>Stated power</h2><p class="muted">{esc(lines[0])}</p><ul>{items}</ul>'


def _level_table(comparison: Comparison, load: Load) -> str:
    head = (
        f"<tr><th>revision</th><th>{esc(level_word(load))}</th><th>trial</th>"
        "<th>arrivals/s</th><th>completed</th><th>errors %</th><th>goodput %</th>"
        "<th>TTFT p99 ms</th><th>ITL p99 ms</th><th>E2E p99 ms</th><th>tokens/s</th></tr>"
    )
    rows = []
    for side in comparison.sides:
        for run in sorted(side.runs, key=lambda r: (r.level, r.trial)):
            rows.append(_level_row(side, run))
    return "<h2>Figures per level and trial</h2><table>" + head + "".join(rows) + "</table>"


def _level_row(side: Side, run: LoadRun) -> str:
    p = run.percentiles

    def p99(values: Any) -> str:
        return _fmt(None if values is None else values.p99)

    cells = [
        f"{run.level:g}",
        str(run.trial + 1),  # counted from 1, as bench prints it
        _fmt(run.achieved_rate, 2),
        f"{run.completed}/{run.requests}",
        _fmt(run.error_percent),
        _fmt(run.goodput_percent),
        p99(p.ttft_ms),
        p99(p.itl_ms),
        p99(p.e2e_ms),
        _fmt(run.output_tokens_per_second),
    ]
    return (
        f"<tr><td>{side.role}</td>"
        + "".join(f'<td class="num">{esc(c)}</td>' for c in cells)
        + "</tr>"
    )


def _chart_section(chart: Chart) -> str:
    return (
        f'<section><h2>{esc(chart.title)}</h2><p class="caption">{esc(chart.caption)}</p>'
        f'<div class="chart" id="{esc(chart.id)}"></div></section>'
    )


def _mark(passed: bool | None) -> str:
    if passed is None:
        return '<td class="muted">–</td>'
    return '<td class="pass">pass</td>' if passed else '<td class="fail">FAIL</td>'


def _quality(comparison: Comparison) -> str:
    cand = comparison.candidate.server.quality
    base = None if comparison.baseline is None else comparison.baseline.server.quality
    if cand is None and base is None:
        return (
            '<section id="quality"><h2>Quality</h2>'
            '<p class="muted">No quality suite ran.</p></section>'
        )
    totals = [f"candidate {_total(cand)}"]
    if comparison.baseline is not None:
        totals.append(f"baseline {_total(base)}")
    diff = cand.differential if cand is not None else None
    same = {t.id: t.identical for t in diff.tests} if diff is not None else {}
    if diff is not None and diff.compared:
        totals.append(
            f"same answer as the baseline: {diff.identical}/{diff.compared} "
            f"({_fmt(diff.identical_percent)}%)"
        )
        totals.append(
            f"baseline's passes still passing: {diff.still_passing}/{diff.baseline_passed} "
            f"({_fmt(diff.still_passing_percent)}%)"
        )
    base_by_id = {t.id: t for t in base.tests} if base is not None else {}
    rows = []
    tests = cand.tests if cand is not None else []
    for test in tests:
        other = base_by_id.get(test.id)
        row = (
            f"<tr><td>{esc(test.id)}</td><td>{esc(test.category)}</td>{_mark(test.passed)}"
            f"<td>{esc(test.reason)}</td>"
        )
        if comparison.baseline is not None:
            row += _mark(None if other is None else other.passed)
        if same:
            identical = same.get(test.id)
            row += f"<td>{'–' if identical is None else 'same' if identical else 'differs'}</td>"
        rows.append(row + "</tr>")
    head = "<tr><th>test</th><th>category</th><th>candidate</th><th>why</th>"
    head += "<th>baseline</th>" if comparison.baseline is not None else ""
    head += "<th>answer vs baseline</th>" if same else ""
    return (
        '<section id="quality"><h2>Quality</h2>'
        f'<p class="muted">{esc("; ".join(totals))}</p>'
        f"<table>{head}</tr>{''.join(rows)}</table></section>"
    )


def _total(quality: Quality | None) -> str:
    if quality is None:
        return "not run"
    return f"{quality.passed}/{quality.total} passed ({quality.suite})"


def _errors(comparison: Comparison) -> str:
    names = sorted({n for s in comparison.sides for n in s.server.errors})
    if not names:
        return '<section id="errors"><h2>Failed requests</h2><p class="muted">None.</p></section>'
    rows = []
    for name in names:
        counts = []
        meaning = ""
        for side in comparison.sides:
            found = side.server.errors.get(name)
            counts.append("0" if found is None else str(found.count))
            meaning = meaning or (found.meaning if found else "")
        rows.append(
            f"<tr><td>{esc(name)}</td><td>{esc(meaning)}</td>"
            + "".join(f'<td class="num">{esc(c)}</td>' for c in counts)
            + "</tr>"
        )
    head = "<tr><th>class</th><th>meaning</th>" + "".join(
        f"<th>{s.role}</th>" for s in comparison.sides
    )
    return (
        '<section id="errors"><h2>Failed requests</h2>'
        f"<table>{head}</tr>{''.join(rows)}</table></section>"
    )


def _footer() -> str:
    return (
        f'<p class="muted">vllm-operator {esc(__version__)} report; self-contained (no '
        "network is used to view it).</p>"
    )


def render_report(report: Report, other: Report | None = None, other_name: str = "") -> str:
    """The page of ``report``, against ``other``'s candidate when given."""
    return render(compare(report, other, other_name))
