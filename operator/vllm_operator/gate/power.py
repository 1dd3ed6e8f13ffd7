"""What a gate's plan can detect: the stated power of each limited SLO figure. Pure.

"Detect a doubled TTFT tail 95% of the time" is not a property of the judge alone: it
depends on the level's rate and length, the trials the deadline allows, the floor, the
confidence and its looks. So instead of a fixed target the gate states, for each limited
percentile and level, the smallest regression it detects with 95% probability: "detects
TTFT p99 +180 ms or more at 24 req/s". A user reads it before a GPU is spent.

The regression: the candidate's observations of that metric shifted by ``d`` ms (its
percentile ``d`` ms slower; ``benchmarks/tail_noise.py`` applies the same shift to check
the statement). The judge (``gate.pair_tails``) counts the candidate's observations above
each trial's bar ``max(b (1 + r), b + floor)`` of the twin's percentile ``b`` and fails the
figure when the clustered Clopper-Pearson lower bound of their share is above the
percentile's allowed share (1% for p99) at the look's confidence. Here, from a noise model
of one figure (``TailNoise``, fitted on GPU runs):

- the tail near the percentile is log-normal with log scale ``tail_sigma`` (s) per normal
  score: a candidate shifted by ``d`` ms has ``1 - Phi(z_p + ln((q + o - d) / q) / s)``
  above the bar, for the twin's typical percentile ``q`` and the bar's offset ``o``;
- the twin's percentile of a trial, the base of the bar, lies off the candidate's by a
  normal log ratio of sd ``pair_sigma``: each trial's share is that share at a bar moved by
  it, and the mean and variance of the shares over it (a grid of normal scores) enter the
  pooled share's expectation and its scatter;
- the counts of ``K`` trials of ``n`` observations are worth ``n K / (within x across)``
  independent ones: the judge's own design effects inside a trial (ITL gaps by request) and
  across trials (``gate.clustering``), fitted from the same runs;
- the figure fails with 95% probability when even the share 1.645 standard errors (between
  trials from the bar's scatter, within them binomial with the design effect inside) below
  its expectation is shown beyond at the look's confidence (``gate.sequential``). Any look that
  does suffices (the gate stops at the first breach), so the stated figure is the smallest
  over the looks the budget reaches for certain (``guaranteed_trials``: every earlier level
  undecided to its last extra round; ``gate.decidable`` counts the most trials instead, as
  the least a warning of "cannot decide" may assume).

``None``: no regression
of any size is shown beyond in the trials the plan allows (too few observations). The noise
model is the GPU runs' (``DEFAULT_NOISE``); a calibration from the user's own A/A reports
passes its own (``figure_power``'s ``noise``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from vllm_operator.api.gate_spec import GateSpec
from vllm_operator.api.summary import TrialPlan
from vllm_operator.api.workload import LatencyMetric, Percentile
from vllm_operator.gate.binomial import incomplete_beta
from vllm_operator.gate.budget import SweepBudget, extra_round_fits
from vllm_operator.gate.decidable import Observations, gate_plan, sweep_budget
from vllm_operator.gate.power_noise import DEFAULT_NOISE, NORMAL_SCORE, NoiseModel, TailNoise
from vllm_operator.gate.sequential import look_confidence
from vllm_operator.gate.slo_tails import regression_limit
from vllm_operator.gate.tails import allowed_share

POWER = 0.95
"""The probability with which the stated regression is detected (Failed)."""
Z_POWER = 1.6448536269514722
"""Its one-sided normal score."""
NAMES: dict[str, str] = {"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT", "e2e": "E2E"}
STEPS = 48
"""Bisection steps over the regression in ms: the bracket shrinks 2^48-fold."""


def figure_power(
    *,
    noise: TailNoise,
    percentile: str,
    observations_per_trial: float,
    trials: int,
    confidence: float,
    plan: TrialPlan | None,
    relative_percent: float,
    floor_ms: float,
) -> float | None:
    """The smallest shift (ms) of the candidate's figure that the gate fails with 95%
    probability within ``trials`` trials (the most the budget gives the level), or None.

    ``confidence``: the gate's (0..1), widened per look for ``plan``; ``relative_percent``
    and ``floor_ms``: the bar's ``max(b (1 + r / 100), b + floor)``.
    """
    allowed = allowed_share(percentile)
    first = plan.min_trials if plan is not None else trials
    best: float | None = None
    for k in range(max(1, min(first, trials)), trials + 1):
        tail = (1 - look_confidence(confidence, plan, k)) / 2
        found = _smallest_shift(noise, percentile, observations_per_trial, k, (allowed, tail))
        if found is not None and (best is None or found < best):
            best = found
    offset = max(relative_percent, 0.0) / 100 * noise.quantile_ms(percentile)
    return None if best is None else best + max(offset, floor_ms)


def _smallest_shift(
    noise: TailNoise, percentile: str, per_trial: float, trials: int, test: tuple[float, float]
) -> float | None:
    """The shift beyond the bar's offset that is shown beyond with 95% probability after
    ``trials`` trials of ``per_trial`` observations; ``test``: (allowed share, one-sided
    error of the look)."""
    allowed, tail = test
    q = noise.quantile_ms(percentile)
    z = NORMAL_SCORE[percentile]
    within = max(noise.within, 1.0)
    observations = per_trial * trials
    effective = observations / (within * max(noise.across, 1.0))
    sigma = max(noise.tail_sigma, 1e-9)
    if effective <= 0:
        return None

    def detected(extra: float) -> bool:
        """Past the offset by ``extra`` ms: is the 5th-percentile share shown beyond?"""
        left = q - extra  # where the bar falls on the unshifted candidate
        if left <= 0:
            share, between = 1.0, 0.0
        else:
            share, between = _shares(math.log(left / q) + z * sigma, sigma, noise.pair_sigma)
        spread = between / trials + within * share * (1 - share) / observations
        low = share - Z_POWER * math.sqrt(spread)
        hits = low * effective
        if hits <= 0 or low <= allowed:
            return False
        return incomplete_beta(allowed, hits, effective - hits + 1) < tail

    if not detected(q):
        return None
    lo, hi = 0.0, q
    if detected(lo):
        return 0.0
    for _ in range(STEPS):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if detected(mid) else (mid, hi)
    return hi


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


GRID = tuple(-5 + i * 0.25 for i in range(41))
"""Normal scores of the bar's scatter, -5 to 5: the mean and variance of a trial's share."""
WEIGHTS = tuple(math.exp(-u * u / 2) for u in GRID)


def _shares(offset: float, sigma: float, pair: float) -> tuple[float, float]:
    """(mean, variance between trials) of a trial's share above the bar, the bar ``offset``
    (log, plus the tail's own ``sigma z_p``) off the candidate's tail and scattered by ``pair``
    from trial to trial."""
    if pair <= 0:
        return 1 - _phi(offset / sigma), 0.0
    values = [1 - _phi((offset + pair * u) / sigma) for u in GRID]
    total = sum(WEIGHTS)
    mean = sum(w * v for w, v in zip(WEIGHTS, values, strict=True)) / total
    var = sum(w * (v - mean) ** 2 for w, v in zip(WEIGHTS, values, strict=True)) / total
    return mean, var


@dataclass(frozen=True)
class Power:
    """The stated power of one limited figure at one level."""

    metric: LatencyMetric
    percentile: Percentile
    rate: float
    detects_ms: float | None
    """The smallest regression detected with 95% probability; None: none is."""
    trials: int

    @property
    def message(self) -> str:
        """ "detects TTFT p99 +180 ms or more at 24 req/s"."""
        name = f"{NAMES[self.metric]} {self.percentile}"
        where = f"at {self.rate:g} req/s"
        if self.detects_ms is None:
            trials = f"{self.trials} trial{'' if self.trials == 1 else 's'}"
            return f"detects no {name} regression {where} in {trials}"
        return f"detects {name} +{_ms(self.detects_ms)} ms or more {where}"


def guaranteed_trials(budget: SweepBudget, index: int) -> int:
    """The trials level ``index`` gets however the levels before it went: each of them
    undecided to the end, running every extra round the budget let it (each holding the
    later levels' first look, ``gate.budget.held_for_later``). A regression at one level
    must be detected whatever an identical figure at another level did."""
    begun = 0.0
    got = 0
    for level in range(index + 1):
        begun += budget.warmup_seconds
        room = math.floor((budget.deadline - begun) / budget.round_seconds + 1e-9)
        got = min(budget.trials, room)
        if got < budget.trials:
            return max(got, 0) if level == index else 0
        while got < budget.max_trials and extra_round_fits(
            begun + got * budget.round_seconds + budget.later(level),
            budget.round_seconds,
            budget.deadline,
            budget.reserve,
        ):
            got += 1
        begun += got * budget.round_seconds
    return got


def _ms(value: float) -> str:
    """Rounded up (never states more power than computed): to 0.1 ms below 10 ms, to 1 ms
    below 1,000 ms, then to 3 significant digits."""
    if value < 10:
        return f"{math.ceil(value * 10) / 10:g}"
    step = 10 ** max(0, math.floor(math.log10(value)) - 2)
    return f"{math.ceil(value / step) * step:,.0f}"


@dataclass(frozen=True)
class Limited:
    """One limited percentile of one rate level, compared with the twin."""

    metric: LatencyMetric
    percentile: Percentile
    rate: float
    relative_percent: float
    floor_ms: float


def sweep_power(
    figures: Sequence[Limited],
    *,
    budget: SweepBudget,
    rates: Sequence[float],
    plan: TrialPlan,
    confidence: float,
    gaps_per_request: float | None,
    noise: NoiseModel | None = None,
) -> list[Power]:
    """The stated power of each of ``figures`` in a rate sweep of ``rates`` under ``budget``
    (the gate's spec: ``plan_power``; a report's recorded plan: ``bench.report_power``)."""
    model = noise if noise is not None else DEFAULT_NOISE
    out: list[Power] = []
    for figure in figures:
        if figure.rate not in rates:
            continue
        trials = guaranteed_trials(budget, list(rates).index(figure.rate))
        per_trial = Observations(figure.rate * budget.seconds_per_level, gaps_per_request)
        count = per_trial.of(figure.metric)
        fitted = model.at(figure.metric, figure.rate)
        if count is None or fitted is None or trials <= 0:
            continue
        found = figure_power(
            noise=fitted,
            percentile=figure.percentile,
            observations_per_trial=count,
            trials=trials,
            confidence=confidence,
            plan=plan,
            relative_percent=figure.relative_percent,
            floor_ms=figure.floor_ms,
        )
        out.append(Power(figure.metric, figure.percentile, figure.rate, found, trials))
    return out


def plan_power(
    gate: GateSpec, deadline_seconds: float, *, servers: int, noise: NoiseModel | None = None
) -> list[Power]:
    """The stated power of every limited figure of ``gate``'s rate levels, compared with a
    paired baseline (``maxRegressionPercent`` set, two servers); [] when nothing is."""
    slo = gate.thresholds.slo
    load = gate.workload.load
    thresholds = gate.thresholds
    if (
        slo is None
        or slo.is_empty
        or gate.workload.is_study
        or load.mode != "rate"
        or thresholds.max_regression_percent is None
        or servers < 2
    ):
        return []
    synthetic = gate.workload.synthetic
    budget = sweep_budget(gate, deadline_seconds, servers)
    figures = []
    for rate in load.levels:
        at = slo.at(rate)
        for metric, by_p in at.metric_limits().items():
            for p, limit in by_p.items():
                relative, floor = regression_limit(thresholds, limit, metric, at)
                figures.append(Limited(metric, p, rate, relative, floor))
    return sweep_power(
        figures,
        budget=budget,
        rates=load.levels,
        plan=gate_plan(gate, deadline_seconds, servers),
        confidence=thresholds.confidence_percent / 100,
        gaps_per_request=max(synthetic.output_tokens.mean - 1, 0) if synthetic else None,
        noise=noise,
    )
