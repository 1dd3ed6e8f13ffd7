"""SLO tail limits judged on counts (``gate.tails``), from what a summary carries. Pure.

A limited percentile of a load level arrives as ``api.summary.TailCounts``: per trial, the
observations above the limit (requests; for ITL the gaps, with the design effect of their
requests). "TTFT p99 <= 1000 ms" is judged as the promise it makes, at most 1% of requests
above 1000 ms, with the trials as clusters (``tails.judge_share``) at the look's confidence
(``gate.sequential``). Against the paired baseline the benchmark counted, per trial, the
candidate's observations above the pair's bar, the baseline's own percentile of that trial
plus the regression limit (``TailRegression``, ``gate.pair_tails``); the gate judges those
counts the same way against the percentile's own share, after checking that the bars were
set with the limits these thresholds give. Counts taken at another limit or regression
limit cannot be re-used: the reason says to re-judge from the full report
(``vllm-operator judge --report``), which counts again from its samples.

The bar of a baseline value ``x`` is the one ``gate.slo`` has always used for a limited
percentile: ``max(x (1 + maxRegressionPercent / 100), x + floor)``, the floor being the
larger of ``regressionFloorMs`` and the metric's ``regressionFloorPercent`` of the SLO limit
(its own, e.g. ``itlMs.regressionFloorPercent``, else ``slo.regressionFloorPercent``, else its
default: ``api.workload.DEFAULT_FLOOR_PERCENT``); the reason names which set it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import TailCounts, TrialPlan
from vllm_operator.api.workload import LatencyMetric, SloLimits
from vllm_operator.gate.finding import Comparison, FigureKey, Finding, Judged, Severity
from vllm_operator.gate.sequential import look_confidence, more_allowed
from vllm_operator.gate.tails import (
    Decision,
    Exceedance,
    ShareJudgement,
    allowed_share,
    judge_share,
    judge_share_fixed,
    observations_needed,
)

REJUDGE = "re-judge with --report (vllm-operator judge counts again from the samples)"

SEVERITY: dict[Decision, Severity] = {
    "within": "note",
    "beyond": "fail",
    "undecided": "inconclusive",
}

FEWEST = 4
"""Trials from which one stray trial (a stall) is left out of a share (``tails.stray_cluster``)."""

MOST_NAMED = 10_000_000
"""Beyond this, "about N requests" is no advice."""


def unit_of(metric: str) -> str:
    """What a metric's counts count: gaps for ITL, requests otherwise."""
    return "gaps" if metric == "itl" else "requests"


def regression_limit(
    thresholds: Thresholds, limit: float, metric: LatencyMetric, at: SloLimits
) -> tuple[float, float]:
    """(maxRegressionPercent, floor in ms) of ``metric``'s percentile limited at ``limit`` ms
    where the limits ``at`` hold (``slo`` or a level's entry): the candidate may reach
    ``max(x (1 + percent / 100), x + floor)`` of the baseline's ``x``. The floor is the
    larger of ``regressionFloorMs`` and the metric's ``regressionFloorPercent`` of the limit
    (``SloThresholds.floor_percent``: the metric's own, the shorthand, its default)."""
    assert thresholds.max_regression_percent is not None
    assert thresholds.slo is not None
    percent, _ = thresholds.slo.floor_percent(metric, at)
    floor = max(thresholds.regression_floor_ms, percent / 100 * limit)
    return thresholds.max_regression_percent, floor


def floor_source(thresholds: Thresholds, limit: float, metric: LatencyMetric, at: SloLimits) -> str:
    """What set the floor of ``regression_limit``, for the reasons: "itlMs.regressionFloorPercent
    25% of 100 ms", "the itl default 25% of 100 ms" or "regressionFloorMs"."""
    assert thresholds.slo is not None
    percent, source = thresholds.slo.floor_percent(metric, at)
    if thresholds.regression_floor_ms > percent / 100 * limit:
        return "regressionFloorMs"
    return f"{source} {percent:g}% of {limit:g} ms"


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


def judged_share(
    clusters: Sequence[Exceedance],
    allowed: float,
    look: float,
    across: float | None,
    stray_trial: int | None,
) -> ShareJudgement:
    """The share judged with the clustering the bench fixed (``gate.clustering``: the same at
    every bar, so the verdict moves one way with the limits), or, for a summary of the
    earlier rule (no ``across``), estimated from the counts themselves."""
    if across is None:
        return judge_share(clusters, allowed, look, fewest=FEWEST)
    if stray_trial is not None and stray_trial > len(clusters):
        raise ValueError(f"stray trial {stray_trial} of {len(clusters)} trials")
    stray = None if stray_trial is None else stray_trial - 1
    return judge_share_fixed(clusters, allowed, look, across, stray)


