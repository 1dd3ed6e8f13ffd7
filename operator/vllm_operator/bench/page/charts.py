"""The report's charts as plotly figures, candidate and baseline on the same axes.

Why plotly: its figures are JSON that its own JavaScript library draws in the browser, with
zoom, hover read-outs and legend toggles that a person comparing two revisions uses, and the
library ships inside the Python wheel (``plotly.offline.get_plotlyjs()``), so the page can
inline it and work with no network at all. Its figure state stays inspectable in the page
(``div.data``), which the Chromium test reads to check that every chart holds both
revisions. (Bokeh needs numpy and pandas; Altair/Vega inline only with a separate converter;
matplotlib draws static images without hover.) It is an optional dependency
(``pip install 'vllm-operator[report]'``): 64 MB installed, too much for the benchmark
image's size budget, and the Job does not draw pages.

Every trace carries ``meta`` = "candidate" or "baseline" (what the test inspects) and a name
with the revision's server version; the only strings taken from the report are prompt-class
names and server versions, escaped here because plotly.js renders a subset of HTML in labels.
Where one axis spans 10x or more (a 14 ms short class beside a 939 ms long one) it is a log
axis. Samples are capped per chart
(``MAX_POINTS_PER_CHART``), so a huge report cannot make a huge page.
"""

from __future__ import annotations

import html
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]
from plotly.subplots import make_subplots  # type: ignore[import-untyped]

from vllm_operator.bench.page.compare import Comparison, Side
from vllm_operator.bench.page.view import Load, LoadRun, Percentiles, Sample

COLORS = {"candidate": "#1f62b4", "baseline": "#e8710a"}
PERCENTILE_DASH = {"p50": "solid", "p90": "dot", "p95": "dashdot", "p99": "dash"}
METRICS = (
    ("ttft_ms", "time to first token"),
    ("itl_ms", "inter-token latency"),
    ("tpot_ms", "time per output token"),
    ("e2e_ms", "end-to-end latency"),
)
MAX_POINTS_PER_CHART = 32_000
"""Samples drawn in one distribution chart, over every level and both revisions."""


@dataclass(frozen=True)
class Chart:
    """One figure of the page: a fixed id, title and caption (plain text) and the figure."""

    id: str
    title: str
    caption: str
    figure: Any  # plotly.graph_objects.Figure (untyped library)


def _layout(fig: Any, height: int, *, legend_below: bool = False, **extra: Any) -> None:
    """Common looks; a figure of subplots keeps its legend below, clear of their titles."""
    legend = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0}
    if legend_below:
        legend = {"orientation": "h", "yanchor": "top", "y": -0.12, "x": 0}
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 70, "r": 20, "t": 40, "b": 140 if legend_below else 60},
        legend=legend,
        font={"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 13},
        **extra,
    )


def _box(
    side: Side, xs: list[str], ys: list[float], *, marker_size: int | None = None, **style: Any
) -> Any:
    """One revision's box trace: its name, colour and legend group, so charts pair up."""
    marker: dict[str, Any] = {"color": COLORS[side.role]}
    if marker_size is not None:
        marker["size"] = marker_size
    return go.Box(
        x=xs,
        y=ys,
        name=html.escape(side.label),
        meta=side.role,
        legendgroup=side.role,
        marker=marker,
        **style,
    )


SPREAD_FOR_LOG = 10.0
"""Figures on one axis spanning this factor or more get a log axis: 14 ms and 939 ms on a
linear one leave the short class flat at zero."""


def _log_if_spread(fig: Any, values: Iterable[float]) -> None:
    positive = [v for v in values if v is not None and v > 0]
    if positive and max(positive) >= SPREAD_FOR_LOG * min(positive):
        fig.update_yaxes(type="log")
        fig.update_layout(yaxis_title=f"{fig.layout.yaxis.title.text}, log scale")


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _thin(values: Sequence[float], limit: int) -> list[float]:
    if len(values) <= limit:
        return list(values)
    last = len(values) - 1
    return [values[round(i * last / (limit - 1))] for i in range(limit)]


# ---- the study: latency per prompt class, tokens/s per concurrency level -----------------


def study_charts(comparison: Comparison) -> list[Chart]:
    sides = comparison.sides
    return [
        _class_latency(sides),
        _class_ttft(sides),
        _concurrency(sides),
    ]


