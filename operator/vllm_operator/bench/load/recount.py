"""Counting a full report again: the tail counts of its summary, from its samples.

``vllm-operator judge --report`` re-judges a run with limits other than the ones it was
measured with (another SLO limit, regression limit, trial plan or confidence). The summary's
counts were taken at the bench's limits and cannot answer for others, but the report keeps
every run's samples (up to ``bench.load.figures.MAX_SAMPLES`` per run, evenly thinned
beyond), so the counts are taken again from them through the same ``bench.load.tails``:

- TTFT, TPOT and E2E: the samples' values (ms, to 0.001), one per completed request;
- ITL: each sample's gap count and its gaps above its run's p90 gap (``gap_floor_ms``),
  largest first, capped (``bench.load.figures.slow_gaps``). Above a bound at or above the
  floor, a request's gaps above it are known exactly (unless the cap cut its list below the
  bound); below it, only between "the listed ones" and "all of them".
  ``ReplayGapTally`` reports both (``gate.tails.Exceedance.surely_above``), so such a bound can
  make the judge undecided, never wrong. A report written before gap counts has no ITL to
  count: its ITL limits are "not decidable from this report (no gap counts)".

Goodput and error shares are the runs' own (they were computed at the bench's limits).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary, LoadLevelFigures, LoadSweep, TrialPlan
from vllm_operator.api.workload import LatencyMetric
from vllm_operator.bench.load.tails import level_tails
from vllm_operator.errors import VLLMOperatorError
from vllm_operator.gate.tails import Exceedance, gap_design_effect
from vllm_operator.gate.tallies import SampleTally, Tally

NO_GAPS = "not decidable from this report (no gap counts: written before they were kept)"


class ReportError(VLLMOperatorError, ValueError):
    """The report's load section is not what this version wrote."""


@dataclass(frozen=True)
class RequestGaps:
    """One request's gaps as a report keeps them."""

    count: int
    slow: tuple[float, ...]
    """Its largest gaps above the floor (ms), sorted ascending."""
    slow_count: int
    """Its gaps above the floor (>= ``len(slow)`` when the list was capped)."""


@dataclass(frozen=True)
class ReplayGapTally:
    """A run's gaps, grouped by request, known exactly above ``floor`` only."""

    floor: float
    requests: tuple[RequestGaps, ...]

    def exceedance(self, bound: float) -> Exceedance:
        most: list[tuple[int, int]] = []
        least = 0
        for r in self.requests:
            listed = len(r.slow) - _at_most(r.slow, bound)
            unlisted = r.slow_count - len(r.slow)  # in (floor, min(slow)]
            rest = r.count - r.slow_count  # at or below the floor
            smallest = r.slow[0] if r.slow else math.inf
            top = (
                listed + (unlisted if bound < smallest else 0) + (rest if bound < self.floor else 0)
            )
            most.append((top, r.count))
            least += listed + (unlisted if bound <= self.floor else 0)
        above = float(sum(a for a, _ in most))
        total = float(sum(n for _, n in most))
        return Exceedance(above, total, float(least), gap_design_effect(most))

    def points(self) -> Sequence[float]:
        return sorted({self.floor, *(v for r in self.requests for v in r.slow)})

    def slowest(self, count: int) -> list[tuple[float, int]]:
        """The ``count`` slowest gaps for ``gate.pair_tails``, each with its request: the
        listed slow ones as they are, those past a request's list at its smallest listed,
        the rest at ``floor`` (the run's p90 gap). A pair's slowest share for p99 lies above
        both runs' p90, where the values are exact unless a request's list was capped."""

        def every() -> Iterator[tuple[float, int]]:
            for i, r in enumerate(self.requests):
                smallest = r.slow[0] if r.slow else self.floor
                yield from ((v, i) for v in r.slow)
                yield from ((smallest, i) for _ in range(r.slow_count - len(r.slow)))
                yield from ((self.floor, i) for _ in range(r.count - r.slow_count))

        return heapq.nlargest(count, every())


def _at_most(values: Sequence[float], bound: float) -> int:
    return sum(1 for v in values if v <= bound)


