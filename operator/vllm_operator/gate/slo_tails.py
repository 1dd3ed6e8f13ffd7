"""SLO tail limits judged on counts (``gate.tails``), from what a summary carries. Pure.

A limited percentile of a load level arrives as ``api.summary.TailCounts``: per trial, the
observations above the limit (requests; for ITL the gaps, with the design effect of their
requests). "TTFT p99 <= 1000 ms" is judged as the promise it makes, at most 1% of requests
above 1000 ms, with the trials as clusters (``tails.judge_share``) at the look's confidence
(``gate.sequential``). Against the paired baseline the benchmark counted the candidate's
requests above the threshold of each end of the baseline's pooled-percentile interval
(``TailRegression``); the gate re-decides from those counts (``tails.decide_regression``)
after checking that they were taken at the thresholds these limits give, at this look's
confidence. Counts taken at another limit, threshold or confidence cannot be re-used: the
reason says to re-judge from the full report (``vllm-operator judge --report``), which
counts again from its samples.

The threshold of a baseline value ``x`` is the one ``gate.slo`` has always used for a
limited percentile: ``max(x (1 + maxRegressionPercent / 100), x + floor)``, the floor being
the larger of ``regressionFloorMs`` and ``slo.regressionFloorPercent`` of the SLO limit.
Baseline bounds and thresholds are stored rounded to 0.01 ms outwards (the low ends down,
the high ends up), so the bench and the operator compute the same thresholds bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from vllm_operator.api.spec import Thresholds
from vllm_operator.api.summary import TailCounts, TailRegression, TrialPlan
from vllm_operator.gate.finding import FigureKey, Finding, Judged, Severity
from vllm_operator.gate.sequential import look_confidence, more_allowed
from vllm_operator.gate.tails import (
    Decision,
    Exceedance,
    ShareJudgement,
    allowed_share,
    decide_regression,
    judge_share,
    observations_needed,
)

REJUDGE = "re-judge with --report (vllm-operator judge counts again from the samples)"

SEVERITY: dict[Decision, Severity] = {
    "within": "note",
    "beyond": "fail",
    "undecided": "inconclusive",
}

MOST_NAMED = 10_000_000
"""Beyond this, "about N requests" is no advice."""


def unit_of(metric: str) -> str:
    """What a metric's counts count: gaps for ITL, requests otherwise."""
    return "gaps" if metric == "itl" else "requests"


def regression_threshold(thresholds: Thresholds, limit: float) -> Callable[[float], float]:
    """Baseline value (ms) -> the most the candidate may reach, for an SLO ``limit`` (ms)."""
    assert thresholds.max_regression_percent is not None
    assert thresholds.slo is not None
    relative = 1 + thresholds.max_regression_percent / 100
    floor = regression_floor(thresholds, limit)
    return lambda x: max(x * relative, x + floor)


def regression_floor(thresholds: Thresholds, limit: float) -> float:
    """The absolute part of the threshold (ms): ``regressionFloorMs`` or
    ``slo.regressionFloorPercent`` of the SLO ``limit``, whichever is larger."""
    assert thresholds.slo is not None
    return max(
        thresholds.regression_floor_ms, thresholds.slo.regression_floor_percent / 100 * limit
    )


def round_down(value: float) -> float:
    return math.floor(value * 100) / 100


def round_up(value: float) -> float:
    return math.ceil(value * 100) / 100


def stored_bounds(low: float, high: float) -> tuple[float, float | None]:
    """The baseline's bounds as stored: outwards to 0.01 ms, no high bound as None."""
    return round_down(low), (round_up(high) if math.isfinite(high) else None)


def stored_thresholds(
    threshold: Callable[[float], float], low: float, high: float | None
) -> tuple[float, float | None]:
    """The thresholds of stored bounds, as stored: low rounded down (counts more above it, so
    "within" stays safe), high up (counts fewer, so "beyond" does)."""
    return round_down(threshold(low)), (None if high is None else round_up(threshold(high)))


