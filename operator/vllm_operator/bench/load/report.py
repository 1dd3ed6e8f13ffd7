"""A load sweep in the summary (``LoadSweep``) and in the report JSON (its ``load`` section).

The summary carries only what the gate judges (the limited percentiles, goodput and error
share per level and trial); the report carries every run's figures and up to
``bench.load.figures.MAX_SAMPLES`` per-request samples (the shape agreed in
ISSUE25_CONTRACT and read by the HTML report).

Failed requests of a level whose SLO sets ``maxErrorPercent`` are judged by that limit
(``gate.slo``) and left out of the summary's error counts; without it they count there like
every other failed request, so one failed request still fails (server fault) or errors
(measurement fault) the gate, as in the study's phases.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from vllm_operator.api.summary import LoadSweep
from vllm_operator.api.workload import SloLimits
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.load.figures import level_figures, run_json
from vllm_operator.bench.run_state import RunState, ServerRun
from vllm_operator.gate.sequential import look_confidence


def slo_at(config: BenchConfig, level: float) -> SloLimits | None:
    """The SLO limits at ``level`` (None: none set)."""
    slo = config.thresholds.slo if config.thresholds else None
    return None if slo is None else slo.at(level)


def sweep_of(
    config: BenchConfig,
    server: ServerRun,
    stopped_at: float | None,
    baseline: ServerRun | None = None,
) -> LoadSweep | None:
    """One server's sweep for the summary: every level asked, in order (None: the study).

    ``baseline``: the paired baseline's runs, counted against (the candidate's side only).
    """
    if config.traffic is None:
        return None
    load = config.workload.load
    thresholds = config.thresholds
    confidence = (thresholds.confidence_percent if thresholds else 95.0) / 100
    levels = []
    for level in load.levels:
        runs = server.load_runs(level)
        levels.append(
            level_figures(
                level,
                runs,
                slo_at(config, level),
                baseline_runs=baseline.load_runs(level) if baseline is not None else None,
                thresholds=thresholds,
                confidence=look_confidence(confidence, config.plan, len(runs)),
            )
        )
    return LoadSweep(mode=load.mode, levels=levels, stopped_at=stopped_at)


def judged_errors(config: BenchConfig, server: ServerRun) -> Counter[str]:
    """Failed requests of ``server``'s measured runs that ``maxErrorPercent`` judges instead."""
    counts: Counter[str] = Counter()
    for run in server.load:
        limits = slo_at(config, run.level)
        if limits is not None and limits.max_error_percent is not None:
            counts.update(r.error for r in run.records if r.error is not None)
    return counts


def counted(errors: Counter[str], judged: Counter[str]) -> dict[str, int]:
    """``errors`` less ``judged``, sorted, without zero counts."""
    left = errors - judged
    return dict(sorted((k, v) for k, v in left.items() if v > 0))


def load_json(
    config: BenchConfig, state: RunState, capacity: float | None
) -> dict[str, Any] | None:
    """The report's ``load`` section (None for the study)."""
    traffic = config.traffic
    if traffic is None:
        return None
    load = config.workload.load
    runs = []
    for server in state.servers:
        for run in server.load:
            runs.append(run_json(run, slo_at(config, run.level)))
    warmup = [
        {k: v for k, v in run_json(run, None).items() if k != "samples"}
        for server in state.servers
        for run in server.load_warmup
    ]
    return {
        "mode": load.mode,
        "workload": traffic.describe(),
        "seed": config.workload.seed,
        "seconds_per_level": load.seconds_per_level,
        "levels_asked": list(load.levels),
        "capacity": capacity,
        "stopped_at": state.load_stopped_at,
        # how paired servers were loaded: absent in reports from before issue 40, whose
        # servers ran one after the other in each round
        **({"pairing": "together"} if state.baseline is not None else {}),
        "warmup": warmup,
        "runs": sorted(runs, key=lambda r: (r["level"], r["trial"], r["server"] != "candidate")),
    }
