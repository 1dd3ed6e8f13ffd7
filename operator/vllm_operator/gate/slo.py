"""Service-level objectives at each load level, decided over trials. Pure.

A load sweep (``BenchSummary.load``) carries, per level, what ``gate.thresholds.slo`` limits
there: each limited percentile as counts above its limit per trial (``tails``), the goodput
share and the error share per trial. Each limit is judged at the confidence of this look
(``gate.sequential``):

- a latency percentile: as the promise it makes, the share of requests (ITL: gaps, clustered
  by request) above the limit against the share the percentile allows, with the trials as
  clusters (``gate.slo_tails``, ``gate.tails``): **Failed** when the share is beyond it with
  confidence, **within** (a note) when within, otherwise **undecided**: the benchmark
  measures the level once more while the trial plan allows, then **Inconclusive**;
- goodput (least share) and error share (largest share): a t interval of the mean of the
  per-trial percentages (a share can be 0, so no logarithm), one outlier trial left out
  from ``FEWEST`` trials on (``gate.robust``);
- against the paired baseline (``maxRegressionPercent`` set): the candidate's share above
  the threshold of each end of the baseline's pooled-percentile interval, as the benchmark
  counted it (``gate.slo_tails.judge_against_baseline``); the threshold is the largest of the
  percentage, ``regressionFloorMs`` and the metric's ``regressionFloorPercent`` of the SLO
  limit (its own, else ``slo.regressionFloorPercent``, else its default).

Why counts and not per-trial percentiles: a p99 of 480 requests rests on its 5 slowest, and
three of them give a t interval with 2 degrees of freedom. On an H200 (2026-12-02) an
identical revision with 0 of 1,440 requests over a 1,000 ms limit came out "ttft p99 at 24
req/s: 170 ms [21.3, 1357] straddles"; counted, the share is below 0.44% and the limit is met.

Summaries written before the counts (the calibration runs of 2026-12-01 and 2026-12-02)
carry only per-trial percentiles; they are judged by the rule of that time, an interval of
the trials' geometric mean relative to the limit (one outlier left out from ``FEWEST``
trials on), and against the baseline ``gate.comparison``'s judge on the paired per-trial
percentiles (``SMALLEST_MS`` keeps a 0 ms percentile off the logarithm); a note says so. A
stored (unpaired) baseline is compared the same way (the benchmark counts only against a
baseline it measured).

Reasons name the metric, the percentile and the level: "ttft p99 at 24 req/s: 0 of 1,440
requests above 1000 ms (share <= 0.44%, 95% interval widened for 8 looks, 3 trials of up to
10): within the 1% the p99 limit allows". The **capacity** is the highest level at which,
and at every level below which, every limit was met; the sweep stops at the first level
whose limits the candidate broke (``breached``) when ``stopAtFirstBreach``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary, LoadLevelFigures, LoadSweep, TrialPlan
from vllm_operator.api.workload import LatencyMetric
from vllm_operator.gate.comparison import EXACT, Judge, baseline_for, regression_limit_set
from vllm_operator.gate.finding import Comparison, FigureKey, Finding, Judged, Severity
from vllm_operator.gate.interval import robust_interval, t_quantile
from vllm_operator.gate.robust import outliers
from vllm_operator.gate.sequential import look_confidence, more_allowed
from vllm_operator.gate.slo_tails import judge_against_baseline, judge_limit, regression_limit

FEWEST = 4
"""Fewest trials of an SLO share (goodput, errors), and of a percentile of a summary without
counts, from which one outlier trial may be left out: with three, the study's rule left an
H200 A/A run's first TTFT p99 trial out (94 / 157 / 130 ms against 129 / 121 / 100 ms) and
the two left made a tight +30% interval that failed an identical revision (2026-12-01)."""

OLD = (
    "summary without exceedance counts (written before 2026-12-02): its tail limits are "
    "judged by the old per-trial rule (an interval over each trial's percentile)"
)

SMALLEST_MS = 0.001
"""Percentiles below this (chunks arriving together: a gap of 0) count as this, for the log."""


def level_key(level: float) -> str:
    """A level as a figure key and as people read it: 20.0 -> "20", 2.5 -> "2.5"."""
    return f"{level:g}"


def figure(level: float) -> FigureKey:
    """The figure key of a level: the benchmark measures a whole level once more."""
    return FigureKey.load(level)


def where(mode: str, level: float) -> str:
    """ "at 40 req/s" or "at 8 streams"."""
    if mode == "rate":
        return f"at {level_key(level)} req/s"
    return f"at {level_key(level)} stream{'' if level == 1 else 's'}"


def judge_slo(
    summary: BenchSummary,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    plan: TrialPlan | None,
) -> list[Judged]:
    """Every SLO finding of ``summary``'s load sweep, and its regressions against a baseline."""
    slo = thresholds.slo
    sweep = summary.load
    if sweep is None:
        if slo is not None and not slo.is_empty:
            text = (
                "SLO limits (thresholds.slo) are set but no load sweep was measured: set "
                "gate.workload to a synthetic or dataset workload"
            )
            return [Judged(Finding("error", text))]
        return []
    if slo is None or slo.is_empty:
        text = "load sweep measured without SLO limits (thresholds.slo): figures not judged"
        return [Judged(Finding("note", text))]
    by_level = _limits_by_level(sweep, thresholds, plan)
    found = [j for judged in by_level.values() for j in judged]
    if _without_counts(sweep, thresholds):
        found.append(Judged(Finding("note", OLD)))
    found += _capacity_note(sweep, by_level)
    found += _regressions(summary, thresholds, baseline, plan)
    return found


