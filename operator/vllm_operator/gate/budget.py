"""How a load sweep spends its time budget: the rule the bench follows and the plan check reads.

The bench runs a workload's levels in order (``bench.load.sweep``): per level a warm-up run on
every server (``WARMUP_SECONDS`` at most), the plan's first ``trials`` rounds (every server
runs the level for ``secondsPerLevel``), then one more round at a time while a figure of the
level is undecided, as long as the round, and after it the warm-up and first rounds of every
level still to come (``held_for_later``), are expected to end before the budget (the deadline
less a reserve: ``RESERVE_FRACTION`` when a quality suite runs after the sweep,
``REPORT_RESERVE_FRACTION`` when none does; a round is expected to take ``NEXT_ROUND_FACTOR``
times the longest round so far). The first rounds are not held to the budget, only to the
deadline.

The rule is owned here, in the pure core, rather than in the bench, because the operator and
``render`` ask it before anything runs ("how many trials can this level get in
timeoutSeconds?", ``gate.decidable``) and the core may not import the bench; the bench
imports these constants. ``SweepBudget`` is the same rule on planned durations, and it
counts a round as ``servers x secondsPerLevel`` and a warm-up as ``servers`` warm-up runs:
the servers one after the other, as the sweep ran them before issue 40. The sweep now
loads the candidate and its twin together (``bench.load.sweep``, "Together"), so a round
lasts one ``secondsPerLevel`` plus the requests still in flight when sending stops; with a
twin the count here is the longer one. So the trials it counts are FEWER than the bench
can run whenever a round's stragglers take less than one more ``secondsPerLevel`` (on a
GPU or a quiet machine, well under a second), and never more: ``render``'s and the
operator's "cannot be decided" warnings err on refusing a plan that could decide, and the
stated power (``gate.power``, from the trials counted here) names a regression no smaller
than the one the bench's trials detect. Kept so on purpose (the rendered power figures do
not move while the judge changes; docs/bench.md, "Plans that can decide"). Without a twin
(``servers`` 1) the count is the bench's own. The Job's start and a quality suite come on
top in both cases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vllm_operator.api.summary import TrialPlan

RESERVE_FRACTION = 0.25
"""Share of the deadline an extra round may not eat into when a quality suite runs after the
rounds (left for the suite and the report)."""

REPORT_RESERVE_FRACTION = 0.05
"""The same share without a quality suite (``suite: {builtin: none}``, an SLO gate's usual
choice): only the report comes after the rounds, and the Job keeps 30 s past the bench's
deadline for the summary. On an H200 an SLO A/A gate with ``timeoutSeconds: 560`` stopped
at 335 s with one figure undecided because the 25% reserve refused a fourth trial."""


def reserve_for(quality_suite: bool) -> float:
    """The share of the deadline extra rounds leave free: a suite to run after, or none."""
    return RESERVE_FRACTION if quality_suite else REPORT_RESERVE_FRACTION


WARMUP_SECONDS = 10.0
"""Longest warm-up run of a load level, per server."""

NEXT_ROUND_FACTOR = 1.5
"""An extra round is expected to take this many times the longest round of its level so far."""


@dataclass(frozen=True)
class SweepBudget:
    """A sweep's planned durations: ``levels`` levels of ``seconds_per_level`` on ``servers``
    servers (2 when a baseline twin is measured beside the candidate)."""

    deadline: float
    """The bench's deadline in seconds (``--deadline-seconds``: timeoutSeconds less a margin)."""
    levels: int
    seconds_per_level: float
    servers: int
    trials: int
    max_trials: int
    warmup: bool = True
    reserve: float = RESERVE_FRACTION
    """Share of the deadline extra rounds leave free (``reserve_for``)."""

    @property
    def round_seconds(self) -> float:
        """One trial of one level on every server, counted one server after the other (an
        over-estimate with a twin: the bench loads both at once; module docstring)."""
        return self.servers * self.seconds_per_level

    @property
    def warmup_seconds(self) -> float:
        """One level's warm-up on every server, counted one after the other like a round."""
        if not self.warmup:
            return 0.0
        return self.servers * min(self.seconds_per_level, WARMUP_SECONDS)

    def start(self, index: int) -> float:
        """When level ``index`` (0-based) starts at the earliest: every level before it
        decided at its first look."""
        return index * (self.warmup_seconds + self.trials * self.round_seconds)

    def most_trials(self, index: int) -> int:
        """The most trials level ``index`` can get: its first rounds that end before the
        deadline, then extra rounds while the budget allows, up to ``max_trials``."""
        begun = self.start(index) + self.warmup_seconds
        first = min(self.trials, math.floor((self.deadline - begun) / self.round_seconds + 1e-9))
        if first < self.trials:
            return max(first, 0)
        trials = self.trials
        while trials < self.max_trials and extra_round_fits(
            begun + trials * self.round_seconds + self.later(index),
            self.round_seconds,
            self.deadline,
            self.reserve,
        ):
            trials += 1
        return trials

    def later(self, index: int) -> float:
        """What the levels after ``index`` need of the budget (``held_for_later``)."""
        return held_for_later(
            self.levels - index - 1, self.round_seconds, self.warmup_seconds, self.trials
        )

    def deadline_for(self, index: int, trials: int) -> float:
        """The least deadline at which ``most_trials(index)`` reaches ``trials``."""
        begun = self.start(index) + self.warmup_seconds
        if trials <= self.trials:
            return begun + trials * self.round_seconds
        last_start = begun + (trials - 1) * self.round_seconds
        extra = (last_start + self.later(index) + NEXT_ROUND_FACTOR * self.round_seconds) / (
            1 - self.reserve
        )
        return max(extra, begun + self.trials * self.round_seconds)


