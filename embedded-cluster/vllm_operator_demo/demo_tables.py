"""The demo's closing tables, in the layout of the published 0.16 -> 0.17 study.

Built only from what the gate measured (the ``BenchSummary`` of each verdict the operator
stored in ``status.history``), so a reader can put them next to the study's figures. The
simulator runs time-scaled; figures are shown at full scale (latency divided by the time
scale, tokens/s multiplied by it) and the heading says so, the raw measurement being one
multiplication away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vllm_operator.api.summary import BenchSummary

CLASSES = ("short", "medium", "long")


@dataclass(frozen=True)
class Row:
    """One configuration of the story and what its gate said."""

    label: str
    revision: str
    outcome: str
    reasons: tuple[str, ...]
    summary: BenchSummary | None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def latency_table(rows: Sequence[Row], time_scale: float) -> list[str]:
    out = [
        "| Configuration | Short lat. | Short tok/s | Med lat. | Med tok/s "
        "| Long lat. | Long tok/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = [row.label]
        figures = {f.prompt_class: f for f in (row.summary.latency if row.summary else [])}
        for cls in CLASSES:
            fig = figures.get(cls)
            cells.append(_ms(fig.median_ms / time_scale if fig else None))
            cells.append(_num(fig.e2e_tokens_per_second * time_scale if fig else None))
        out.append("| " + " | ".join(cells) + " |")
    return out


def concurrency_table(rows: Sequence[Row], time_scale: float) -> list[str]:
    levels = sorted({c.concurrency for row in rows if row.summary for c in row.summary.concurrency})
    out = [
        "| Streams | " + " | ".join(row.label for row in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]
    for level in levels:
        cells = [str(level)]
        for row in rows:
            figs = {c.concurrency: c for c in (row.summary.concurrency if row.summary else [])}
            fig = figs.get(level)
            cells.append(_num(fig.aggregate_tokens_per_second * time_scale if fig else None))
        out.append("| " + " | ".join(cells) + " |")
    return out


def quality_table(rows: Sequence[Row]) -> list[str]:
    out = ["| Configuration | Passed | Failed tests |", "|---|---|---|"]
    for row in rows:
        quality = row.summary.quality if row.summary else None
        if quality is None:
            out.append(f"| {row.label} | - | - |")
            continue
        failed = ", ".join(quality.failed) or "none"
        out.append(f"| {row.label} | {quality.passed}/{quality.total} | {failed} |")
    return out


def verdict_table(rows: Sequence[Row]) -> list[str]:
    out = ["| Configuration | Revision | Verdict | Reasons |", "|---|---|---|---|"]
    for row in rows:
        shown = [r if len(r) <= 240 else r[:120] + " ... " + r[-115:] for r in row.reasons[:3]]
        reasons = "; ".join(shown) + (" ..." if len(row.reasons) > 3 else "")
        out.append(f"| {row.label} | {row.revision} | {row.outcome} | {reasons or '-'} |")
    return out


def render(rows: Sequence[Row], time_scale: float) -> str:
    scale = (
        f"(measured with the simulator at time scale {time_scale:g}; shown at full scale: "
        f"latency / {time_scale:g}, tok/s x {time_scale:g})"
    )
    parts = ["## Gate verdicts", *verdict_table(rows), ""]
    if not any(row.summary for row in rows):
        return "\n".join(parts)  # nothing was measured: no figures to show
    parts += [
        f"## Latency and generation speed {scale}",
        *latency_table(rows, time_scale),
        "",
        "## Aggregate tok/s by concurrent streams",
        *concurrency_table(rows, time_scale),
        "",
        "## Quality",
        *quality_table(rows),
        "",
    ]
    return "\n".join(parts)
