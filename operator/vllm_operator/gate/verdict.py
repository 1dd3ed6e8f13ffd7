"""The gate: may this candidate serve? A pure function of (summary, thresholds, baseline).

The benchmark Job computes a verdict for its log and exit code, and the operator computes
it again from the summary it reads back and the stable revision's stored summary. Both must
agree, so nothing here reads a clock, a file or the network, and the result depends only on
the three values passed in (docs/bench.md lists every rule).

Outcomes, strongest first: **Failed** (a limit was broken or the server misbehaved),
**Error** (the benchmark could not measure what it needed), **Inconclusive** (measured, but
not comparable: too few samples, the baseline lacks the figure, or the interval of a
regression straddles its limit, see ``gate.regression``), **Passed**. Failed and Error never
promote; nothing with a failed request in it can pass. Absolute limits (latency, tokens/s,
quality) are here; comparisons with the baseline in ``gate.regression``, the quality
differential (the candidate's answers against the paired baseline's) in ``gate.differential``,
and service-level objectives of a load sweep (absolute and against the baseline) in
``gate.slo``.
"""

from __future__ import annotations

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    SUMMARY_SCHEMA,
    BenchSummary,
    TrialPlan,
    Verdict,
    VerdictOutcome,
)
from vllm_operator.gate.classes import describe, kind_of
from vllm_operator.gate.differential import differential_limits
from vllm_operator.gate.finding import FigureKey, Finding, Severity
from vllm_operator.gate.regression import (
    MIN_LATENCY_SAMPLES,
    judge_all,
    regressions,
    thin_latency,
    thin_level,
)
from vllm_operator.gate.slo import judge_slo

__all__ = ["MIN_LATENCY_SAMPLES", "Finding", "Severity", "open_figures", "verdict"]

_ORDER: dict[Severity, int] = {"fail": 0, "error": 1, "inconclusive": 2, "note": 3}


def verdict(
    summary: BenchSummary,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    *,
    require_paired: bool = False,
    plan: TrialPlan | None = None,
) -> Verdict:
    """Judge one candidate's summary against limits and a baseline.

    The baseline compared against is ``summary.paired_baseline`` when present (measured in
    the same run; ``baseline`` is then ignored), else ``baseline`` (a stored summary).
    ``require_paired``: the caller asked for a paired measurement (``gate.baseline.mode:
    twin``), so a summary without one is an Error, never a silent fallback.
    ``plan``: the sequential trial plan the run was asked to follow (the operator passes its
    spec's); None takes the summary's own ``trialPlan``, and a summary without one was a
    fixed number of trials, judged as one look (``gate.sequential``).
    """
    plan = plan if plan is not None else summary.trial_plan
    findings = [
        *_schema(summary),
        *_paired(summary, require_paired),
        *_errors(summary),
        *_quality_limits(summary, thresholds),
        *differential_limits(summary, thresholds),
        *_latency_limits(summary, thresholds),
        *_throughput_limits(summary, thresholds),
        *regressions(summary, thresholds, baseline, plan),
        *(j.finding for j in judge_slo(summary, thresholds, baseline, plan)),
        *_warmup(summary),
    ]
    severities = {f.severity for f in findings}
    if "fail" in severities:
        outcome: VerdictOutcome = "Failed"
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
    return Verdict(outcome=outcome, reasons=reasons)


def open_figures(
    summary: BenchSummary,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    plan: TrialPlan | None,
) -> set[FigureKey]:
    """The figures more trials could still decide, on the same judgement as ``verdict``.

    The benchmark measures these once more between rounds (sequential trials), and only
    these. Nothing is open once the run is Failed for good: a server fault counted, or a
    figure decided beyond its limit (a regression, an SLO limit); more trials cannot undo
    either. (An absolute latency or tok/s limit is judged on medians that more trials can
    move, and a missing quality result is only missing until the suite runs at the end:
    neither stops the trials.)
    """
    if any(count > 0 and kind_of(name) == "server" for name, count in summary.errors.items()):
        return set()
    judged = judge_all(summary, thresholds, baseline, plan)
    judged += judge_slo(summary, thresholds, baseline, plan)
    if any(j.finding.severity == "fail" and j.figure is not None for j in judged):
        return set()  # final whatever the open figures would show: no more trials
    return {j.figure for j in judged if j.undecided and j.figure is not None}


def _schema(summary: BenchSummary) -> list[Finding]:
    if summary.schema_ != SUMMARY_SCHEMA:
        return [Finding("error", f"summary format {summary.schema_!r} is not {SUMMARY_SCHEMA}")]
    return []


def _warmup(summary: BenchSummary) -> list[Finding]:
    warm = summary.warmup
    if warm is None or warm.settled:
        return []
    passes = f"{warm.candidate_passes} pass(es) on the candidate"
    if warm.baseline_passes is not None:
        passes += f", {warm.baseline_passes} on the baseline"
    return [
        Finding(
            "note",
            f"the warm-up did not settle ({passes}): the pass or time cap ended it before two "
            "passes agreed, so the first trials may still include warm-up effects",
        )
    ]


def _paired(summary: BenchSummary, require_paired: bool) -> list[Finding]:
    if require_paired and summary.paired_baseline is None:
        return [
            Finding(
                "error",
                "a paired baseline was required (twin) but the summary has none: the "
                "benchmark did not measure the baseline in the same run",
            )
        ]
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
            found.append(Finding("inconclusive", thin_latency(figure)))
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
            found.append(Finding("inconclusive", thin_level(figure)))
        elif figure.aggregate_tokens_per_second < limit.min_tokens_per_second:
            found.append(
                Finding(
                    "fail",
                    f"{limit.concurrency} streams: {figure.aggregate_tokens_per_second:.1f} "
                    f"tok/s < limit {limit.min_tokens_per_second:.1f}",
                )
            )
    return found
