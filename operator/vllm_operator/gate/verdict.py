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

from dataclasses import dataclass, replace

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    SUMMARY_SCHEMA,
    BenchSummary,
    TrialPlan,
    Verdict,
    VerdictOutcome,
)
from vllm_operator.gate.classes import describe, kind_of
from vllm_operator.gate.comparison import EARLY
from vllm_operator.gate.differential import differential_limits
from vllm_operator.gate.finding import (
    STOP_BRIEF,
    STOP_TEXT,
    FigureKey,
    Finding,
    Judged,
    Severity,
    StopReason,
)
from vllm_operator.gate.regression import (
    MIN_LATENCY_SAMPLES,
    judge_all,
    thin_latency,
    thin_level,
)
from vllm_operator.gate.slo import judge_slo

__all__ = [
    "MIN_LATENCY_SAMPLES",
    "Finding",
    "Judgement",
    "Severity",
    "judge",
    "open_figures",
    "openness",
    "verdict",
]

_ORDER: dict[Severity, int] = {"fail": 0, "error": 1, "inconclusive": 2, "note": 3}
_DECIDES: dict[VerdictOutcome, Severity | None] = {
    "Failed": "fail",
    "Error": "error",
    "Inconclusive": "inconclusive",
    "Passed": None,
}
ALL_WITHIN = "every measured figure is within its limits"
HEADLINE_CHARS = 240
"""The headline's most characters: the status line adds its own words around it."""


@dataclass(frozen=True)
class Judgement:
    """The gate's verdict with its structure: every finding, the deciding ones first.

    ``findings`` are ordered: those that decided the outcome (``Finding.deciding``), then the
    rest by severity, each group in rule order. ``headline`` is the verdict in one line (the
    deciding figures, then a count of the others): what a status line or an Event leads with.
    """

    outcome: VerdictOutcome
    findings: tuple[Finding, ...]
    headline: str

    @property
    def deciding(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.deciding)

    @property
    def figures(self) -> tuple[Finding, ...]:
        """The findings about one judged figure with its numbers (table and chart rows)."""
        return tuple(f for f in self.findings if f.comparison is not None)

    def as_verdict(self) -> Verdict:
        """The stored shape: deciding reasons in full, every other one in a few words."""
        reasons = [f.text if f.deciding else f.short for f in self.findings]
        if self.outcome == "Passed" and not any(f.severity == "note" for f in self.findings):
            reasons.append(ALL_WITHIN)
        return Verdict(
            outcome=self.outcome,
            reasons=reasons,
            deciding=len(self.deciding) or None,
            headline=self.headline,
        )


def verdict(
    summary: BenchSummary,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    *,
    require_paired: bool = False,
    plan: TrialPlan | None = None,
) -> Verdict:
    """Judge one candidate's summary against limits and a baseline (``judge``, stored shape)."""
    return judge(
        summary, thresholds, baseline, require_paired=require_paired, plan=plan
    ).as_verdict()


