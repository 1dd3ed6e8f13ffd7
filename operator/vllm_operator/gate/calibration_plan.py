"""Calibration's plan: the trials and level length that fit the deadline, and their floors.

``gate.calibration`` fits each figure's noise; this module searches the plans a gate could
run (``trials`` from 1 to ``maxTrials``, ``secondsPerLevel`` from ``SECONDS_CHOICES``) for the
one with the smallest floors, among those that

- start every level's first look before the bench's deadline (``gate.budget.SweepBudget``,
  two servers: the candidate and its twin), so an A/A gate decides within ``timeoutSeconds``;
- can show every limited percentile met at that look (``gate.decidable.reach``: a p99 needs
  hundreds of requests, ITL counts gaps);
- keep each level's requests within ``MAX_LEVEL_REQUESTS`` and every floor at most 100%;
- last no shorter than the A/A runs' levels (``Shape.shortest_seconds``).

Smaller floors are more power (a floor is the regression the gate forgives), so the search
prefers them, and among equal floors the shorter plan. A metric's floor is the largest its
figures ask for, rounded up to a whole percent: ``regressionFloorPercent`` is per metric.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vllm_operator.api.gate_spec import GateSpec
from vllm_operator.api.summary import TrialPlan
from vllm_operator.api.workload import MAX_LEVEL_REQUESTS, LatencyMetric
from vllm_operator.gate.budget import SweepBudget, reserve_for
from vllm_operator.gate.calibration import CalibrationError, FigureNoise, floor_percent
from vllm_operator.gate.decidable import PER_REQUEST, reach
from vllm_operator.gate.sequential import look_confidence

SECONDS_CHOICES = (10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300)
"""The level lengths the search tries (seconds)."""

SERVERS = 2
"""An A/A gate measures the candidate and its twin."""


@dataclass(frozen=True)
class Shape:
    """What the plan must fit: the sweep's levels, their request rates and the deadline."""

    levels: tuple[float, ...]
    requests_per_second: Mapping[float, float]
    """Requests each level brought per second in the A/A runs."""
    gaps_per_request: float | None
    """Mean inter-token gaps per request (ITL observations); None: ITL not counted."""
    max_trials: int
    confidence: float
    """The gate's confidence (0..1)."""
    deadline_seconds: float
    """The bench's deadline (``render.job.bench_deadline`` of timeoutSeconds)."""
    quality_suite: bool = False
    shortest_seconds: float = 0.0
    """The shortest level to try: the A/A runs' own (below it the 1/sqrt(seconds) rule of
    the within-run noise is least safe: a p99 of 80 requests is nearly their maximum)."""


@dataclass(frozen=True)
class FigurePlan:
    """One figure at the proposed plan and the floor it alone asks for (percent of its limit)."""

    noise: FigureNoise
    floor: float


@dataclass(frozen=True)
class Proposal:
    """The plan and per-metric floors that let an A/A gate pass."""

    trials: int
    seconds_per_level: int
    floors: dict[LatencyMetric, int]
    figures: tuple[FigurePlan, ...]
    look_confidence: float

    def with_floors(self, floors: Mapping[LatencyMetric, int]) -> Proposal:
        """The same plan at other floors."""
        return replace(self, floors=dict(floors))


def propose(noise: Sequence[FigureNoise], shape: Shape) -> Proposal:
    """The plan with the smallest floors that fits ``shape`` (see the module docstring).

    Raises ``CalibrationError`` when no plan fits, saying what to raise."""
    best: tuple[tuple[int, int], Proposal] | None = None
    for seconds in SECONDS_CHOICES:
        if seconds < shape.shortest_seconds:
            continue
        for trials in range(1, shape.max_trials + 1):
            proposal = _at(noise, shape, trials, seconds)
            if proposal is None:
                continue
            score = (sum(proposal.floors.values()), trials * seconds)
            if best is None or score < best[0]:
                best = (score, proposal)
    if best is None:
        raise CalibrationError(
            f"no plan of 1 to {shape.max_trials} trials and secondsPerLevel "
            f"{max(SECONDS_CHOICES[0], shape.shortest_seconds):g} to {SECONDS_CHOICES[-1]} "
            "starts every level before the "
            f"bench's deadline of {shape.deadline_seconds:g} s with every floor at most 100%: "
            "raise --timeout-seconds"
        )
    return best[1]


