"""A load sweep in the summary (``LoadSweep``) and in the report JSON (its ``load`` section).

The summary carries only what the gate judges (the limited percentiles, goodput and error
share per level and trial); the report carries every run's figures and up to
``bench.load_figures.MAX_SAMPLES`` per-request samples (the shape agreed in
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
from vllm_operator.bench.load_figures import level_figures, run_json
from vllm_operator.bench.run_state import RunState, ServerRun


def slo_at(config: BenchConfig, level: float) -> SloLimits | None:
    """The SLO limits at ``level`` (None: none set)."""
    slo = config.thresholds.slo if config.thresholds else None
    return None if slo is None else slo.at(level)


def sweep_of(config: BenchConfig, server: ServerRun, stopped_at: float | None) -> LoadSweep | None:
    """One server's sweep for the summary: every level asked, in order (None: the study)."""
    if config.traffic is None:
        return None
    load = config.workload.load
    return LoadSweep(
        mode=load.mode,
        levels=[
            level_figures(level, server.load_runs(level), slo_at(config, level))
            for level in load.levels
        ],
        stopped_at=stopped_at,
    )


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
        "warmup": warmup,
        "runs": sorted(runs, key=lambda r: (r["level"], r["trial"], r["server"] != "candidate")),
    }
