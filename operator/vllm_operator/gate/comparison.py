"""Comparing a figure with the baseline's: which baseline, the limit, and the judge. Pure.

Shared by the study's regressions (``gate.regression``) and the load sweep's percentiles
(``gate.slo``), which import it as siblings and never each other:

- ``regression_limit_set``: whether the thresholds compare with a baseline at all
  (``maxRegressionPercent``), asked in one place;
- ``baseline_for``: which baseline's figures a summary is compared with (the paired one,
  else the stored summary) and, when its speed figures may not be compared, why;
- ``Judge``: two lists of trial figures -> a finding about one compared figure, on the
  interval of their relative difference (``gate.interval``), with the limit the larger of
  ``maxRegressionPercent`` and an absolute floor, at the look's confidence
  (``gate.sequential``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import SUMMARY_SCHEMA, BenchSummary, Figures, Placement, TrialPlan
from vllm_operator.gate.finding import (
    BRIEF,
    Comparison,
    FigureKey,
    FigureOutcome,
    Finding,
    Judged,
    Severity,
    StopReason,
)
from vllm_operator.gate.interval import Interval, robust_interval
from vllm_operator.gate.sequential import look_confidence, more_allowed

SITS_ON_LIMIT = 0.005
"""An estimate within this (log scale, 0.5%) of the limit: no number of trials decides it."""

MOST_TRIALS_NAMED = 100
"""Beyond this, "about N trials" is no advice: the reason says more than this."""

EARLY = "the benchmark stopped early: its time budget ran out, or another figure had already failed"
"""What a figure's reason says when it stopped before ``maxTrials``; ``gate.verdict`` replaces
it with which of the two it was (``gate.finding.STOP_TEXT``)."""

EXACT = 1e-12
"""Relative differences this close to a limit count as on it (float rounding, not data)."""


def regression_limit_set(thresholds: Thresholds) -> bool:
    """Do these thresholds compare the candidate with a baseline (``maxRegressionPercent``)?"""
    return thresholds.max_regression_percent is not None


def baseline_for(
    summary: BenchSummary, baseline: BenchSummary | None
) -> tuple[Figures | None, Finding | None]:
    """The baseline's figures (the paired one, else ``baseline``) and, when its speed figures
    may not be compared with the candidate's, why: no baseline or one that is not comparable
    at all (no figures: ``None``), or one on another GPU product (figures kept: quality is
    still compared). ``gate.regression`` and ``gate.slo`` both ask it."""
    paired = summary.paired_baseline is not None
    if baseline is not None and not paired and baseline.schema_ != SUMMARY_SCHEMA:
        text = f"baseline format {baseline.schema_!r} not comparable"
        return None, Finding("inconclusive", text)
    # Candidate and baseline are one shape (``Figures``): the paired one, else the stored.
    base: Figures | None = summary.paired_baseline if paired else baseline
    if base is None:
        return None, Finding("note", "no baseline: regressions not checked (first revision)")
    broken = sorted(k for k, v in base.errors.items() if v > 0)
    if broken:
        return None, Finding("inconclusive", f"baseline has failed requests ({', '.join(broken)})")
    gpus = _gpu_products(summary.placement, base.placement)
    return base, None if gpus is None else Finding("inconclusive", gpus)


@dataclass(frozen=True)
class _Bound:
    """The regression limit of one figure: a fraction, and what set it."""

    fraction: float
    why: str


class Judge:
    """Turns two lists of trial figures into a finding about one compared figure.

    Used by ``gate.regression`` for the study's figures and by ``gate.slo`` for the load
    sweep's percentiles of summaries without counts.
    """

    def __init__(self, thresholds: Thresholds, paired: bool, plan: TrialPlan | None) -> None:
        assert thresholds.max_regression_percent is not None
        self.allowed = thresholds.max_regression_percent
        self.floor_ms = thresholds.regression_floor_ms
        self.floor_tps = thresholds.regression_floor_tokens_per_second
        self.confidence = thresholds.confidence_percent / 100
        self.paired = paired
        self.plan = plan

    def bound(
        self, baseline: float, higher_is_worse: bool, unit: str, floor: float | None = None
    ) -> _Bound:
        """max(allowed % of the baseline, the absolute floor), as a fraction of the baseline.

        A tokens/s drop cannot exceed 100%: a floor above the baseline itself caps there.
        ``floor`` replaces the thresholds' floor (``gate.slo``: a share of the SLO limit).
        """
        relative = self.allowed / 100
        if floor is None:
            floor = self.floor_ms if higher_is_worse else self.floor_tps
        absolute = floor / baseline if baseline > 0 else 0.0
        if not higher_is_worse:
            absolute = min(absolute, 1.0)
        if absolute > relative:
            return _Bound(absolute, f"{floor:g} {unit} floor")
        return _Bound(relative, f"{self.allowed:g}%")

    def compare(  # noqa: PLR0917 - one call site per figure kind
        self,
        figure: FigureKey,
        label: str,
        unit: str,
        candidate: Sequence[float],
        baseline: Sequence[float],
        higher_is_worse: bool,
        digits: int,
        floor: float | None = None,
        fewest: int = 3,
    ) -> Judged:
        """One figure against the baseline's. ``floor`` replaces the thresholds' absolute
        floor, ``fewest`` is the fewest trials from which an outlier may be left out."""
        trials = max(len(candidate), len(baseline))
        interval = robust_interval(
            candidate,
            baseline,
            confidence=look_confidence(self.confidence, self.plan, trials),
            paired=self.paired,
            fewest=fewest,
        )
        if interval is None:
            return Judged(Finding("inconclusive", f"{label}: a figure of 0, nothing to compare"))
        # geometric means of the kept trials: their ratio is exactly the interval's change
        c, b = (statistics.geometric_mean(side) for side in interval.kept)
        bound = self.bound(b, higher_is_worse, unit, floor)
        limit = bound.fraction
        # A change exactly at the limit is within it; EXACT absorbs the last bits of float
        # arithmetic (50 -> 55 ms computes as +10.00000000000003%, not +10%).
        if not interval.estimated:  # one trial each: a point comparison
            change = interval.change
            beyond = change > limit + EXACT if higher_is_worse else change < -limit - EXACT
            within = not beyond
        elif higher_is_worse:
            beyond, within = interval.low > limit + EXACT, interval.high <= limit + EXACT
        else:
            beyond, within = interval.high < -limit - EXACT, interval.low >= -limit - EXACT
        severity: Severity = "fail" if beyond else "note" if within else "inconclusive"
        open_ = severity == "inconclusive" and more_allowed(self.plan, trials)
        verdict = {
            "fail": "regression beyond the limit",
            "note": "within the limit",
            "inconclusive": "the interval straddles the limit",
        }[severity]
        stop: StopReason | None = None
        if severity == "inconclusive":
            verdict += self._what_decides(interval, limit, higher_is_worse)
            stop = self._stop(interval)
        sign = "+" if higher_is_worse else "-"
        shown = f"{sign}{limit * 100:.3g}%"
        if bound.why.endswith("floor"):
            usual = b * self.allowed / 100
            shown += f" (the {bound.why}; {self.allowed:g}% would be {sign}{usual:.{digits}f}"
            shown += f" {unit})"
        text = (
            f"{label}: {c:,.{digits}f} {unit}, {interval.change * 100:+.1f}% vs baseline "
            f"{b:,.{digits}f} {unit} ({self._describe(interval)}), limit {shown}: {verdict}"
        )
        span = (
            f" ({interval.low * 100:+.1f}% to {interval.high * 100:+.1f}%)"
            if interval.estimated
            else ""
        )
        outcome: FigureOutcome = "beyond" if beyond else "within" if within else "undecided"
        brief = (
            f"{label}: {interval.change * 100:+.1f}%{span} vs baseline, limit "
            f"{sign}{limit * 100:.3g}%: {BRIEF[outcome]}"
        )
        numbers = Comparison(
            candidate=c,
            baseline=b,
            unit=unit,
            change=interval.change,
            low=interval.low if interval.estimated else interval.change,
            high=interval.high if interval.estimated else interval.change,
            limit=limit if higher_is_worse else -limit,
            higher_is_worse=higher_is_worse,
            trials=trials,
        )
        found = Finding(
            severity,
            text,
            figure=label if unit == "ms" else f"{label} {unit}",
            outcome=outcome,
            stop=stop,
            comparison=numbers,
            brief=brief,
        )
        return Judged(found, figure, open_)

    def _stop(self, interval: Interval) -> StopReason:
        """Why an undecided figure has no more trials ("early": ``gate.verdict`` says which)."""
        if self.plan is None or max(interval.trials) >= self.plan.max_trials:
            return "plan-exhausted"
        return "early"

    def _describe(self, interval: Interval) -> str:
        if not interval.estimated:
            return "one trial each: no interval, a point comparison"
        how = "paired" if interval.paired else "unpaired"
        n = interval.trials[0] if interval.paired else f"{interval.trials[0]}/{interval.trials[1]}"
        text = (
            f"{self.confidence * 100:g}% interval {interval.low * 100:+.1f}% to "
            f"{interval.high * 100:+.1f}%, {how}, {n} trials"
        )
        if self.plan is not None and self.plan.looks > 1:
            text += f", widened for {self.plan.looks} looks"
        if interval.left_out:
            text += f", outlier {', '.join(interval.left_out)} left out"
        return text

    def _what_decides(self, interval: Interval, limit: float, higher_is_worse: bool) -> str:
        """Why it stayed open, and how many trials at this spread would decide it."""
        n = max(interval.trials)
        if self.plan is None:
            ran = f"; {n} trials, a fixed number (no sequential plan)"
        elif n < self.plan.max_trials:
            ran = f"; {n} of up to {self.plan.max_trials} trials run ({EARLY})"
        else:
            ran = f"; {n} trials, the most allowed (gate.maxTrials)"
        edge = math.log1p(limit) if higher_is_worse else math.log1p(-limit) if limit < 1 else None
        centre = math.log1p(interval.change)
        half = (math.log1p(interval.high) - math.log1p(interval.low)) / 2
        if edge is None or half <= 0:
            return ran
        distance = abs(centre - edge)
        if distance < SITS_ON_LIMIT:
            return ran + ": the estimate sits on the limit, more trials would not decide it"
        needed = math.ceil(n * (half / distance) ** 2)
        if needed > MOST_TRIALS_NAMED:
            return ran + f": more than {MOST_TRIALS_NAMED} trials at this spread would be needed"
        return ran + f": about {needed} trials at this spread would decide it"


def _gpu_products(candidate: Placement | None, baseline: Placement | None) -> str | None:
    a = candidate.gpu_product if candidate else None
    b = baseline.gpu_product if baseline else None
    if a and b and a != b:
        return (
            f"candidate ran on {a}, baseline on {b}: different GPU products, so speed "
            "regressions are not judged (the difference would be the hardware's)"
        )
    return None
