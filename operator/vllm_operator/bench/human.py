"""The report for people: the published study's tables, then errors and the verdict.

Layout as in the study (shared/docs/published-study.md): one row per configuration with
latency and tok/s for short, medium and long prompts; aggregate tok/s by concurrent
streams; the quality tests with a pass/fail mark (against a paired baseline also its mark
and whether the two answers are the same text). Detail tables (TTFT, decode rate, spread)
follow, labelled, because the study's "tok/s" is output tokens over end-to-end latency and
readers confuse it with the decode rate. Every line is escaped (``api.text.printable``):
much of the text is the measured side's or a suite author's.
"""

from __future__ import annotations

from typing import Any

from vllm_operator.api.text import printable
from vllm_operator.bench.report import BenchReport
from vllm_operator.bench.report_power import power_lines


def render(report: BenchReport, label: str | None = None) -> str:
    data = report.to_json()
    name = label or report.config.model
    base = data["baseline"]
    out: list[str] = []
    if report.config.trials > 1 or base is not None:
        paired = "candidate and baseline interleaved, " if base is not None else ""
        out += [f"({paired}{report.config.trials} trial(s) per figure; medians over trials)", ""]
    out += _latency(data["latency"], name, base["latency"] if base else None)
    out += _concurrency(data["concurrency"], name, base["concurrency"] if base else None)
    out += _load(data["load"])
    out += _power(report)
    out += _quality(data["quality"])
    out += _errors(data["errors"])
    if base is not None:
        out += _baseline_notes(base)
    out += _verdict(report)
    # One line each, control characters escaped: a reason can quote a server's answer or a
    # test id, and an ESC [ or a newline in it could draw a fake verdict over the real one.
    return "\n".join(printable(line, newlines=False) for line in out) + "\n"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _median(stats: dict[str, float] | None) -> float | None:
    return None if stats is None else stats["median"]


def _latency(
    rows: list[dict[str, Any]], name: str, base_rows: list[dict[str, Any]] | None
) -> list[str]:
    if not rows:
        return []
    head = ["Configuration"]
    cells = [name]
    for row in rows:
        head += [f"{row['class'].capitalize()} lat.", f"{row['class'].capitalize()} tok/s"]
        cells += [_ms(_median(row["e2e_ms"])), _num(_median(row["e2e_tokens_per_second"]))]
    lines = [_row(cells)]
    if base_rows is not None:
        by_class = {r["class"]: r for r in base_rows}
        base_cells = ["baseline"]
        for row in rows:
            b = by_class.get(row["class"])
            base_cells += [
                _ms(_median(b["e2e_ms"])) if b else "-",
                _num(_median(b["e2e_tokens_per_second"])) if b else "-",
            ]
        lines.append(_row(base_cells))
    out = [
        "## Latency and generation speed (medians; tok/s = output tokens / end-to-end latency)",
        _row(head),
        _row(["---"] * len(head)),
        *lines,
        "",
        _row(["Prompt", "OK/sent", "TTFT", "E2E min-max", "E2E std", "decode tok/s", "tokens"]),
        _row(["---"] * 7),
    ]
    for row in rows:
        e2e = row["e2e_ms"]
        spread = "-" if e2e is None else f"{e2e['min']:,.0f}-{e2e['max']:,.0f} ms"
        std = "-" if e2e is None else f"{e2e['std']:,.1f} ms"
        tokens = _num(_median(row["output_tokens"]), 0)
        if row["tokens_estimated"]:
            tokens += " (estimated)"
        out.append(
            _row(
                [
                    row["class"],
                    f"{row['ok']}/{row['requests']}",
                    _ms(_median(row["ttft_ms"])),
                    spread,
                    std,
                    _num(_median(row["decode_tokens_per_second"])),
                    tokens,
                ]
            )
        )
    notes = sorted({row["decode_note"] for row in rows if row.get("decode_note")})
    out += [f"(decode tok/s '-': {note})" for note in notes]
    return [*out, ""]


def _concurrency(
    rows: list[dict[str, Any]], name: str, base_rows: list[dict[str, Any]] | None
) -> list[str]:
    if not rows:
        return []
    head = ["Streams", name, "req/s", "median stream tok/s", "scaling eff.", "OK/failed"]
    if base_rows is not None:
        head += ["baseline"]
    head += ["trials"]
    out = [
        "## Aggregate tok/s by concurrent streams (closed loop, steady window)",
        _row(head),
        _row(["---"] * len(head)),
    ]
    by_level = {r["concurrency"]: r for r in base_rows or []}
    for row in rows:
        eff = row["scaling_efficiency"]
        cells = [
            str(row["concurrency"]),
            _num(row["aggregate_tokens_per_second"]),
            _num(row["requests_per_second"], 2),
            _num(row["median_stream_tokens_per_second"]),
            "-" if eff is None else f"{eff:.0%}",
            f"{row['completed']}/{row['failed']}",
        ]
        if base_rows is not None:
            b = by_level.get(row["concurrency"])
            cells.append(_num(b["aggregate_tokens_per_second"]) if b else "-")
        cells.append(" ".join(_num(t["aggregate_tokens_per_second"]) for t in row["trials"]))
        out.append(_row(cells))
    return [*out, ""]


