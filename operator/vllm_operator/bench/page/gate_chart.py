"""The gate's picture: every judged figure's change, with its interval, against its limit.

One row per figure (the deciding ones first, as the verdict lists them): a point at the
measured change (candidate against the baseline, or against the figure's own limit for an
absolute SLO), a bar over its interval, and a tick at the limit, coloured by what the gate
decided (beyond, within, undecided). It is what a person asks of a gate, "how far from the
limit was each figure, and how sure", in one chart. Its traces carry ``meta`` "change" and
"limit" (the page test reads them); the figure names come from the report and are escaped,
as plotly.js renders a subset of HTML in labels.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

import plotly.graph_objects as go  # type: ignore[import-untyped]

from vllm_operator.bench.page.charts import Chart, _layout
from vllm_operator.bench.page.view import Figure

OUTCOME_COLORS = {"beyond": "#c62828", "within": "#2a9d3c", "undecided": "#e0a100"}
CHART_ID = "gate-intervals"


def drawn(figures: Sequence[Figure]) -> list[Figure]:
    """The figures with numbers to draw (a change, its interval and a limit)."""
    return [
        f
        for f in figures
        if None not in (f.change, f.low, f.high, f.limit) and f.outcome is not None
    ]


def interval_chart(figures: Sequence[Figure]) -> Chart | None:
    """The chart of ``figures`` (None when none has numbers)."""
    rows = drawn(figures)
    if not rows:
        return None
    names = [_name(f, n) for n, f in enumerate(rows)]
    pct = [(f.change or 0) * 100 for f in rows]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=pct,
            y=names,
            mode="markers",
            name="change, with its interval",
            meta="change",
            marker={"size": 11, "color": [OUTCOME_COLORS[f.outcome or "undecided"] for f in rows]},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [((f.high or 0) - (f.change or 0)) * 100 for f in rows],
                "arrayminus": [((f.change or 0) - (f.low or 0)) * 100 for f in rows],
                "thickness": 3,
                "width": 6,
            },
            customdata=[f.outcome for f in rows],
            hovertemplate="%{y}: %{x:+.1f}% (%{customdata})<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[(f.limit or 0) * 100 for f in rows],
            y=names,
            mode="markers",
            name="limit",
            meta="limit",
            marker={"symbol": "line-ns-open", "size": 26, "color": "#1d2330", "line": {"width": 3}},
            hovertemplate="%{y}: limit %{x:+.3g}%<extra></extra>",
        )
    )
    fig.add_vline(x=0, line={"color": "#8a93a3", "width": 1, "dash": "dot"})
    _layout(
        fig,
        140 + 36 * len(rows),
        xaxis_title="change (%): candidate against its baseline; SLO: share above its limit (%)",
    )
    fig.update_yaxes(autorange="reversed", automargin=True)
    return Chart(
        CHART_ID,
        "Each judged figure's change against its limit",
        "One row per figure, deciding figures first: the point is the measured change, the "
        "bar its interval, the black tick the limit (latency: higher is worse; tokens/s: "
        "lower is worse; an SLO percentile: the share of requests above its limit against "
        "the share it allows, 10% for a p90). Red: beyond the limit, green: within, amber: "
        "undecided.",
        fig,
    )


def _name(figure: Figure, n: int) -> str:
    """A row's label: the figure's name (unique, escaped), the deciding ones marked."""
    name = html.escape(figure.figure or f"figure {n + 1}")
    return f"<b>{name}</b>" if figure.deciding else name


def figure_cells(figure: Figure) -> list[str]:
    """A table row's cells as plain text (escaped where the page writes them)."""

    def value(x: float | None) -> str:
        if x is None:
            return "–"
        digits = 0 if figure.unit == "ms" and abs(x) >= 100 else 1
        return f"{x:,.{digits}f} {figure.unit}".strip()

    def pct(x: float | None, digits: int = 1) -> str:
        return "–" if x is None else f"{x * 100:+.{digits}f}%"

    outcome = {"beyond": "beyond the limit", "within": "within", "undecided": "undecided"}
    said = outcome.get(figure.outcome or "", "–")
    if figure.stop and figure.outcome == "undecided":
        said += f" ({STOPS.get(figure.stop, figure.stop)})"
    said += " — decided the verdict" if figure.deciding else ""
    if figure.against == "limit":
        return [figure.figure or "–", *_share_cells(figure, value), said]
    interval = "–" if figure.low is None else f"{pct(figure.low)} to {pct(figure.high)}"
    return [
        figure.figure or "–",
        value(figure.candidate),
        value(figure.baseline),
        pct(figure.change),
        interval,
        pct(figure.limit, 3 if figure.limit is not None and abs(figure.limit) < 0.01 else 1),
        said,
    ]


def _share_cells(figure: Figure, value: Callable[[float | None], str]) -> list[str]:
    """An SLO figure judged against its limit (``against="limit"``). A percentile: the
    measured percentile, the limit itself in the baseline's column, the share of observations
    above the limit with its interval, and the share the percentile allows (a p90: 10%). A
    share (errors, goodput): the share measured, its interval and its bound."""

    def share(x: float | None) -> str:
        return "–" if x is None else f"{x * 100:.2g}%" if x * 100 < 10 else f"{x * 100:.0f}%"

    interval = "–" if figure.low is None else f"{share(figure.low)} to {share(figure.high)}"
    if figure.unit == "%":  # a share itself (errors, goodput) against its bound
        bound = "at most" if figure.higher_is_worse else "at least"
        return [
            share(figure.change),
            f"none: limit {bound} {share(figure.limit)}",
            share(figure.change),
            interval,
            f"{bound} {share(figure.limit)}",
        ]
    return [
        value(figure.candidate),
        f"none: limit {value(figure.baseline)}",
        f"{share(figure.change)} above the limit",
        interval,
        f"at most {share(figure.limit)} above",
    ]


STOPS = {
    "budget": "time budget ran out",
    "failed-first": "another figure failed first",
    "plan-exhausted": "every allowed trial run",
    "early": "stopped early",
}
