"""Regressions against the baseline, decided on intervals rather than on single numbers.

Each compared figure (median latency per prompt class, aggregate tokens/s per concurrency
level) carries one value per trial on both sides. The gate recomputes the interval of the
relative difference candidate / baseline - 1 from those values (``gate.interval``) instead
of trusting anything the measured side concluded, and decides:

- **Failed** only when the whole interval is beyond the limit (the regression is larger
  than ``maxRegressionPercent`` with the stated confidence);
- **Passed** (a note with the interval) only when the whole interval is within it;
- **Inconclusive** when the interval straddles the limit: the data cannot tell.

A baseline measured in the same run (``pairedBaseline``) is compared trial by trial; a
stored one, unpaired. With one trial on each side there is no spread to estimate: the
figures are compared as points, and the reason says so. Candidate and baseline on different
GPU products are not compared at all (Inconclusive, saying so): the difference would be the
hardware's. Quality is a count of deterministic answers, compared as before.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from vllm_operator.api.spec import Thresholds
from vllm_operator.api.summary import (
    SUMMARY_SCHEMA,
    BenchSummary,
    ConcurrencyFigures,
    LatencyFigures,
    Placement,
)
from vllm_operator.gate.finding import Finding, Severity
from vllm_operator.gate.interval import Interval, relative_interval

MIN_LATENCY_SAMPLES = 3
"""Fewer measured requests per prompt class than this and a median is not a figure."""


def regressions(
    summary: BenchSummary, thresholds: Thresholds, baseline: BenchSummary | None
) -> list[Finding]:
    """Findings of the comparison with the baseline (paired one first, else ``baseline``)."""
    allowed = thresholds.max_regression_percent
    if allowed is None:
        return []
    paired = summary.paired_baseline is not None
    if summary.paired_baseline is not None:
        pb = summary.paired_baseline
        baseline = BenchSummary(
            latency=pb.latency,
            concurrency=pb.concurrency,
            quality=pb.quality,
            errors=pb.errors,
            placement=pb.placement,
        )
    if baseline is None:
        return [Finding("note", "no baseline: regressions not checked (first revision)")]
    if baseline.schema_ != SUMMARY_SCHEMA:
        return [Finding("inconclusive", f"baseline format {baseline.schema_!r} not comparable")]
    broken = sorted(k for k, v in baseline.errors.items() if v > 0)
    if broken:
        return [Finding("inconclusive", f"baseline has failed requests ({', '.join(broken)})")]
    quality = _quality_regression(summary, baseline, allowed)
    gpus = _gpu_products(summary.placement, baseline.placement)
    if gpus is not None:
        return [Finding("inconclusive", gpus), *quality]
    judge = _Judge(allowed, thresholds.confidence_percent / 100, paired)
    return [
        *_placement_note(summary.placement, baseline.placement, paired),
        *_latency(summary, baseline, judge),
        *_throughput(summary, baseline, judge),
        *quality,
    ]


class _Judge:
    """Turns two lists of trial figures into a finding about one compared figure."""

    def __init__(self, allowed: float, confidence: float, paired: bool) -> None:
        self.allowed = allowed
        self.confidence = confidence
        self.paired = paired

    def compare(  # noqa: PLR0917 - one call site per figure kind
        self,
        label: str,
        unit: str,
        candidate: Sequence[float],
        baseline: Sequence[float],
        higher_is_worse: bool,
        digits: int,
    ) -> Finding:
        interval = relative_interval(
            candidate, baseline, confidence=self.confidence, paired=self.paired
        )
        if interval is None:
            return Finding("inconclusive", f"{label}: a figure of 0, nothing to compare")
        limit = self.allowed / 100
        if higher_is_worse:
            beyond, within = interval.low > limit, interval.high <= limit
        else:
            beyond, within = interval.high < -limit, interval.low >= -limit
        if not interval.estimated:  # one trial each: a point comparison
            change = interval.change
            beyond = change > limit if higher_is_worse else change < -limit
            within = not beyond
        severity: Severity = "fail" if beyond else "note" if within else "inconclusive"
        verdict = {
            "fail": "regression beyond the limit",
            "note": "within the limit",
            "inconclusive": "the interval straddles the limit",
        }[severity]
        # geometric means: their ratio is exactly the change the interval is built around
        c, b = statistics.geometric_mean(candidate), statistics.geometric_mean(baseline)
        sign = "+" if higher_is_worse else "-"
        return Finding(
            severity,
            f"{label}: {c:,.{digits}f} {unit}, {interval.change * 100:+.1f}% vs baseline "
            f"{b:,.{digits}f} {unit} ({_describe(interval)}), limit {sign}{self.allowed:g}%: "
            f"{verdict}",
        )


def _describe(interval: Interval) -> str:
    if not interval.estimated:
        return "one trial each: no interval, a point comparison"
    how = "paired" if interval.paired else "unpaired"
    n = interval.trials[0] if interval.paired else f"{interval.trials[0]}/{interval.trials[1]}"
    return (
        f"{interval.confidence * 100:g}% interval {interval.low * 100:+.1f}% to "
        f"{interval.high * 100:+.1f}%, {how}, {n} trials"
    )


def _gpu_products(candidate: Placement | None, baseline: Placement | None) -> str | None:
    a = candidate.gpu_product if candidate else None
    b = baseline.gpu_product if baseline else None
    if a and b and a != b:
        return (
            f"candidate ran on {a}, baseline on {b}: different GPU products, so speed "
            "regressions are not judged (the difference would be the hardware's)"
        )
    return None


def _placement_note(
    candidate: Placement | None, baseline: Placement | None, paired: bool
) -> list[Finding]:
    a = candidate.node if candidate else None
    b = baseline.node if baseline else None
    if paired or not a or not b or a == b:
        return []
    return [
        Finding(
            "note",
            f"stored baseline measured on node {b}, candidate on {a}: differences between "
            "nodes are not in the interval",
        )
    ]


def _latency_trials(figure: LatencyFigures) -> list[float]:
    return list(figure.trials) or [figure.median_ms]


def _level_trials(figure: ConcurrencyFigures) -> list[float]:
    return list(figure.trials) or [figure.aggregate_tokens_per_second]


def _latency(summary: BenchSummary, baseline: BenchSummary, judge: _Judge) -> list[Finding]:
    base_by_class = {f.prompt_class: f for f in baseline.latency}
    found = []
    for figure in summary.latency:
        base = base_by_class.pop(figure.prompt_class, None)
        name = figure.prompt_class
        if figure.requests < MIN_LATENCY_SAMPLES:
            found.append(Finding("inconclusive", thin_latency(figure)))
        elif base is None:
            found.append(Finding("inconclusive", f"baseline has no {name}-prompt latency"))
        elif base.requests < MIN_LATENCY_SAMPLES or base.median_ms <= 0:
            found.append(Finding("inconclusive", f"baseline {thin_latency(base)}"))
        else:
            found.append(
                judge.compare(
                    f"{name} prompts, median latency",
                    "ms",
                    _latency_trials(figure),
                    _latency_trials(base),
                    higher_is_worse=True,
                    digits=0,
                )
            )
    for name in sorted(base_by_class):
        found.append(Finding("inconclusive", f"baseline has {name}-prompt latency, candidate not"))
    return found


def _throughput(summary: BenchSummary, baseline: BenchSummary, judge: _Judge) -> list[Finding]:
    base_by_level = {f.concurrency: f for f in baseline.concurrency}
    found = []
    for figure in summary.concurrency:
        base = base_by_level.pop(figure.concurrency, None)
        level = figure.concurrency
        if figure.requests < figure.concurrency:
            found.append(Finding("inconclusive", thin_level(figure)))
        elif base is None:
            found.append(Finding("inconclusive", f"baseline has no figure at {level} streams"))
        elif base.requests < base.concurrency:
            found.append(Finding("inconclusive", f"baseline {thin_level(base)}"))
        elif base.aggregate_tokens_per_second <= 0:
            found.append(
                Finding("inconclusive", f"baseline at {level} streams: no steady window (0 tok/s)")
            )
        else:
            found.append(
                judge.compare(
                    f"{level} stream" if level == 1 else f"{level} streams",
                    "tok/s",
                    _level_trials(figure),
                    _level_trials(base),
                    higher_is_worse=False,
                    digits=1,
                )
            )
    for level in sorted(base_by_level):
        found.append(
            Finding("inconclusive", f"baseline has a figure at {level} streams, candidate not")
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
                f"quality {quality.passed}/{quality.total} is {drop:.1f}% below baseline "
                f"{base.passed}/{base.total} (max {allowed:g}%)",
            )
        ]
    return []


def thin_latency(figure: LatencyFigures) -> str:
    return (
        f"{figure.prompt_class} prompts: {figure.requests} request(s) measured, "
        f"fewer than {MIN_LATENCY_SAMPLES}: too few to compare"
    )


def thin_level(figure: ConcurrencyFigures) -> str:
    return (
        f"{figure.concurrency} streams: {figure.requests} request(s) completed, fewer than "
        "one per stream: too few to compare"
    )