def _baseline_notes(base: dict[str, Any]) -> list[str]:
    version = base["server_version"] or "unknown"
    out = [f"## Baseline {base['url']} (vLLM {version})"]
    if base["quality"] is not None:
        q = base["quality"]
        out.append(f"- quality: {q['passed']}/{q['total']} passed (suite {q['suite']})")
    for name, info in base["errors"].items():
        out.append(f"- {name}: {info['count']} ({info['meaning']})")
    return [*out, ""]


def _quality(data: dict[str, Any] | None) -> list[str]:
    if data is None:
        return []
    diff = data.get("differential")
    rows = {} if diff is None else {t["id"]: t for t in diff["tests"]}
    head = ["Test", "Category", "Result", "Why"]
    if diff is not None:
        head[3:3] = ["Baseline", "Same answer"]
    out = [
        f"## Quality: {data['passed']}/{data['total']} passed (suite {data['suite']})",
        _row(head),
        _row(["---"] * len(head)),
    ]
    for test in data["tests"]:
        mark = "✓ pass" if test["passed"] else "✗ FAIL"
        why = "" if test["passed"] else test["reason"][:120].replace("|", "/").replace("\n", " ")
        cells = [test["id"], test["category"], mark, why]
        row = rows.get(test["id"])
        if diff is not None:
            cells[3:3] = (
                ["-", "-"]
                if row is None
                else [
                    "✓ pass" if row["baseline_passed"] else "✗ FAIL",
                    "yes" if row["identical"] else "differs",
                ]
            )
        out.append(_row(cells))
    run = len(data["tests"])
    if run < data["total"]:
        out.append(f"({data['total'] - run} test(s) not run)")
    if diff is not None:
        kept = (
            f"{diff['still_passing']} of the baseline's {diff['baseline_passed']} passing "
            f"test(s) still pass ({_pct(diff['still_passing_percent'])})"
        )
        out.append(
            f"Against the baseline: {diff['identical']}/{diff['compared']} answers identical "
            f"({_pct(diff['identical_percent'])}); {kept}"
        )
    return [*out, ""]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _errors(errors: dict[str, Any]) -> list[str]:
    if not errors:
        return ["## Errors: none", ""]
    out = ["## Errors (requests by class)"]
    for name, info in errors.items():
        example = f" e.g. {info['examples'][0]}" if info["examples"] else ""
        out.append(f"- {name}: {info['count']} ({info['meaning']}){example}")
    return [*out, ""]


def _verdict(report: BenchReport) -> list[str]:
    if not report.config.gated:
        return [f"## No gate (no thresholds or baseline given); exit {report.exit_code}"]
    verdict = report.verdict
    out = [f"## Gate: {verdict.outcome} (exit {report.exit_code})"]
    if verdict.headline:
        out.append(verdict.headline)
    if not verdict.deciding:
        return [*out, *(f"- {reason}" for reason in verdict.reasons)]
    out += ["", "Decided by:", *(f"- {reason}" for reason in verdict.decided_by_reasons())]
    rest = verdict.reasons[verdict.deciding :]
    if rest:
        out += ["", "Other figures and notes:", *(f"- {reason}" for reason in rest)]
    return out


def _load(load: dict[str, Any] | None) -> list[str]:
    """One row per (level, trial, server) of a workload's sweep."""
    if load is None:
        return []
    unit = "req/s" if load["mode"] == "rate" else "streams"
    head = [unit, "trial", "server", "sent/s", "TTFT p50", "TTFT p99", "ITL p99", "E2E p99"]
    head += ["goodput", "errors"]
    out = [f"## Load sweep ({load['mode']}; workload {load['workload'].get('kind', '?')})"]
    out += [_row(head), _row(["---"] * len(head))]
    for run in load["runs"]:
        p = run["percentiles"]
        out.append(
            _row(
                [
                    f"{run['level']:g}",
                    str(run["trial"] + 1),
                    run["server"],
                    _num(run["achieved_rate"]),
                    _ms(p["ttft_ms"]["p50"]),
                    _ms(p["ttft_ms"]["p99"]),
                    _ms(p["itl_ms"]["p99"]),
                    _ms(p["e2e_ms"]["p99"]),
                    f"{run['goodput_percent']:.1f}%",
                    f"{run['error_percent']:.1f}%",
                ]
            )
        )
    capacity = load["capacity"]
    if capacity is None:
        out.append("capacity: none established (no SLO limits given, or no level met them all)")
    else:
        out.append(f"capacity: {capacity:g} {unit} (the highest level meeting every SLO)")
    if load["stopped_at"] is not None:
        out.append(f"sweep stopped at its first breach: {load['stopped_at']:g} {unit}")
    return [*out, ""]


def _power(report: BenchReport) -> list[str]:
    """The plan's stated power beside the sweep's SLO figures (``bench.report_power``)."""
    thresholds = report.config.thresholds
    confidence = thresholds.confidence_percent / 100 if thresholds is not None else 0.95
    lines = power_lines(report.to_json(), confidence)
    if not lines:
        return []
    return ["## Stated power", lines[0], *(f"- {line}" for line in lines[1:]), ""]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"