def judge(
    summary: BenchSummary,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    *,
    require_paired: bool = False,
    plan: TrialPlan | None = None,
) -> Judgement:
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
    compared: list[Judged] = [
        *judge_all(summary, thresholds, baseline, plan),
        *judge_slo(summary, thresholds, baseline, plan),
    ]
    failed_first = any(j.finding.severity == "fail" and j.figure is not None for j in compared)
    failed_first |= any(n > 0 and kind_of(name) == "server" for name, n in summary.errors.items())
    findings = [
        *_schema(summary),
        *_paired(summary, require_paired),
        *_errors(summary),
        *_quality_limits(summary, thresholds),
        *differential_limits(summary, thresholds),
        *_latency_limits(summary, thresholds),
        *_throughput_limits(summary, thresholds),
        *(_structured(j, failed_first) for j in compared),
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
    decides = _DECIDES[outcome]
    marked = [replace(f, deciding=_decides(f, decides)) for f in findings]
    # stable sorts: deciding first, then by severity, each group in rule order
    ordered = sorted(marked, key=lambda f: (not f.deciding, _ORDER[f.severity]))
    return Judgement(outcome, tuple(ordered), _headline(outcome, ordered))


def _decides(found: Finding, severity: Severity | None) -> bool:
    """Did ``found`` decide the outcome? For Passed: every figure judged within its limit."""
    if severity is None:
        return found.outcome == "within"
    return found.severity == severity


def _structured(judged: Judged, failed_first: bool) -> Finding:
    """A compared figure's finding with its outcome and stop reason resolved."""
    found = judged.finding
    if judged.figure is not None and found.outcome is None:
        outcome = {"fail": "beyond", "note": "within", "inconclusive": "undecided"}
        found = replace(
            found,
            figure=found.figure or found.text.split(":")[0][:80],  # its label, as it reads
            outcome=outcome.get(found.severity),  # type: ignore[arg-type]
        )
    if found.stop == "early":
        stop: StopReason = "failed-first" if failed_first else "budget"
        found = replace(found, stop=stop, text=found.text.replace(EARLY, STOP_TEXT[stop]))
    if found.outcome == "undecided" and found.stop is not None and found.brief:
        found = replace(found, brief=f"{found.brief} ({STOP_BRIEF[found.stop]})")
    return found


def _headline(outcome: VerdictOutcome, ordered: list[Finding]) -> str:
    """The verdict in one line: what decided, then how the other figures ended."""
    deciding = [f for f in ordered if f.deciding]
    others = [f for f in ordered if not f.deciding and f.outcome is not None]
    if outcome == "Passed":
        within = len(deciding)
        return f"all {within} judged figure(s) within their limits" if within else ALL_WITHIN
    parts = [deciding[0].short] if deciding else []
    if len(deciding) > 1:  # the others by name: the first one says how
        named = [f.figure or _clip(f.short, 60) for f in deciding[1:4]]
        more = f" and {len(deciding) - 4} more" if len(deciding) > 4 else ""
        parts.append(f"also {', '.join(named)}{more}")
    if others:
        counts = {o: sum(f.outcome == o for f in others) for o in ("beyond", "within", "undecided")}
        said = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
        stops = sorted({STOP_BRIEF[f.stop] for f in others if f.stop is not None})
        parts.append(f"other figures: {said}" + (f" ({'; '.join(stops)})" if stops else ""))
    return _clip("; ".join(parts), HEADLINE_CHARS)


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 3].rstrip() + "..."


@dataclass(frozen=True)
class Openness:
    """What more trials could still change: the open figures, and whether the run is Failed
    for good (then none is open)."""

    figures: frozenset[FigureKey]
    failed: bool


def openness(
    summary: BenchSummary,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    plan: TrialPlan | None,
) -> Openness:
    """The figures more trials could still decide, on the same judgement as ``verdict``.

    The benchmark measures these once more between rounds (sequential trials), and only
    these. Nothing is open once the run is Failed for good: a server fault counted, or a
    figure decided beyond its limit (a regression, an SLO limit); more trials cannot undo
    either. (An absolute latency or tok/s limit is judged on medians that more trials can
    move, and a missing quality result is only missing until the suite runs at the end:
    neither stops the trials.)
    """
    if any(count > 0 and kind_of(name) == "server" for name, count in summary.errors.items()):
        return Openness(frozenset(), failed=True)
    judged = judge_all(summary, thresholds, baseline, plan)
    judged += judge_slo(summary, thresholds, baseline, plan)
    if any(j.finding.severity == "fail" and j.figure is not None for j in judged):
        return Openness(frozenset(), failed=True)  # final whatever more trials would show
    return Openness(
        frozenset(j.figure for j in judged if j.undecided and j.figure is not None), failed=False
    )


def open_figures(
    summary: BenchSummary,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    plan: TrialPlan | None,
) -> set[FigureKey]:
    """``openness``'s figures: what the benchmark measures once more."""
    return set(openness(summary, thresholds, baseline, plan).figures)


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