def _without_counts(sweep: LoadSweep, thresholds: Thresholds) -> bool:
    """Does a measured level have per-trial percentiles of a limit but no counts of it?"""
    assert thresholds.slo is not None
    for figures in sweep.levels:
        for metric, by_p in thresholds.slo.at(figures.level).metric_limits().items():
            for p in by_p:
                key = f"{metric}.{p}"
                if key not in figures.tails and figures.percentiles.get(key):
                    return True
    return False


def breached(
    summary: BenchSummary, thresholds: Thresholds, level: float, plan: TrialPlan | None
) -> bool:
    """Did the candidate break a limit at ``level`` (decided, not merely undecided)?"""
    if summary.load is None or thresholds.slo is None:
        return False
    judged = _limits_by_level(summary.load, thresholds, plan).get(level, [])
    return any(j.finding.severity == "fail" for j in judged)


def capacity(summary: BenchSummary, thresholds: Thresholds, plan: TrialPlan | None) -> float | None:
    """The highest level that met every limit, every level below it too; None if none did."""
    if summary.load is None or thresholds.slo is None or thresholds.slo.is_empty:
        return None
    return _capacity(_limits_by_level(summary.load, thresholds, plan), summary.load)


def _capacity(by_level: dict[float, list[Judged]], sweep: LoadSweep) -> float | None:
    """The highest level measured and met, every level below it measured and met too."""
    measured = {f.level for f in sweep.levels if f.requests > 0}
    best = None
    for level in sorted(by_level):
        judged = by_level[level]
        if level not in measured or any(j.finding.severity != "note" for j in judged):
            break
        best = level  # a level without limits of its own has nothing to miss
    return best


def _capacity_note(sweep: LoadSweep, by_level: dict[float, list[Judged]]) -> list[Judged]:
    best = _capacity(by_level, sweep)
    if best is None:
        if not sweep.levels:
            return []
        first_level = sweep.levels[0].level
        first = where(sweep.mode, first_level)[3:]
        failed = sweep.levels[0].requests > 0 and any(
            j.finding.severity == "fail" for j in by_level.get(first_level, [])
        )
        if failed:
            text = f"capacity: none, the first level ({first}) did not meet every SLO"
        else:
            text = f"capacity: not established, the first level ({first}) is not decided"
        return [Judged(Finding("note", text))]
    text = f"capacity: {where(sweep.mode, best)[3:]}, the highest level that met every SLO"
    return [Judged(Finding("note", text))]


