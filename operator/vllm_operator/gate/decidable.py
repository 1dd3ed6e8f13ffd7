"""Can a gate's plan decide its own tail limits in its time? Pure.

A tail limit is judged as a share of observations above it (``gate.tails``): "TTFT p99
<= 1000 ms" is shown met only when the observations bound the share above 1000 ms below 1%
with the look's confidence, and even when none lie above, that takes a least number of them
(``tails.observations_needed``): 368 requests for a p99 at 95%, about 630 at the first of
eight looks of a 3-10 plan (``gate.sequential`` splits the error rate over the looks; a
plan is cut to the trials its deadline can give, ``gate_plan``, so a short one has fewer).
A level measured for fewer requests than that can never pass; the gate spends its whole
``timeoutSeconds`` and ends Inconclusive. This module says so before anything runs.

The core is generic over "observations per cluster x clusters available" (``reach``): a
load level's trials are its clusters here, a canary step's pod scrapes would be its clusters
there. For a spec (``shortfalls``), each level's clusters are the most trials the sweep's
budget can give it (``gate.budget``: every earlier level decided at its first look, so a
warning is never a false alarm of the budget), its observations per trial are:

- rate mode: rate x ``secondsPerLevel`` requests (the Poisson mean); TTFT, TPOT and
  end-to-end latency count one per request, inter-token latency counts the gaps between
  chunks, requests x (mean output tokens - 1) of a synthetic workload;
- a dataset's output lengths are not known before the run, so its ITL limits are not
  checked here (a stream of a few tokens brings enough gaps in practice);
- concurrency mode: the requests a level brings depend on the server's speed, unknown
  before measuring, so its levels are not checked here; the bench itself asks the same
  question with the requests it measured (``bench.load.sweep``).

When a limit falls short, the warning names the level, the limit, the observations needed and
what would give them: the ``timeoutSeconds`` that lets the level reach enough trials, or,
when even ``maxTrials`` trials are too few, the ``secondsPerLevel`` that would do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from vllm_operator.api.gate_spec import GateSpec
from vllm_operator.api.summary import TrialPlan
from vllm_operator.api.workload import LatencyMetric, Percentile, SloLimits
from vllm_operator.gate.budget import SweepBudget, reachable_plan, reserve_for
from vllm_operator.gate.sequential import look_confidence
from vllm_operator.gate.tails import allowed_share, observations_needed

PER_REQUEST: frozenset[LatencyMetric] = frozenset({"ttft", "tpot", "e2e"})
"""Metrics with one observation per request; ITL has one per gap between chunks."""


@lru_cache(maxsize=256)
def needed(percentile: str, confidence: float) -> int:
    """Observations that show a ``percentile`` limit met when none lie above it (0: never)."""
    return observations_needed(allowed_share(percentile), confidence)


@dataclass(frozen=True)
class Reach:
    """What ``clusters`` clusters of ``per_cluster`` observations can show of one limit."""

    needed: int
    """Observations needed at zero exceedance (0: none can show it)."""
    available: float
    confidence: float

    @property
    def decidable(self) -> bool:
        return 0 < self.needed <= self.available + 1e-9


def reach(percentile: str, per_cluster: float, clusters: int, confidence: float) -> Reach:
    """Can ``clusters`` clusters of ``per_cluster`` observations show the limit met?"""
    return Reach(needed(percentile, confidence), per_cluster * clusters, confidence)


@dataclass(frozen=True)
class Observations:
    """What one trial of a level brings: requests, and gaps per request (None: unknown)."""

    requests: float
    gaps_per_request: float | None

    def of(self, metric: LatencyMetric) -> float | None:
        """Observations of ``metric`` in one trial; None when not known before the run."""
        if metric in PER_REQUEST:
            return self.requests
        if self.gaps_per_request is None:
            return None
        return self.requests * self.gaps_per_request


def short_limits(
    limits: SloLimits,
    per_trial: Observations,
    trials: int,
    confidence: float,
    plan: TrialPlan | None,
) -> list[tuple[LatencyMetric, Percentile, float, Reach]]:
    """The latency limits of one level that ``trials`` trials cannot show met.

    ``confidence`` is the gate's (``confidencePercent`` / 100); the look after ``trials``
    trials is widened for the plan's looks as the gate widens it.
    """
    out: list[tuple[LatencyMetric, Percentile, float, Reach]] = []
    at_look = look_confidence(confidence, plan, trials)
    for metric, by_p in limits.metric_limits().items():
        count = per_trial.of(metric)
        if count is None:
            continue
        for p, limit in by_p.items():
            got = reach(p, count, trials, at_look)
            if not got.decidable:
                out.append((metric, p, limit, got))
    return out


@dataclass(frozen=True)
class Shortfall:
    """A tail limit of one level that the spec's plan cannot decide in its time."""

    where: str
    """ "at 24 req/s"."""
    metric: LatencyMetric
    percentile: Percentile
    limit: float
    unit: str
    """ "requests" or "gaps"."""
    reach: Reach
    trials: int
    """The most trials the level can get in ``timeoutSeconds``."""
    timeout_seconds: int
    timeout_needed: int | None
    """The least timeoutSeconds that decides it (with ``seconds_per_level_needed``, if set)."""
    seconds_per_level_needed: int | None
    """Set when even maxTrials trials are too few: the least secondsPerLevel that decides it."""

    @property
    def message(self) -> str:
        """The warning, naming the level, the limit and what would decide it."""
        share = f"{allowed_share(self.percentile) * 100:g}%"
        text = (
            f"gate plan: {self.metric} {self.percentile} {self.where} cannot be decided: "
            f"showing at most {share} above {self.limit:g} ms takes at least "
            f"{self.reach.needed:,} {self.unit} with none above it "
            f"({self.reach.confidence * 100:.3g}% look), and "
        )
        if self.trials == 0:
            text += f"no trial of it fits in timeoutSeconds {self.timeout_seconds}"
        else:
            text += (
                f"the {self.trials} trial{'' if self.trials == 1 else 's'} that fit in "
                f"timeoutSeconds {self.timeout_seconds} bring "
                f"{math.floor(self.reach.available + 1e-9):,}"
            )
        if self.seconds_per_level_needed is not None:
            text += (
                f"; even maxTrials trials are too few: it needs secondsPerLevel >= "
                f"{self.seconds_per_level_needed}"
            )
            if self.timeout_needed is not None:
                text += f" and timeoutSeconds >= {self.timeout_needed}"
            return text
        if self.timeout_needed is not None:
            return text + f"; it needs timeoutSeconds >= {self.timeout_needed}"
        return text