def judge_limit(  # noqa: PLR0917 - private to gate.slo, one call site
    label: str,
    metric: str,
    percentile: str,
    counts: TailCounts,
    limit: float,
    confidence: float,
    plan: TrialPlan | None,
    key: FigureKey,
    *,
    measured: float | None = None,
) -> Judged:
    """One limited percentile of a level against its SLO limit, from its counts.

    ``measured`` is the percentile measured (ms: over every trial's observations together,
    else the trials' median), the table's "candidate"; the finding's numbers are the share
    above the limit with its interval, against the share the percentile allows
    (``against="limit"``)."""
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
        judged = judged_share(clusters, allowed, look, counts.across, counts.stray_trial)
    except ValueError as exc:
        return Judged(Finding("inconclusive", f"{label}: counts do not agree ({exc})"))
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
    numbers = share_numbers(judged, limit, measured, trials)
    return Judged(
        Finding(severity, text, comparison=numbers),
        key,
        severity == "inconclusive" and more_allowed(plan, trials),
    )


def share_numbers(
    judged: ShareJudgement, limit: float, measured: float | None, trials: int
) -> Comparison | None:
    """The numbers of a percentile judged against its SLO limit, for tables and charts:
    ``candidate`` the measured percentile, ``baseline`` the limit
    (ms), ``change`` the share above the limit with its interval (``low``, ``high``), and
    ``limit`` the share the percentile allows (10% for a p90). None without a measured value."""
    if measured is None:
        return None
    return Comparison(
        candidate=measured,
        baseline=limit,
        unit="ms",
        change=judged.share,
        low=judged.low,
        high=judged.high,
        limit=judged.allowed,
        higher_is_worse=True,
        trials=trials,
        against="limit",
    )


def judge_against_baseline(  # noqa: PLR0917 - private to gate.slo, one call site
    label: str,
    metric: LatencyMetric,
    percentile: str,
    counts: TailCounts,
    thresholds: Thresholds,
    limit: float,
    plan: TrialPlan | None,
    key: FigureKey,
    at: SloLimits,
) -> Judged:
    """One limited percentile against the paired baseline's, from the bench's pair counts."""
    record = counts.regression
    if record is None:
        text = f"{label} against the baseline: the summary has no counts against it; {REJUDGE}"
        return Judged(Finding("inconclusive", text))
    if not record.total:
        text = (
            f"{label} against the baseline: the summary counted it by the earlier rule (each "
            f"pair's slowest share, before 2026-12-02); {REJUDGE}"
        )
        return Judged(Finding("inconclusive", text))
    trials = len(record.total)
    relative, floor = regression_limit(thresholds, limit, metric, at)
    if not (
        math.isclose(record.relative_percent, relative, abs_tol=1e-9)
        and math.isclose(record.floor, floor, abs_tol=1e-9)
    ):
        text = (
            f"{label} against the baseline: counted at +{record.relative_percent:g}% or "
            f"{record.floor:g} ms, these limits give +{relative:g}% or {floor:g} ms: {REJUDGE}"
        )
        return Judged(Finding("inconclusive", text))
    allowed = allowed_share(percentile)
    look = look_confidence(thresholds.confidence_percent / 100, plan, trials)
    try:
        pairs = exceedances(record.above, record.total, record.design_effect)
        judged = judged_share(pairs, allowed, look, record.across, record.stray_trial)
    except ValueError as exc:
        text = f"{label} against the baseline: counts do not agree ({exc})"
        return Judged(Finding("inconclusive", text))
    unit = unit_of(metric)
    if judged.observations <= 0:
        text = f"{label} against the baseline: no {unit} measured to compare"
        return Judged(Finding("inconclusive", text), key, more_allowed(plan, trials))
    severity = SEVERITY[judged.decision]
    ours = sum(a for i, a in enumerate(record.above) if i not in judged.left_out)
    how = _how(thresholds.confidence_percent / 100, plan, trials, judged, unit)
    text = (
        f"{label} against the baseline: {ours:,} of the candidate's "
        f"{judged.observations:,.0f} {unit} above the baseline's {percentile} plus "
        f"{_limit_words(relative, floor)}, the floor from "
        f"{floor_source(thresholds, limit, metric, at)} ({_bars(record.bars, record.total)}) "
        f"({_share_span(judged)}, {how}{_left_out(judged)}): "
    )
    allows = f"the {allowed * 100:g}% its {percentile} at that limit would put there"
    if judged.decision == "within":
        text += f"within the limit, below {allows}"
    elif judged.decision == "beyond":
        text += f"regression beyond the limit, above {allows}"
    else:
        text += f"undecided against {allows}" + _what_decides(judged, look, plan, trials, unit)
    return Judged(
        Finding(severity, text), key, severity == "inconclusive" and more_allowed(plan, trials)
    )


def _bars(bars: Sequence[float], total: Sequence[int]) -> str:
    """The per-trial bars as a span (ms), leaving out trials that set none."""
    set_bars = [b for b, n in zip(bars, total, strict=False) if n > 0]
    if not set_bars:
        return "no bar set"
    low, high = min(set_bars), max(set_bars)
    if math.isclose(low, high):
        return f"bar {low:g} ms"
    return f"bars {low:g}-{high:g} ms by trial"


def _left_out(judged: ShareJudgement) -> str:
    if not judged.left_out:
        return ""
    return ", stray trial " + ", ".join(str(i + 1) for i in judged.left_out) + " left out"


def _limit_words(relative: float, floor: float) -> str:
    return f"{relative:g}% or {floor:g} ms, whichever is more"


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
