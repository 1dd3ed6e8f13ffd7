"""Repeated looks at the same figures: how wide each look's interval must be.

The benchmark judges every compared figure after the plan's first ``minTrials`` trials and,
while a figure is undecided (its interval straddles the limit), adds one paired trial of it
and judges again, up to ``maxTrials``. Looking repeatedly at growing data and stopping at the
first decisive look raises the chance that some look's interval misses the truth: with eight
looks at 95% each, a figure sitting exactly at the limit would be called Failed far more
often than the 2.5% a single 95% interval promises.

Procedure: Bonferroni over the planned looks. Each look uses the two-sided confidence
``1 - (1 - c) / K`` with ``K = maxTrials - minTrials + 1``; by the union bound the chance that
*any* look's interval misses the truth on one side is at most ``(1 - c) / 2``, whatever the
correlation between looks and however many of them were actually taken. Why not a
group-sequential boundary (Pocock, O'Brien-Fleming, Lan-DeMets spending): those are exact
for normal statistics with a known variance, while here every look estimates the variance
from 2 to 10 trials (Student's t with 1 to 9 degrees of freedom), where their published
constants do not hold; the union bound needs no such assumption and is conservative by a
known, small margin when looks are few. ``benchmarks/gate_noise.py`` measures the resulting
false-fail rate on the calibrated noise model rather than trusting this paragraph.

A summary without a plan (a fixed number of trials, as before sequential trials) is one
look: ``K = 1``, the stated confidence unchanged.
"""

from __future__ import annotations

from vllm_operator.api.summary import TrialPlan


def look_confidence(confidence: float, plan: TrialPlan | None) -> float:
    """The two-sided confidence of each look's interval for ``plan`` (0..1)."""
    looks = plan.looks if plan is not None else 1
    return 1 - (1 - confidence) / looks


def more_allowed(plan: TrialPlan | None, trials: int) -> bool:
    """May a figure judged on ``trials`` trials still get another one under ``plan``?"""
    return plan is not None and trials < plan.max_trials