def _class_latency(sides: Sequence[Side]) -> Chart:
    fig = go.Figure()
    for side in sides:
        xs: list[str] = []
        ys: list[float] = []
        for cls in side.server.latency:
            for value in cls.trials_median_e2e_ms:
                if value is not None:
                    xs.append(html.escape(cls.name))
                    ys.append(value)
        fig.add_trace(_box(side, xs, ys, boxpoints="all", pointpos=0, jitter=0.3))
    _layout(fig, 420, boxmode="group", yaxis_title="median end-to-end latency (ms)")
    fig.update_xaxes(title="prompt class")
    _log_if_spread(fig, [y for t in fig.data for y in t.y or ()])
    return Chart(
        "study-latency",
        "Median latency per prompt class, one point per trial",
        "Each point is one trial's median end-to-end latency at one stream; lower is better.",
        fig,
    )


def _class_ttft(sides: Sequence[Side]) -> Chart:
    fig = go.Figure()
    classes = max(1, *(len(s.server.latency) for s in sides))
    per_trace = max(50, MAX_POINTS_PER_CHART // (classes * len(sides)))
    for side in sides:
        xs: list[str] = []
        ys: list[float] = []
        for cls in side.server.latency:
            values = [r.ttft_ms for r in cls.per_request if r.ttft_ms is not None]
            kept = _thin(values, per_trace)
            xs += [html.escape(cls.name)] * len(kept)
            ys += kept
        fig.add_trace(_box(side, xs, ys, boxpoints="outliers"))
    _layout(fig, 420, boxmode="group", yaxis_title="time to first token (ms)")
    fig.update_xaxes(title="prompt class")
    _log_if_spread(fig, [y for t in fig.data for y in t.y or ()])
    return Chart(
        "study-ttft",
        "Time to first token per request, by prompt class",
        "The distribution over every measured request of each class (boxes: quartiles).",
        fig,
    )


def _concurrency(sides: Sequence[Side]) -> Chart:
    fig = go.Figure()
    levels: set[int] = set()
    for side in sides:
        rows = sorted(side.server.concurrency, key=lambda r: r.concurrency)
        levels |= {r.concurrency for r in rows}
        color = COLORS[side.role]
        fig.add_trace(
            go.Scatter(
                x=[r.concurrency for r in rows],
                y=[r.aggregate_tokens_per_second for r in rows],
                mode="lines+markers",
                name=html.escape(side.label),
                meta=side.role,
                legendgroup=side.role,
                line={"color": color},
            )
        )
        trials = [(r.concurrency, t.aggregate_tokens_per_second) for r in rows for t in r.trials]
        fig.add_trace(
            go.Scatter(
                x=[x for x, y in trials if y is not None],
                y=[y for _, y in trials if y is not None],
                mode="markers",
                name=f"{html.escape(side.label)} trials",
                meta=side.role,
                legendgroup=side.role,
                showlegend=False,
                marker={"color": color, "symbol": "circle-open", "size": 8},
            )
        )
    _layout(fig, 420, yaxis_title="aggregate output tokens/s")
    ticks = sorted(levels)
    fig.update_xaxes(title="concurrent streams", type="log", tickvals=ticks, ticktext=ticks)
    return Chart(
        "study-throughput",
        "Aggregate tokens/s against concurrent streams",
        "Lines: the median over trials; open circles: each trial. Higher is better.",
        fig,
    )


# ---- a load sweep: percentiles, distributions and throughput against load ---------------


def level_word(load: Load) -> str:
    return "requests/s" if load.mode == "rate" else "streams"


def _by_level(runs: Iterable[LoadRun]) -> dict[float, list[LoadRun]]:
    levels: dict[float, list[LoadRun]] = defaultdict(list)
    for run in runs:
        levels[run.level].append(run)
    return dict(sorted(levels.items()))


def _percentile(run: LoadRun, metric: str, p: str) -> float | None:
    values: Percentiles | None = getattr(run.percentiles, metric)
    return None if values is None else getattr(values, p)


def load_charts(comparison: Comparison, load: Load) -> list[Chart]:
    sides = comparison.sides
    return [
        _percentile_curves(sides, load),
        _distribution(sides, load, "ttft_ms", "Time to first token per request, by load level"),
        _distribution(sides, load, "itl_ms", "Inter-token latency per request, by load level"),
        _throughput(sides, load),
    ]


def _marks(fig: Any, load: Load, **where: Any) -> None:
    """Vertical lines at the capacity (met every SLO) and where the sweep stopped."""
    if load.capacity is not None:
        fig.add_vline(
            x=load.capacity, line={"color": "#2a9d3c", "dash": "dot"}, opacity=0.8, **where
        )
    if load.stopped_at is not None:
        fig.add_vline(
            x=load.stopped_at, line={"color": "#c62828", "dash": "dash"}, opacity=0.8, **where
        )


def _percentile_curves(sides: Sequence[Side], load: Load) -> Chart:
    fig = make_subplots(rows=2, cols=2, subplot_titles=[title for _, title in METRICS])
    for n, (metric, _) in enumerate(METRICS):
        row, col = n // 2 + 1, n % 2 + 1
        for side in sides:
            levels = _by_level(side.runs)
            for p, dash in PERCENTILE_DASH.items():
                ys = [_median(_percentile(r, metric, p) for r in runs) for runs in levels.values()]
                fig.add_trace(
                    go.Scatter(
                        x=list(levels),
                        y=ys,
                        mode="lines+markers",
                        name=f"{html.escape(side.label)} {p}",
                        meta=side.role,
                        legendgroup=f"{side.role}-{p}",
                        showlegend=n == 0,
                        line={"color": COLORS[side.role], "dash": dash},
                        marker={"size": 6},
                    ),
                    row=row,
                    col=col,
                )
        fig.update_yaxes(title_text="ms", row=row, col=col)
        fig.update_xaxes(title_text=level_word(load), row=row, col=col)
    _marks(fig, load, row="all", col="all")
    _layout(fig, 800, legend_below=True)
    return Chart(
        "load-percentiles",
        "Latency percentiles against load",
        "p50 solid, p90 dotted, p95 dash-dotted, p99 dashed; the median over trials at each "
        "level. Green dotted line: the capacity (highest level meeting every SLO); red dashed "
        "line: where the sweep stopped on a breach.",
        fig,
    )


def _label(load: Load, level: float) -> str:
    return f"{level:g} {level_word(load)}"


def _distribution(sides: Sequence[Side], load: Load, metric: str, title: str) -> Chart:
    fig = go.Figure()
    all_levels = sorted({r.level for s in sides for r in s.runs})
    per_trace = max(50, MAX_POINTS_PER_CHART // (max(1, len(all_levels)) * len(sides)))
    pick: Callable[[Sample], float | None] = lambda s: getattr(s, metric)  # noqa: E731
    for side in sides:
        xs: list[str] = []
        ys: list[float] = []
        for level, runs in _by_level(side.runs).items():
            values = [v for r in runs for s in r.samples if s.ok and (v := pick(s)) is not None]
            kept = _thin(values, per_trace)
            xs += [_label(load, level)] * len(kept)
            ys += kept
        fig.add_trace(_box(side, xs, ys, marker_size=3, boxpoints="outliers"))
    order = [_label(load, level) for level in all_levels]
    _layout(fig, 440, boxmode="group", yaxis_title=f"{metric[:-3]} (ms)")
    if _wide(fig):
        fig.update_yaxes(type="log")  # a queue at a high level spans decades: keep both ends
    fig.update_xaxes(title=level_word(load), categoryorder="array", categoryarray=order)
    return Chart(
        f"load-{metric.replace('_', '-')}",
        title,
        "Each level's successful requests, pooled over trials: boxes from the first to the "
        "third quartile with the median inside, whiskers to 1.5 interquartile ranges, the "
        "requests beyond them as points (a log axis when the values span decades).",
        fig,
    )


def _wide(fig: Any) -> bool:
    """Whether a chart's values span more than 20x (then a log axis shows both ends)."""
    values = [v for trace in fig.data for v in (trace.y or ()) if v is not None and v > 0]
    return bool(values) and max(values) > 20 * min(values)


def _throughput(sides: Sequence[Side], load: Load) -> Chart:
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=["output tokens/s", "requests/s", "share of requests (%)"],
    )
    series: list[tuple[int, str, str, str]] = [
        (1, "output_tokens_per_second", "tokens/s", "solid"),
        (2, "request_throughput", "completed req/s", "solid"),
        (2, "goodput_rps", "goodput req/s", "dash"),
        (2, "achieved_rate", "arrivals/s", "dot"),
        (3, "goodput_percent", "goodput %", "solid"),
        (3, "error_percent", "errors %", "dot"),
    ]
    for side in sides:
        levels = _by_level(side.runs)
        for col, field, what, dash in series:
            ys = [_median(getattr(r, field) for r in runs) for runs in levels.values()]
            fig.add_trace(
                go.Scatter(
                    x=list(levels),
                    y=ys,
                    mode="lines+markers",
                    name=f"{html.escape(side.label)} {what}",
                    meta=side.role,
                    legendgroup=f"{side.role}-{field}",
                    line={"color": COLORS[side.role], "dash": dash},
                    marker={"size": 6},
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text=level_word(load))
    _marks(fig, load, row="all", col="all")
    _layout(fig, 540, legend_below=True)
    return Chart(
        "load-throughput",
        "Throughput and goodput against load",
        "Goodput: requests per second that met every SLO of their level. The median over "
        "trials at each level.",
        fig,
    )