def _limits_by_level(
    sweep: LoadSweep, thresholds: Thresholds, plan: TrialPlan | None
) -> dict[float, list[Judged]]:
    """Level -> the findings of its absolute limits (empty list: no limit there)."""
    assert thresholds.slo is not None
    confidence = thresholds.confidence_percent / 100
    out: dict[float, list[Judged]] = {}
    stopped = sweep.stopped_at
    for figures in sweep.levels:
        level = figures.level
        limits = thresholds.slo.at(level)
        at = where(sweep.mode, level)
        if figures.requests == 0:
            if stopped is not None and level > stopped:
                text = f"{at}: not measured, the sweep stopped at its first breach {stopped:g}"
                out[level] = [Judged(Finding("note", text))]
            else:
                text = f"{at}: not measured (the run ended before this level)"
                out[level] = [Judged(Finding("inconclusive", text))]
            continue
        judged: list[Judged] = []
        key = figure(level)
        for metric, by_p in limits.metric_limits().items():
            for p, limit in by_p.items():
                label = f"{metric} {p} {at}"
                counts = figures.tails.get(f"{metric}.{p}")
                values = figures.percentiles.get(f"{metric}.{p}", [])
                if counts is not None:
                    pooled = figures.pooled.get(f"{metric}.{p}")
                    mid = statistics.median(values) if values else None
                    judged.append(
                        judge_limit(
                            label,
                            metric,
                            p,
                            counts,
                            limit,
                            confidence,
                            plan,
                            key,
                            measured=mid if pooled is None else pooled,
                        )
                    )
                    continue
                if not values:
                    text = f"{label}: no figure (no request completed, or cut to fit 4,096 bytes)"
                    judged.append(Judged(Finding("inconclusive", text)))
                    continue
                judged.append(_latency(label, values, limit, confidence, plan, key))
        if limits.min_goodput_percent is not None:
            judged.append(
                _share(
                    f"goodput {at}",
                    figures.goodput_percent,
                    limits.min_goodput_percent,
                    True,
                    confidence,
                    plan,
                    key,
                )
            )
        if limits.max_error_percent is not None:
            judged.append(
                _share(
                    f"errors {at}",
                    figures.error_percent,
                    limits.max_error_percent,
                    False,
                    confidence,
                    plan,
                    key,
                )
            )
        out[level] = judged
    return out


def _latency(  # noqa: PLR0917 - private, one call site
    label: str,
    values: Sequence[float],
    limit: float,
    confidence: float,
    plan: TrialPlan | None,
    key: FigureKey,
) -> Judged:
    trials = len(values)
    level_confidence = look_confidence(confidence, plan, trials)
    clamped = [max(v, SMALLEST_MS) for v in values]
    interval = robust_interval(
        clamped, [limit] * trials, confidence=level_confidence, paired=True, fewest=FEWEST
    )
    assert interval is not None  # every figure > 0
    if not interval.estimated:
        beyond = interval.change > EXACT
        within = not beyond
    else:
        beyond, within = interval.low > EXACT, interval.high <= EXACT
    severity: Severity = "fail" if beyond else "note" if within else "inconclusive"
    mid, low, high = (limit * (1 + x) for x in (interval.change, interval.low, interval.high))
    span = f"[{_ms(low)}, {_ms(high)}] " if interval.estimated else ""
    how = {"fail": "above", "note": "within", "inconclusive": "straddles"}[severity]
    text = f"{label}: {_ms(mid)} ms {span}{how} the {limit:g} ms limit"
    text += f" ({_how(confidence, interval.estimated, trials, plan, interval.left_out)})"
    return Judged(
        Finding(severity, text), key, severity == "inconclusive" and more_allowed(plan, trials)
    )


def _share(  # noqa: PLR0917 - private, two call sites
    label: str,
    values: Sequence[float],
    limit: float,
    at_least: bool,
    confidence: float,
    plan: TrialPlan | None,
    key: FigureKey,
) -> Judged:
    """A share (percent) against its least (goodput) or largest (errors) value."""
    if not values:
        return Judged(Finding("inconclusive", f"{label}: no trial measured it"))
    trials = len(values)
    mid, low, high, left_out = share_interval(values, look_confidence(confidence, plan, trials))
    estimated = trials > 1
    if at_least:
        beyond, within = high < limit - EXACT, low >= limit - EXACT
    else:
        beyond, within = low > limit + EXACT, high <= limit + EXACT
    severity: Severity = "fail" if beyond else "note" if within else "inconclusive"
    span = f"[{low:.1f}, {high:.1f}] " if estimated and high > low else ""
    if severity == "inconclusive":
        how = "straddles"
    elif at_least:
        how = "below" if beyond else "at or above"
    else:
        how = "above" if beyond else "within"
    kind = "least" if at_least else "largest"
    text = f"{label}: {mid:.1f}% {span}{how} the {kind} {limit:g}%"
    text += f" ({_how(confidence, estimated, trials, plan, left_out)})"
    numbers = Comparison(  # the share itself against its limit (fractions), for the page
        candidate=mid,
        baseline=limit,
        unit="%",
        change=mid / 100,
        low=low / 100,
        high=high / 100,
        limit=limit / 100,
        higher_is_worse=not at_least,
        trials=trials,
        against="limit",
    )
    return Judged(
        Finding(severity, text, comparison=numbers),
        key,
        severity == "inconclusive" and more_allowed(plan, trials),
    )