def run_tally(run: dict[str, Any], metric: LatencyMetric) -> Tally | str:
    """One report run's observations of ``metric``, or why they cannot be had."""
    samples = run.get("samples")
    if not isinstance(samples, list):
        raise ReportError("a load run without samples")
    if metric != "itl":
        values = [s.get(f"{metric}_ms") for s in samples if isinstance(s, dict)]
        return SampleTally.of([float(v) for v in values if isinstance(v, int | float)])
    floor = run.get("gap_floor_ms")
    requests = []
    for s in samples:
        if not isinstance(s, dict) or not s.get("ok"):
            continue
        if "gaps" not in s:
            if s.get("itl_ms") is not None:
                return NO_GAPS  # a completed stream whose gaps were not kept
            continue
        slow = tuple(sorted(float(v) for v in s.get("slow_gaps_ms", [])))
        count = int(s["gaps"])
        slow_count = int(s.get("slow_gaps", len(slow)))
        if not 0 <= len(slow) <= slow_count <= count:
            raise ReportError("a sample's gap counts do not add up")
        requests.append(RequestGaps(count, slow, slow_count))
    if requests and not isinstance(floor, int | float):
        raise ReportError("a load run with gap counts but no gap_floor_ms")
    return ReplayGapTally(float(floor) if isinstance(floor, int | float) else 0.0, tuple(requests))


def recounted(
    summary: BenchSummary, report: dict[str, Any], thresholds: Thresholds, plan: TrialPlan | None
) -> BenchSummary:
    """``summary`` (the report's own) with every level's counts taken again from the
    report's samples at ``thresholds``, the looks of ``plan`` (None: the summary's)."""
    load = report.get("load")
    if summary.load is None or not isinstance(load, dict):
        return summary
    runs = load.get("runs")
    if not isinstance(runs, list):
        raise ReportError("load.runs is missing")
    plan = plan if plan is not None else summary.trial_plan
    slo = thresholds.slo
    paired = summary.paired_baseline is not None

    def of(server: str, level: float) -> list[dict[str, Any]]:
        found = [r for r in runs if isinstance(r, dict) and r.get("server") == server
                 and r.get("level") == level]  # fmt: skip
        return sorted(found, key=lambda r: int(r.get("trial", 0)))

    def tallies(chosen: list[dict[str, Any]]) -> Any:
        def get(metric: LatencyMetric) -> Sequence[Tally] | str:
            got = [run_tally(r, metric) for r in chosen]
            why = next((g for g in got if isinstance(g, str)), None)
            return why if why is not None else [g for g in got if not isinstance(g, str)]

        return get

    def level(figures: LoadLevelFigures, server: str, against: bool) -> LoadLevelFigures:
        ours = of(server, figures.level)
        if not ours:
            return figures
        theirs = of("baseline", figures.level) if against else []
        limits = slo.at(figures.level) if slo is not None else None
        pooled, tails = level_tails(
            limits,
            tallies(ours),
            tallies(theirs) if theirs else None,
            thresholds,
        )
        return figures.model_copy(
            update={
                "pooled": pooled,
                "tails": tails,
                "goodput_percent": [_percent(r, "goodput_percent") for r in ours],
                "error_percent": [_percent(r, "error_percent") for r in ours],
            }
        )

    def sweep(sw: LoadSweep, server: str, against: bool) -> LoadSweep:
        return sw.model_copy(update={"levels": [level(f, server, against) for f in sw.levels]})

    update: dict[str, Any] = {"load": sweep(summary.load, "candidate", paired)}
    pb = summary.paired_baseline
    if pb is not None and pb.load is not None:
        update["paired_baseline"] = pb.model_copy(
            update={"load": sweep(pb.load, "baseline", False)}
        )
    return summary.model_copy(update=update)


def _percent(run: dict[str, Any], name: str) -> float:
    value = run.get(name)
    if not isinstance(value, int | float) or not 0 <= value <= 100:
        raise ReportError(f"a load run's {name} is not a percentage")
    return round(float(value), 2)