def held_for_later(
    levels_left: int, round_seconds: float, warmup_seconds: float, trials: int
) -> float:
    """Seconds the ``levels_left`` levels after this one need for their warm-up and first
    ``trials`` rounds: an extra round of this level may not take them. Without this, a level
    that stays undecided spends the budget its successors need for their first look (in 200
    modelled A/A gates with a 5% reserve, 8 req/s took 10 trials and left 24 req/s one)."""
    return max(levels_left, 0) * (warmup_seconds + trials * round_seconds)


def fits_budget(
    elapsed: float, estimate: float, deadline: float, reserve: float = RESERVE_FRACTION
) -> bool:
    """Would ``estimate`` more seconds, ``elapsed`` seconds into the run, end before the
    budget (the deadline less ``reserve`` of it)?"""
    return elapsed + estimate <= deadline * (1 - reserve)


def extra_round_fits(
    elapsed: float, longest_round: float, deadline: float, reserve: float = RESERVE_FRACTION
) -> bool:
    """Would one more round (``NEXT_ROUND_FACTOR`` x the longest so far), ``elapsed`` seconds
    into the run, end before the budget?"""
    return fits_budget(elapsed, NEXT_ROUND_FACTOR * longest_round, deadline, reserve)


def reachable_plan(budget: SweepBudget) -> TrialPlan:
    """The sweep's trial plan cut to the trials its deadline can give: ``maxTrials`` no
    larger than the most trials any level can get (``SweepBudget.most_trials``), never
    below the first look's ``trials``.

    Why: the looks' error rate is split over the plan's looks (``gate.sequential``), half
    of it kept for the look at ``maxTrials``. A plan whose deadline ends every level before
    that look spends half its error rate on a look that never comes, and every look it
    does take is judged at the stricter confidence of the early ones: the kit's plan (8
    and 24 req/s, 20 s a level, 3-10 trials, ``timeoutSeconds: 480``) reaches 6 trials at
    most, so 4 looks, not 8. Cut to 3-6, the same 5% is split over the 4 looks it can
    take. The cut is fixed by the plan alone, before any data, and the bench is held to it
    (``bench.config.BenchConfig.plan``: no level gets more trials), so the union bound
    over the looks still holds the stated error.
    """
    most = max((budget.most_trials(i) for i in range(budget.levels)), default=budget.trials)
    cut = max(budget.trials, min(budget.max_trials, most))
    return TrialPlan(min_trials=budget.trials, max_trials=cut)
