"""The gate: may this candidate serve? A pure function of (summary, thresholds, baseline).

The benchmark Job computes a verdict for its log and exit code, and the operator computes
it again from the summary it reads back and the stable revision's stored summary. Both must
agree, so nothing here reads a clock, a file or the network, and the result depends only on
the three values passed in (docs/bench.md lists every rule).

Outcomes, strongest first: **Failed** (a limit was broken or the server misbehaved),
**Error** (the benchmark could not measure what it needed), **Inconclusive** (measured, but
not comparable: too few samples, or the baseline lacks the figure), **Passed**. Failed and
Error never promote; nothing with a failed request in it can pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vllm_operator.api.spec import Thresholds
from vllm_operator.api.summary import (
    SUMMARY_SCHEMA,
    BenchSummary,
    ConcurrencyFigures,
    GateVerdict,
    LatencyFigures,
)
from vllm_operator.gate.classes import describe, kind_of

Severity = Literal["fail", "error", "inconclusive", "note"]

MIN_LATENCY_SAMPLES = 3
"""Fewer measured requests per prompt class than this and a median is not a figure."""

_ORDER: dict[Severity, int] = {"fail": 0, "error": 1, "inconclusive": 2, "note": 3}


@dataclass(frozen=True)
class Finding:
    """One thing the gate noticed."""

    severity: Severity
    text: str


def verdict(
    summary: BenchSummary,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    *,
    require_paired: bool = False,
) -> GateVerdict:
    """Judge one candidate's summary against limits and the stable revision's summary."""
    # Stand-in for gate-measure's paired gate (CONTRACTS.md), replaced when it is merged.
    if require_paired and getattr(summary, "paired_baseline", None) is None:
        return GateVerdict(
            outcome="Error", reasons=["twin mode: the benchmark measured no paired baseline"]
        )
    findings = [
        *_schema(summary),
        *_errors(summary),
        *_quality_limits(summary, thresholds),
        *_latency_limits(summary, thresholds),
        *_throughput_limits(summary, thresholds),
        *_regressions(summary, thresholds, baseline),
    ]
    severities = {f.severity for f in findings}
    if "fail" in severities:
        outcome: Literal["Passed", "Failed", "Inconclusive", "Error"] = "Failed"
    elif "error" in severities:
        outcome = "Error"
    elif "inconclusive" in severities:
        outcome = "Inconclusive"
    else:
        outcome = "Passed"
    ordered = sorted(findings, key=lambda f: _ORDER[f.severity])  # stable: keeps rule order
    reasons = [f.text for f in ordered]
    if outcome == "Passed" and not any(f.severity == "note" for f in findings):
        reasons.append("every measured figure is within its limits")
    return GateVerdict(outcome=outcome, reasons=reasons)


def _schema(summary: BenchSummary) -> list[Finding]:
    if summary.schema_ != SUMMARY_SCHEMA:
        return [Finding("error", f"summary format {summary.schema_!r} is not {SUMMARY_SCHEMA}")]
    return []


def _errors(summary: BenchSummary) -> list[Finding]:
    found = []
    for name in sorted(summary.errors):
        count = summary.errors[name]
        if count <= 0:
            continue
        severity: Severity = "fail" if kind_of(name) == "server" else "error"
        found.append(Finding(severity, f"{count} request(s) {name}: {describe(name)}"))
    return found


def _quality_limits(summary: BenchSummary, thresholds: Thresholds) -> list[Finding]:
    limits = thresholds.quality
    if limits.min_passed is None and not limits.must_pass:
        return []
    quality = summary.quality
    if quality is None:
        return [Finding("error", "quality limits are set but no quality suite was run")]
    found = []
    if limits.min_passed is not None and quality.passed < limits.min_passed:
        found.append(
            Finding(
                "fail",
                f"quality {quality.passed}/{quality.total} passed, fewer than minPassed "
                f"{limits.min_passed} (failed: {', '.join(quality.failed) or '-'})",
            )
        )
    for test_id in limits.must_pass:
        if test_id in quality.failed:
            found.append(Finding("fail", f"must-pass quality test {test_id} failed"))
        elif quality.failed_omitted > 0:
            found.append(
                Finding("inconclusive", f"must-pass test {test_id}: failed list was cut short")
            )
    return found


def _latency_limits(summary: BenchSummary, thresholds: Thresholds) -> list[Finding]:
    limits = thresholds.latency_ms
    by_class = {f.prompt_class: f for f in summary.latency}
    found = []
    for name, limit in (("short", limits.short), ("medium", limits.medium), ("long", limits.long)):
        if limit is None:
            continue
        figure = by_class.get(name)
        if figure is None:
            found.append(Finding("error", f"latency limit for {name} prompts but not measured"))
        elif figure.requests < MIN_LATENCY_SAMPLES:
            found.append(Finding("inconclusive", _thin_latency(figure)))
        elif figure.median_ms > limit:
            found.append(
                Finding(
                    "fail",
                    f"{name} prompts: median latency {figure.median_ms:.0f} ms > limit "
                    f"{limit:.0f} ms",
                )
            )
    return found


def _throughput_limits(summary: BenchSummary, thresholds: Thresholds) -> list[Finding]:
    by_level = {f.concurrency: f for f in summary.concurrency}
    found = []
    for limit in thresholds.throughput:
        figure = by_level.get(limit.concurrency)
        if figure is None:
            found.append(
                Finding("error", f"throughput limit at {limit.concurrency} streams: not measured")
            )
        elif figure.requests < figure.concurrency:
            found.append(Finding("inconclusive", _thin_level(figure)))
        elif figure.aggregate_tokens_per_second < limit.min_tokens_per_second:
            found.append(
                Finding(
                    "fail",
                    f"{limit.concurrency} streams: {figure.aggregate_tokens_per_second:.1f} "
                    f"tok/s < limit {limit.min_tokens_per_second:.1f}",
                )
            )
    return found


def _regressions(
    summary: BenchSummary, thresholds: Thresholds, baseline: BenchSummary | None
) -> list[Finding]:
    allowed = thresholds.max_regression_percent
    if allowed is None:
        return []
    if baseline is None:
        return [Finding("note", "no baseline: regressions not checked (first revision)")]
    if baseline.schema_ != SUMMARY_SCHEMA:
        return [Finding("inconclusive", f"baseline format {baseline.schema_!r} not comparable")]
    broken = sorted(k for k, v in baseline.errors.items() if v > 0)
    if broken:
        return [Finding("inconclusive", f"baseline has failed requests ({', '.join(broken)})")]
    return [
        *_latency_regressions(summary, baseline, allowed),
        *_throughput_regressions(summary, baseline, allowed),
        *_quality_regression(summary, baseline, allowed),
    ]


def _latency_regressions(
    summary: BenchSummary, baseline: BenchSummary, allowed: float
) -> list[Finding]:
    base_by_class = {f.prompt_class: f for f in baseline.latency}
    found = []
    for figure in summary.latency:
        base = base_by_class.get(figure.prompt_class)
        name = figure.prompt_class
        if figure.requests < MIN_LATENCY_SAMPLES:
            found.append(Finding("inconclusive", _thin_latency(figure)))
        elif base is None:
            found.append(Finding("inconclusive", f"baseline has no {name}-prompt latency"))
        elif base.requests < MIN_LATENCY_SAMPLES or base.median_ms <= 0:
            found.append(Finding("inconclusive", f"baseline {_thin_latency(base)}"))
        else:
            change = (figure.median_ms - base.median_ms) / base.median_ms * 100
            if change > allowed:
                found.append(
                    Finding(
                        "fail",
                        f"{name} prompts: median latency {figure.median_ms:.0f} ms is "
                        f"{change:.1f}% above stable {base.median_ms:.0f} ms (max {allowed:g}%)",
                    )
                )
    return found


def _throughput_regressions(
    summary: BenchSummary, baseline: BenchSummary, allowed: float
) -> list[Finding]:
    base_by_level = {f.concurrency: f for f in baseline.concurrency}
    found = []
    for figure in summary.concurrency:
        base = base_by_level.get(figure.concurrency)
        level = figure.concurrency
        if figure.requests < figure.concurrency:
            found.append(Finding("inconclusive", _thin_level(figure)))
        elif base is None:
            found.append(Finding("inconclusive", f"baseline has no figure at {level} streams"))
        elif base.requests < base.concurrency or base.aggregate_tokens_per_second <= 0:
            found.append(Finding("inconclusive", f"baseline {_thin_level(base)}"))
        else:
            drop = (
                (base.aggregate_tokens_per_second - figure.aggregate_tokens_per_second)
                / base.aggregate_tokens_per_second
                * 100
            )
            if drop > allowed:
                found.append(
                    Finding(
                        "fail",
                        f"{level} streams: {figure.aggregate_tokens_per_second:.1f} tok/s is "
                        f"{drop:.1f}% below stable {base.aggregate_tokens_per_second:.1f} "
                        f"(max {allowed:g}%)",
                    )
                )
    return found


def _quality_regression(
    summary: BenchSummary, baseline: BenchSummary, allowed: float
) -> list[Finding]:
    quality, base = summary.quality, baseline.quality
    if quality is None:
        return []
    if base is None:
        return [Finding("inconclusive", "baseline has no quality result")]
    if (quality.suite, quality.total) != (base.suite, base.total):
        return [
            Finding(
                "inconclusive",
                f"quality suites differ ({quality.suite} {quality.total} tests vs baseline "
                f"{base.suite} {base.total})",
            )
        ]
    if base.passed == 0:
        return []
    drop = (base.passed - quality.passed) / base.passed * 100
    if drop > allowed:
        return [
            Finding(
                "fail",
                f"quality {quality.passed}/{quality.total} is {drop:.1f}% below stable "
                f"{base.passed}/{base.total} (max {allowed:g}%)",
            )
        ]
    return []


def _thin_latency(figure: LatencyFigures) -> str:
    return (
        f"{figure.prompt_class} prompts: {figure.requests} request(s) measured, "
        f"fewer than {MIN_LATENCY_SAMPLES}: too few to compare"
    )


def _thin_level(figure: ConcurrencyFigures) -> str:
    return (
        f"{figure.concurrency} streams: {figure.requests} request(s) completed, fewer than "
        "one per stream: too few to compare"
    )