def shortfalls(
    gate: GateSpec, deadline_seconds: float, *, servers: int, margin_seconds: float = 0.0
) -> list[Shortfall]:
    """Every tail limit of ``gate``'s levels its plan cannot decide before the deadline.

    ``deadline_seconds`` is the bench's (``render.job.bench_deadline``), ``margin_seconds``
    the difference to ``timeoutSeconds`` (to state the timeout a fix needs); ``servers`` is
    2 when a baseline twin is measured beside the candidate.
    """
    slo = gate.thresholds.slo
    load = gate.workload.load
    if slo is None or slo.is_empty or gate.workload.is_study or load.mode != "rate":
        return []
    plan = gate_plan(gate, deadline_seconds, servers)
    full = TrialPlan(min_trials=gate.trials, max_trials=gate.max_trials)
    confidence = gate.thresholds.confidence_percent / 100
    gaps = _gaps_per_request(gate)
    budget = sweep_budget(gate, deadline_seconds, servers)
    out: list[Shortfall] = []
    for index, rate in enumerate(load.levels):
        per_second = Observations(rate, gaps)
        per_trial = Observations(rate * load.seconds_per_level, gaps)
        trials = budget.most_trials(index)
        limits = slo.at(rate)
        for metric, p, limit, got in short_limits(limits, per_trial, trials, confidence, plan):
            timeout, seconds = _fix(
                budget, index, metric, p, per_second, confidence, full, margin_seconds
            )
            out.append(
                Shortfall(
                    where=f"at {rate:g} req/s",
                    metric=metric,
                    percentile=p,
                    limit=limit,
                    unit="requests" if metric in PER_REQUEST else "gaps",
                    reach=got,
                    trials=trials,
                    timeout_seconds=gate.timeout_seconds,
                    timeout_needed=timeout,
                    seconds_per_level_needed=seconds,
                )
            )
    return out