def share_interval(
    values: Sequence[float], confidence: float
) -> tuple[float, float, float, tuple[str, ...]]:
    """Mean and t interval of percentages, after ``gate.robust``'s rule on the fractions.

    A share can be 0 (no errors), so this works on the plain values: one trial standing
    15 points and 5 robust spreads apart from the others is left out, as a stalled trial's
    latency would be.
    """
    drop = outliers([v / 100 for v in values], fewest=FEWEST)
    kept = [v for i, v in enumerate(values) if i not in drop]
    mean = statistics.fmean(kept)
    if len(kept) < 2:
        return mean, mean, mean, ()
    half = t_quantile((1 + confidence) / 2, len(kept) - 1) * statistics.stdev(kept)
    half /= math.sqrt(len(kept))
    return mean, mean - half, mean + half, tuple(f"trial {i + 1}" for i in drop)


def _how(
    confidence: float,
    estimated: bool,
    trials: int,
    plan: TrialPlan | None,
    left_out: tuple[str, ...],
) -> str:
    if not estimated:
        return "one trial: no interval, a point comparison"
    text = f"{confidence * 100:g}% interval, {trials} trials"
    if plan is not None and plan.looks > 1:
        text += f", widened for {plan.looks} looks"
        if trials < plan.max_trials:
            text += f", {trials} of up to {plan.max_trials}"
    if left_out:
        text += f", outlier {', '.join(left_out)} left out"
    return text


def _ms(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def _regressions(
    summary: BenchSummary,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    plan: TrialPlan | None,
) -> list[Judged]:
    """Each limited percentile of each measured level against the baseline's: from the
    candidate's counts against the paired baseline (``gate.slo_tails``), else (a summary
    without counts, or a stored baseline) by the old per-trial rule."""
    if not regression_limit_set(thresholds) or summary.load is None:
        return []
    assert thresholds.slo is not None
    # Whether to compare at all is gate.comparison's call; gate.regression's findings say
    # why not.
    compared, problem = baseline_for(summary, baseline)
    if compared is None or problem is not None:
        return []
    paired = summary.paired_baseline is not None
    old = _PerTrial(thresholds, paired, plan, compared.load)
    found: list[Judged] = []
    for figures in summary.load.levels:
        if figures.requests == 0:
            continue
        at = where(summary.load.mode, figures.level)
        key = figure(figures.level)
        at_level = thresholds.slo.at(figures.level)
        for metric, by_p in at_level.metric_limits().items():
            for p, limit in by_p.items():
                label = f"{metric} {p} {at}"
                counts = figures.tails.get(f"{metric}.{p}")
                if counts is None or not paired:
                    found += old.compare(figures, metric, p, limit, label)
                elif not counts.missing:  # else already inconclusive among the limits
                    found.append(
                        judge_against_baseline(
                            label, metric, p, counts, thresholds, limit, plan, key, at_level
                        )
                    )
    if old.no_sweep:
        text = "baseline has no load sweep: SLO percentiles not compared with it"
        found.insert(0, Judged(Finding("inconclusive", text)))
    return found


class _PerTrial:
    """The old rule for a summary without counts (or a stored baseline): the paired
    relative difference of the per-trial percentiles, through ``gate.comparison``'s judge."""

    def __init__(
        self, thresholds: Thresholds, paired: bool, plan: TrialPlan | None, theirs: LoadSweep | None
    ) -> None:
        assert thresholds.slo is not None
        self.judge = Judge(thresholds, paired, plan)
        self.thresholds = thresholds
        self.theirs = theirs
        self.base_levels = {f.level: f for f in theirs.levels} if theirs is not None else {}
        self.no_sweep = False

    def compare(
        self, figures: LoadLevelFigures, metric: LatencyMetric, p: str, limit: float, label: str
    ) -> list[Judged]:
        name = f"{metric}.{p}"
        ours = figures.percentiles.get(name, [])
        if not ours:
            return []  # already inconclusive among the limits
        if self.theirs is None:
            self.no_sweep = True
            return []
        base = self.base_levels.get(figures.level)
        other = base.percentiles.get(name, []) if base is not None else []
        if not other:
            return [Judged(Finding("inconclusive", f"baseline has no {label}"))]
        assert self.thresholds.slo is not None
        at_level = self.thresholds.slo.at(figures.level)
        _, floor = regression_limit(self.thresholds, limit, metric, at_level)
        return [
            self.judge.compare(
                figure(figures.level),
                label,
                "ms",
                [max(v, SMALLEST_MS) for v in ours],
                [max(v, SMALLEST_MS) for v in other],
                higher_is_worse=True,
                digits=1,
                floor=floor,
                fewest=FEWEST,
            )
        ]