def exceedances(
    above: Sequence[int], total: Sequence[int], effects: Sequence[float] | None
) -> list[Exceedance]:
    """Per-trial counts as clusters; ``effects`` None (or empty) means 1 for each."""
    if effects and len(effects) != len(total):
        raise ValueError("design effects and totals differ in length")
    return [
        Exceedance(float(a), float(n), None, effects[i] if effects else 1.0)
        for i, (a, n) in enumerate(zip(above, total, strict=True))
    ]


def judge_limit(  # noqa: PLR0917 - private to gate.slo, one call site
    label: str,
    metric: str,
    percentile: str,
    counts: TailCounts,
    limit: float,
    confidence: float,
    plan: TrialPlan | None,
    key: FigureKey,
) -> Judged:
    """One limited percentile of a level against its SLO limit, from its counts."""
    trials = len(counts.total)
    if counts.missing:
        return Judged(Finding("inconclusive", f"{label}: {counts.missing}"))
    if not math.isclose(counts.limit, limit, rel_tol=0, abs_tol=1e-9):
        text = (
            f"{label}: counted above {counts.limit:g} ms, but the limit judged is {limit:g} ms: "
            f"{REJUDGE}"
        )
        return Judged(Finding("inconclusive", text))
    allowed = allowed_share(percentile)
    look = look_confidence(confidence, plan, trials)
    try:
        clusters = exceedances(counts.above, counts.total, counts.design_effect)
    except ValueError as exc:
        return Judged(Finding("inconclusive", f"{label}: counts do not agree ({exc})"))
    judged = judge_share(clusters, allowed, look)
    unit = unit_of(metric)
    if judged.observations <= 0:
        text = f"{label}: no {unit} measured to count"
        return Judged(Finding("inconclusive", text), key, more_allowed(plan, trials))
    severity = SEVERITY[judged.decision]
    above = sum(counts.above)
    text = (
        f"{label}: {above:,} of {judged.observations:,.0f} {unit} above {limit:g} ms "
        f"({_share_span(judged)}, {_how(confidence, plan, trials, judged, unit)}): "
    )
    allows = f"the {allowed * 100:g}% the {percentile} limit allows"
    if judged.decision == "undecided":
        text += f"undecided against {allows}" + _what_decides(judged, look, plan, trials, unit)
    else:
        text += f"{judged.decision} {allows}"
    return Judged(
        Finding(severity, text), key, severity == "inconclusive" and more_allowed(plan, trials)
    )


def judge_against_baseline(  # noqa: PLR0917 - private to gate.slo, one call site
    label: str,
    metric: str,
    percentile: str,
    counts: TailCounts,
    thresholds: Thresholds,
    limit: float,
    plan: TrialPlan | None,
    key: FigureKey,
) -> Judged:
    """One limited percentile against the paired baseline's, from the bench's counts."""
    trials = len(counts.total)
    record = counts.regression
    if record is None:
        text = f"{label} against the baseline: the summary has no counts against it; {REJUDGE}"
        return Judged(Finding("inconclusive", text))
    look = look_confidence(thresholds.confidence_percent / 100, plan, trials)
    problem = _stale(record, thresholds, limit, look)
    if problem:
        return Judged(Finding("inconclusive", f"{label} against the baseline: {problem}"))
    low, high = record.baseline[0] or 0.0, record.baseline[1]
    t_low, t_high = record.thresholds[0] or 0.0, record.thresholds[1]
    allowed = allowed_share(percentile)
    try:
        within = exceedances(record.within, counts.total, counts.design_effect)
        beyond = (
            None
            if t_high is None
            else exceedances(record.beyond, counts.total, counts.design_effect)
        )
    except ValueError as exc:
        text = f"{label} against the baseline: counts do not agree ({exc})"
        return Judged(Finding("inconclusive", text))
    decision, j_within, j_beyond = decide_regression(within, beyond, allowed, look)
    unit = unit_of(metric)
    base = f"[{low:g}, {'no bound' if high is None else f'{high:g}'}] ms"
    reach = f"{t_low:g}" if t_high is None else f"{t_low:g}-{t_high:g}"
    text = (
        f"{label} against the baseline: its pooled {percentile} lies in {base}, so the "
        f"candidate may reach {reach} ms ({_limit_words(thresholds, limit)}); "
    )
    how = _how(thresholds.confidence_percent / 100, plan, trials, None, unit)
    if decision == "beyond" and j_beyond is not None:
        text += (
            f"{sum(record.beyond):,} of {j_beyond.observations:,.0f} {unit} above "
            f"{t_high:g} ms ({_share_span(j_beyond)}, {how}): regression beyond the limit"
        )
        severity: Severity = "fail"
    elif decision == "within":
        text += (
            f"{sum(record.within):,} of {j_within.observations:,.0f} {unit} above {t_low:g} ms "
            f"({_share_span(j_within)}, {how}): within the limit"
        )
        severity = "note"
    else:
        text += (
            f"{sum(record.within):,} of {j_within.observations:,.0f} {unit} above {t_low:g} ms "
            f"({_share_span(j_within)}"
        )
        if j_beyond is not None:
            text += f"), {sum(record.beyond):,} above {t_high:g} ms ({_share_span(j_beyond)}"
        text += f"; {how}): undecided, the limit allows {allowed * 100:g}% above it"
        severity = "inconclusive"
    return Judged(
        Finding(severity, text), key, severity == "inconclusive" and more_allowed(plan, trials)
    )