def _fix(  # noqa: PLR0917 - private, one call site
    budget: SweepBudget,
    index: int,
    metric: LatencyMetric,
    percentile: Percentile,
    per_second: Observations,
    confidence: float,
    plan: TrialPlan,
    margin: float,
) -> tuple[int | None, int | None]:
    """(the least timeoutSeconds that decides it, the secondsPerLevel it needs or None).

    ``plan`` is the spec's own, uncut. A longer deadline gives the level more trials and
    the plan more looks (``gate.budget.reachable_plan``); both change only where some
    level's trials do (``SweepBudget.deadline_for``), so the least deadline that decides
    the limit is the first of those steps at which the level's most trials, judged at
    the look of the plan cut there, can show it met. When even ``maxTrials`` trials are
    too few, the secondsPerLevel that makes them enough and the timeout that then fits
    them. (None, None): nothing can.
    """
    rate = per_second.of(metric)
    assert rate is not None  # short_limits skips metrics without a count
    seconds = budget.seconds_per_level
    steps = sorted(
        {
            budget.deadline_for(level, trials)
            for level in range(budget.levels)
            for trials in range(1, plan.max_trials + 1)
        }
    )
    for deadline in steps:
        longer = replace(budget, deadline=deadline)
        trials = longer.most_trials(index)
        at_look = look_confidence(confidence, reachable_plan(longer), trials)
        if trials > 0 and reach(percentile, rate * seconds, trials, at_look).decidable:
            return math.ceil(deadline + margin), None
    most = needed(percentile, look_confidence(confidence, plan, plan.max_trials))
    if most == 0 or rate <= 0:
        return None, None
    seconds_needed = math.ceil(most / (rate * plan.max_trials) - 1e-9)
    longer = replace(budget, seconds_per_level=seconds_needed)
    return math.ceil(longer.deadline_for(index, plan.max_trials) + margin), seconds_needed


def _gaps_per_request(gate: GateSpec) -> float | None:
    synthetic = gate.workload.synthetic
    if synthetic is None:
        return None
    return max(synthetic.output_tokens.mean - 1, 0)


def sweep_budget(gate: GateSpec, deadline_seconds: float, servers: int) -> SweepBudget:
    """The time budget of ``gate``'s rate sweep within ``deadline_seconds`` (its levels,
    their length, its trials and the reserve its quality suite needs)."""
    load = gate.workload.load
    return SweepBudget(
        deadline=deadline_seconds,
        levels=len(load.levels),
        seconds_per_level=load.seconds_per_level,
        servers=servers,
        trials=gate.trials,
        max_trials=gate.max_trials,
        reserve=reserve_for(gate.suite.runs_tests),
    )


def gate_plan(gate: GateSpec, deadline_seconds: float, servers: int) -> TrialPlan:
    """The trial plan ``gate``'s bench runs and is judged with: ``trials`` to ``maxTrials``,
    for a load sweep cut to the trials its deadline can give a level
    (``gate.budget.reachable_plan``, the bench's own cut: ``bench.config.BenchConfig.plan``)."""
    plan = TrialPlan(min_trials=gate.trials, max_trials=gate.max_trials)
    if gate.workload.is_study:
        return plan
    return reachable_plan(sweep_budget(gate, deadline_seconds, servers))
