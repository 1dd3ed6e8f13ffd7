"""Repeated looks at the same figures: how wide each look's interval must be.

The benchmark judges every compared figure after the plan's first ``minTrials`` trials and,
while a figure is undecided (its interval straddles the limit), adds one paired trial of it
and judges again, up to ``maxTrials``. Looking repeatedly at growing data and stopping at the
first decisive look raises the chance that some look's interval misses the truth: with eight
looks at 95% each, a figure sitting exactly at the limit would be called Failed far more
often than the 2.5% a single 95% interval promises.

Procedure: a union (Bonferroni) bound over the planned looks, ``K = maxTrials - minTrials
+ 1``. The error rate ``1 - c`` is split across the looks before any data is seen: half to the
last look, the other half equally over the ``K - 1`` earlier ones (``look_confidence``); by the
union bound the chance that *any* look's interval misses the truth on one side is at most
``(1 - c) / 2``, whatever the correlation between looks and however many of them were
actually taken. Why not a
group-sequential boundary (Pocock, O'Brien-Fleming, Lan-DeMets spending): those are exact
for normal statistics with a known variance, while here every look estimates the variance
from 2 to 10 trials (Student's t with 1 to 9 degrees of freedom), where their published
constants do not hold; the union bound needs no such assumption and is conservative by a
known, small margin when looks are few. ``benchmarks/gate_noise.py`` measures the resulting
false-fail rate on the calibrated noise model rather than trusting this paragraph.

A summary without a plan (a fixed number of trials, as before sequential trials) is one
look: ``K = 1``, the stated confidence unchanged.

The looks are those the plan can take: a load sweep's plan is cut to the trials its deadline
can give a level (``gate.budget.reachable_plan``; the bench is held to it), so no error rate
is kept for a look that cannot come. The kit's plan (3 to 10 trials, 8 and 24 req/s, 20 s a
level, ``timeoutSeconds: 480``) reaches 6 trials at most: cut to 3-6, its looks are judged
at 99.17% (3-5) and 97.5% (6) instead of 99.64% at every look it took before.
"""

from __future__ import annotations

from vllm_operator.api.summary import TrialPlan

LAST_LOOK_SHARE = 0.5
"""Share of the error rate spent on the last look; the rest is split equally over the others.

Most figures of an identical revision are decided at the first looks whatever their share
(long and medium latency: within +-2% at 3 trials); the ones that stay open are the noisy
ones, and they end at the last look, where a wider share narrows the interval most (at 10
trials, t = 2.69 at 97.5% one side against 3.69 for an equal 1/8 share)."""


def look_confidence(confidence: float, plan: TrialPlan | None, trials: int | None = None) -> float:
    """The two-sided confidence of the interval of a look after ``trials`` trials (0..1).

    The error rate ``1 - confidence`` is split over the plan's looks: ``LAST_LOOK_SHARE`` to
    the look at ``maxTrials``, the rest equally to the looks before it. By the union bound
    the split keeps the total at ``1 - confidence``, whichever split is chosen, as long as it
    is fixed before the data (it is: it depends only on the plan).
    """
    looks = plan.looks if plan is not None else 1
    if plan is None or looks == 1:
        return confidence
    alpha = 1 - confidence
    if trials is not None and trials >= plan.max_trials:
        return 1 - alpha * LAST_LOOK_SHARE
    return 1 - alpha * (1 - LAST_LOOK_SHARE) / (looks - 1)


def more_allowed(plan: TrialPlan | None, trials: int) -> bool:
    """May a figure judged on ``trials`` trials still get another one under ``plan``?"""
    return plan is not None and trials < plan.max_trials