def _stale(record: TailRegression, thresholds: Thresholds, limit: float, look: float) -> str:
    """Why the stored counts cannot answer for these limits ("" when they can)."""
    if not math.isclose(record.confidence, look, rel_tol=0, abs_tol=1e-9):
        return (
            f"counted at {record.confidence * 100:.4g}% confidence, this look needs "
            f"{look * 100:.4g}% (another trial plan or confidencePercent): {REJUDGE}"
        )
    low, high = record.baseline[0] or 0.0, record.baseline[1]
    want = stored_thresholds(regression_threshold(thresholds, limit), low, high)
    have = (record.thresholds[0] or 0.0, record.thresholds[1])
    if want != have:
        shown = "/".join("none" if v is None else f"{v:g}" for v in have)
        asked = "/".join("none" if v is None else f"{v:g}" for v in want)
        return f"counted above {shown} ms, these limits give {asked} ms: {REJUDGE}"
    if len(record.within) != len(record.beyond) and record.thresholds[1] is not None:
        return "counts above the two thresholds differ in trials: the summary is damaged"
    return ""


def _limit_words(thresholds: Thresholds, limit: float) -> str:
    floor = regression_floor(thresholds, limit)
    return f"+{thresholds.max_regression_percent:g}% or the {floor:g} ms floor, the larger"


def _share_span(judged: ShareJudgement) -> str:
    if judged.decision == "within":
        return f"share <= {_pct(judged.high)}"
    if judged.decision == "beyond":
        return f"share >= {_pct(judged.low)}"
    return f"share {_pct(judged.low)} to {_pct(judged.high)}"


def _how(
    confidence: float,
    plan: TrialPlan | None,
    trials: int,
    judged: ShareJudgement | None,
    unit: str,
) -> str:
    text = f"{confidence * 100:g}% interval"
    if plan is not None and plan.looks > 1:
        text += f" widened for {plan.looks} looks"
    text += f", {trials} trial{'' if trials == 1 else 's'}"
    if plan is not None and plan.looks > 1 and trials < plan.max_trials:
        text += f" of up to {plan.max_trials}"
    if judged is not None and judged.effective < 0.9 * judged.observations:
        text += f", worth {judged.effective:,.0f} independent {unit} (clustered)"
    return text


def _what_decides(
    judged: ShareJudgement, look: float, plan: TrialPlan | None, trials: int, unit: str
) -> str:
    if plan is not None and trials >= plan.max_trials:
        ran = f"; {trials} trials, the most allowed (gate.maxTrials)"
    elif plan is None:
        ran = f"; {trials} trials, a fixed number (no sequential plan)"
    else:
        ran = ""
    if judged.share >= judged.allowed:
        return ran + ": the share sits at or above the limit, more trials would not pass it"
    needed = observations_needed(judged.allowed, look, judged.share)
    if needed <= 0 or needed > MOST_NAMED:
        return ran
    return ran + f": about {needed:,} independent {unit} at this share would decide it"


def _pct(share: float) -> str:
    value = share * 100
    if value == 0:
        return "0%"
    return f"{value:#.2g}%" if value < 10 else f"{value:.0f}%"