def _at(noise: Sequence[FigureNoise], shape: Shape, trials: int, seconds: int) -> Proposal | None:
    """The proposal at ``trials`` x ``seconds``, or None when that plan does not fit."""
    if trials > shape.max_trials or not _fits(shape, trials, seconds):
        return None
    plan = TrialPlan(min_trials=trials, max_trials=shape.max_trials)
    at_look = look_confidence(shape.confidence, plan, trials)
    floors: dict[LatencyMetric, float] = {}
    needed: list[tuple[FigureNoise, float]] = []
    for one in noise:
        if not _decidable(one, shape, trials, seconds, at_look):
            return None
        floor = floor_percent(one, trials, seconds, at_look, len(noise))
        needed.append((one, floor))
        metric = one.key.metric
        floors[metric] = max(floors.get(metric, 0.0), floor)
    whole = {m: max(math.ceil(f - 1e-9), 1) for m, f in floors.items()}
    if any(f > 100 for f in whole.values()):
        return None
    figures = tuple(FigurePlan(n, f) for n, f in needed)
    return Proposal(trials, seconds, whole, figures, at_look)


def _fits(shape: Shape, trials: int, seconds: int) -> bool:
    if any(shape.requests_per_second.get(lv, 0.0) * seconds > MAX_LEVEL_REQUESTS
           for lv in shape.levels):  # fmt: skip
        return False
    budget = SweepBudget(
        deadline=shape.deadline_seconds,
        levels=len(shape.levels),
        seconds_per_level=seconds,
        servers=SERVERS,
        trials=trials,
        max_trials=shape.max_trials,
        reserve=reserve_for(shape.quality_suite),
    )
    return budget.most_trials(len(shape.levels) - 1) >= trials


def _decidable(noise: FigureNoise, shape: Shape, trials: int, seconds: int, at_look: float) -> bool:
    per_trial = shape.requests_per_second.get(noise.key.level, 0.0) * seconds
    if noise.key.metric not in PER_REQUEST:
        if shape.gaps_per_request is None:
            return True  # not counted before the run: the bench asks it with what it measured
        per_trial *= shape.gaps_per_request
    return reach(noise.key.percentile, per_trial, trials, at_look).decidable


def patch_of(proposal: Proposal, timeout: int | None = None) -> dict[str, Any]:
    """The merge patch (``kubectl patch --type merge``) that applies ``proposal`` to a
    VLLMDeployment: each metric's own floor in ``slo``, trials, secondsPerLevel."""
    slo = {f"{m}Ms": {"regressionFloorPercent": f} for m, f in sorted(proposal.floors.items())}
    gate: dict[str, Any] = {
        "trials": proposal.trials,
        "workload": {"load": {"secondsPerLevel": proposal.seconds_per_level}},
        "thresholds": {"slo": slo},
    }
    if timeout is not None:
        gate["timeoutSeconds"] = timeout
    return {"spec": {"gate": gate}}


def patched(gate: GateSpec, proposal: Proposal, timeout: int) -> GateSpec:
    """``gate`` with ``proposal``'s patch merged in and ``timeout``, validated (a patch the
    CRD would refuse is a bug, not a proposal)."""
    wire = gate.model_dump(by_alias=True, exclude_none=True)
    merged = _merge(wire, patch_of(proposal)["spec"]["gate"])
    merged["timeoutSeconds"] = timeout
    return GateSpec.model_validate(merged)


def _merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 merge of ``patch`` (no nulls in ours) into ``base``."""
    out = dict(base)
    for key, value in patch.items():
        old = out.get(key)
        out[key] = (
            _merge(old, value) if isinstance(value, dict) and isinstance(old, dict) else value
        )
    return out
