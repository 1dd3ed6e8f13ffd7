"""The stated power beside a report's SLO figures: what its plan could detect. Pure.

``gate.power`` states, for a gate's spec, the smallest regression of each limited figure
compared with the twin that the plan fails with 95% probability. A report records the same
plan (the deadline, trials, the load's rates and length, the twin, the quality suite) and,
in its summary, each compared figure's bar (``relativePercent`` and ``floor``), so the
statement can be read back beside the figures it concerns: "TTFT p99 at 24 req/s ...
(detects +156 ms or more)". Reports are hostile input (``vllm-operator report`` draws any
file): anything missing or of the wrong type gives no statement, never an exception.
The confidence is not recorded in a report; the gate's default 95% is used unless given.
The plan is cut to the trials the recorded deadline can give a level, as the bench and the
operator cut it (``gate.budget.reachable_plan``); a report written before the cut states
what its plan detects as the gate runs it now.
"""

from __future__ import annotations

from typing import Any

from vllm_operator.api.workload import LatencyMetric, Percentile
from vllm_operator.gate.budget import SweepBudget, reachable_plan, reserve_for
from vllm_operator.gate.power import Limited, Power, sweep_power

METRICS: tuple[LatencyMetric, ...] = ("ttft", "itl", "tpot", "e2e")
PERCENTILES: tuple[Percentile, ...] = ("p50", "p90", "p95", "p99")
MAX_LEVELS = 64


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def report_power(data: object, confidence: float = 0.95) -> list[Power]:
    """The stated power of each figure a report's summary compared with the twin."""
    if not isinstance(data, dict):
        return []
    config, load, summary = data.get("config"), data.get("load"), data.get("summary")
    if not (isinstance(config, dict) and isinstance(load, dict) and isinstance(summary, dict)):
        return []
    if load.get("mode") != "rate" or not config.get("baseline_url"):
        return []
    deadline = _number(config.get("deadline_seconds"))
    seconds = _number(load.get("seconds_per_level"))
    trials, most = config.get("trials"), config.get("max_trials") or config.get("trials")
    rates = load.get("levels_asked")
    if deadline is None or seconds is None or seconds <= 0 or not isinstance(rates, list):
        return []
    if not (isinstance(trials, int) and isinstance(most, int) and 1 <= trials <= most <= 10):
        return []
    levels = [r for r in (_number(v) for v in rates[:MAX_LEVELS]) if r is not None and r > 0]
    figures = _limited(summary, levels)
    if not figures:
        return []
    workload = load.get("workload")
    tokens = workload.get("output_tokens") if isinstance(workload, dict) else None
    mean = _number(tokens.get("mean")) if isinstance(tokens, dict) else None
    budget = SweepBudget(
        deadline=deadline,
        levels=len(levels),
        seconds_per_level=seconds,
        servers=2,
        trials=trials,
        max_trials=most,
        reserve=reserve_for(config.get("suite") not in {None, "builtin:none"}),
    )
    return sweep_power(
        figures,
        budget=budget,
        rates=levels,
        plan=reachable_plan(budget),
        confidence=confidence,
        gaps_per_request=max(mean - 1, 0) if mean is not None else None,
    )


def _limited(summary: dict[str, Any], levels: list[float]) -> list[Limited]:
    sweep = summary.get("load")
    found = sweep.get("levels") if isinstance(sweep, dict) else None
    if not isinstance(found, list):
        return []
    out: list[Limited] = []
    for level in found[:MAX_LEVELS]:
        rate = _number(level.get("level")) if isinstance(level, dict) else None
        tails = level.get("tails") if isinstance(level, dict) else None
        if rate not in levels or not isinstance(tails, dict):
            continue
        assert rate is not None
        for metric in METRICS:
            for p in PERCENTILES:
                counts = tails.get(f"{metric}.{p}")
                bar = counts.get("regression") if isinstance(counts, dict) else None
                if not isinstance(bar, dict):
                    continue
                relative, floor = _number(bar.get("relativePercent")), _number(bar.get("floor"))
                if relative is not None and floor is not None:
                    out.append(Limited(metric, p, rate, relative, floor))
    return out


def power_lines(data: object, confidence: float = 0.95) -> list[str]:
    """The statements as the text and HTML reports show them, one per compared figure."""
    found = report_power(data, confidence)
    if not found:
        return []
    head = (
        "what this plan detects with 95% probability (a candidate that much slower than the "
        "twin fails the gate; noise model of the GPU runs, gate/power_noise.py):"
    )
    return [head, *(p.message for p in found)]
