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

import bisect
import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary, LoadLevelFigures, LoadSweep, TrialPlan
from vllm_operator.api.workload import LatencyMetric
from vllm_operator.bench.load.tails import Tallies, level_tails
from vllm_operator.errors import VLLMOperatorError
from vllm_operator.gate.clustering import ClusteringMemo
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

        above: list[tuple[float, int]] = []
        for i, r in enumerate(self.requests):
            smallest = r.slow[0] if r.slow else self.floor
            above.extend((v, i) for v in r.slow)
            above.extend((smallest, i) for _ in range(r.slow_count - len(r.slow)))
        if len(above) >= count:  # the usual case: the floor is the run's p90, far below
            return heapq.nlargest(count, above)
        at_floor = (
            (self.floor, i)
            for i in range(len(self.requests) - 1, -1, -1)
            for _ in range(self.requests[i].count - self.requests[i].slow_count)
        )
        return sorted(above, reverse=True) + list(itertools.islice(at_floor, count - len(above)))


def _at_most(values: Sequence[float], bound: float) -> int:
    """How many of the ascending ``values`` are <= ``bound``."""
    return bisect.bisect_right(values, bound)


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
    return Recount(summary, report).at(thresholds, plan)


class Recount:
    """One report, to be counted at one or many thresholds: each run's tallies are read once,
    and each level's clustering (``gate.clustering``, a property of the run, not of the
    thresholds) is estimated once."""

    def __init__(self, summary: BenchSummary, report: dict[str, Any]) -> None:
        self.summary = summary
        load = report.get("load")
        self.runs: list[dict[str, Any]] | None = None
        if summary.load is not None and isinstance(load, dict):
            runs = load.get("runs")
            if not isinstance(runs, list):
                raise ReportError("load.runs is missing")
            self.runs = [r for r in runs if isinstance(r, dict)]
        self._tallies: dict[tuple[int, str], Tally | str] = {}
        self._clustering = ClusteringMemo()

    def _of(self, server: str, level: float) -> list[dict[str, Any]]:
        assert self.runs is not None
        found = [r for r in self.runs if r.get("server") == server and r.get("level") == level]
        return sorted(found, key=lambda r: int(r.get("trial", 0)))

    def _tallies_of(self, chosen: list[dict[str, Any]]) -> Tallies:
        def get(metric: LatencyMetric) -> Sequence[Tally] | str:
            got = []
            for run in chosen:
                key = (id(run), metric)  # the runs live as long as this object
                if key not in self._tallies:
                    self._tallies[key] = run_tally(run, metric)
                got.append(self._tallies[key])
            why = next((g for g in got if isinstance(g, str)), None)
            return why if why is not None else [g for g in got if not isinstance(g, str)]

        return get

    def at(self, thresholds: Thresholds, plan: TrialPlan | None) -> BenchSummary:
        """The summary with its counts taken at ``thresholds`` (see ``recounted``)."""
        summary = self.summary
        if summary.load is None or self.runs is None:
            return summary
        paired = summary.paired_baseline is not None

        def sweep(sw: LoadSweep, server: str, against: bool) -> LoadSweep:
            levels = [self._level(f, server, against, thresholds) for f in sw.levels]
            return sw.model_copy(update={"levels": levels})

        update: dict[str, Any] = {"load": sweep(summary.load, "candidate", paired)}
        pb = summary.paired_baseline
        if pb is not None and pb.load is not None:
            update["paired_baseline"] = pb.model_copy(
                update={"load": sweep(pb.load, "baseline", False)}
            )
        return summary.model_copy(update=update)

    def _level(
        self, figures: LoadLevelFigures, server: str, against: bool, thresholds: Thresholds
    ) -> LoadLevelFigures:
        ours = self._of(server, figures.level)
        if not ours:
            return figures
        theirs = self._of("baseline", figures.level) if against else []
        slo = thresholds.slo
        limits = slo.at(figures.level) if slo is not None else None
        pooled, tails = level_tails(
            limits,
            self._tallies_of(ours),
            self._tallies_of(theirs) if theirs else None,
            thresholds,
            self._clustering,
        )
        return figures.model_copy(
            update={
                "pooled": pooled,
                "tails": tails,
                "goodput_percent": [_percent(r, "goodput_percent") for r in ours],
                "error_percent": [_percent(r, "error_percent") for r in ours],
            }
        )


def _percent(run: dict[str, Any], name: str) -> float:
    value = run.get(name)
    if not isinstance(value, int | float) or not 0 <= value <= 100:
        raise ReportError(f"a load run's {name} is not a percentage")
    return round(float(value), 2)
