"""In-cluster calibration's data: a Job's summary -> one run's figures; the runs -> a proposal.

A calibration Job's summary (its termination message) carries, per load level, each trial's
limited percentiles of the stable revision (``load``) and of its twin (``pairedBaseline``).
``run_of`` keeps just those (and each level's request rate) in ``status.calibration.runs``,
so the fit survives the Job's TTL and an operator restart. ``proposal_of`` is the fit and
plan search of ``vllm-operator calibrate`` (``gate.calibration``, ``gate.calibration_plan``)
on those runs, with the power ``gate.power`` states at the patched spec. No replay confirms
it here (a summary cannot be counted again at other floors); the status message says to
confirm with ``vllm-operator calibrate`` on the Jobs' reports. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from vllm_operator.api.calibration import CalibrationProposal, CalibrationRun
from vllm_operator.api.gate_spec import GateSpec
from vllm_operator.api.summary import BenchSummary
from vllm_operator.gate.calibration import FigureKey, PairedTrial, fit_noise, limits_of
from vllm_operator.gate.calibration_plan import Shape, patch_of, patched, propose
from vllm_operator.gate.power import plan_power
from vllm_operator.render.job import bench_deadline


def _name(key: FigureKey) -> str:
    return f"{key.metric}.{key.percentile}@{key.level:g}"


def run_of(summary: BenchSummary, job: str, seconds_per_level: int) -> CalibrationRun | None:
    """The paired per-trial percentiles of ``summary`` (None: no load sweep against a twin)."""
    ours = summary.load
    theirs = summary.paired_baseline.load if summary.paired_baseline is not None else None
    if ours is None or theirs is None:
        return None
    twin_levels = {lv.level: lv for lv in theirs.levels}
    candidate: dict[str, list[float]] = {}
    twin: dict[str, list[float]] = {}
    rates: dict[str, float] = {}
    for level in ours.levels:
        other = twin_levels.get(level.level)
        if other is None:
            continue
        for key, values in level.percentiles.items():
            paired = other.percentiles.get(key, [])
            n = min(len(values), len(paired))
            if n:
                name = f"{key}@{level.level:g}"
                candidate[name], twin[name] = list(values[:n]), list(paired[:n])
        trials = max((len(v) for v in level.percentiles.values()), default=0)
        if trials and level.requests:
            rates[f"{level.level:g}"] = level.requests / trials / seconds_per_level
    return CalibrationRun(job=job, candidate=candidate, twin=twin, rates=rates)


def proposal_of(runs: Sequence[CalibrationRun], gate: GateSpec) -> CalibrationProposal:
    """The floors, plan, power and patch fitted from ``runs`` of ``gate``'s workload.

    Raises ``gate.calibration.CalibrationError`` when they cannot be fitted."""
    assert gate.thresholds.slo is not None  # calibration starts only for an SLO gate
    load = gate.workload.load
    limits = limits_of(gate.thresholds.slo, load.levels)
    trials = [
        PairedTrial(run.job, key, c, t)
        for run in runs
        for key in limits
        for c, t in zip(
            run.candidate.get(_name(key), []), run.twin.get(_name(key), []), strict=False
        )
    ]
    seconds = load.seconds_per_level
    noise = fit_noise(trials, limits, seconds)
    rates: dict[float, list[float]] = {}
    for run in runs:
        for level, rate in run.rates.items():
            rates.setdefault(float(level), []).append(rate)
    synthetic = gate.workload.synthetic
    deadline = bench_deadline(gate.timeout_seconds)
    shape = Shape(
        levels=tuple(sorted({k.level for k in limits})),
        requests_per_second={lv: sum(r) / len(r) for lv, r in rates.items()},
        gaps_per_request=max(synthetic.output_tokens.mean - 1, 0) if synthetic else None,
        max_trials=gate.max_trials,
        confidence=gate.thresholds.confidence_percent / 100,
        deadline_seconds=deadline,
        quality_suite=gate.suite.runs_tests,
        shortest_seconds=seconds,
    )
    proposal = propose(noise, shape)
    power = plan_power(patched(gate, proposal, gate.timeout_seconds), deadline, servers=2)
    return CalibrationProposal(
        trials=proposal.trials,
        seconds_per_level=proposal.seconds_per_level,
        floors=dict(proposal.floors),
        power=[p.message for p in power],
        patch=yaml.safe_dump(patch_of(proposal), sort_keys=False),
    )
