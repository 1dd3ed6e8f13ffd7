"""The SLO verdict moves one way with its limits (issue 40), on every recorded SLO report.

Loosening any limit, floor or allowance never turns Passed into Inconclusive or Failed, or
Inconclusive into Failed; tightening never the reverse. Before the clustering was fixed per
run (``gate.clustering``), the H100 aa2 report was Passed at a floor of 10%, Inconclusive at
15% and Passed at 20%: the design effects were estimated at the bar being judged.

The reports are judged as ``vllm-operator judge --report`` judges them (``recounted``, then
``verdict``), each once per threshold; every pair of thresholds along a chain of loosening
steps is a comparable pair, so a chain of N judgements gives N (N - 1) / 2 pairs.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary
from vllm_operator.bench.load.recount import Recount
from vllm_operator.gate.verdict import verdict

ROOT = Path(__file__).resolve().parents[3]
CALIBRATION = ROOT / "docs" / "calibration"
REPORTS = [
    "h100-2026-12-07/report-aa1.json.gz",
    "h100-2026-12-07/report-aa2.json.gz",
    "h200-slo-bars-2026-12-02/report-aa1.json.gz",
    "h200-slo-bars-2026-12-02/report-aa2.json.gz",
    "h200-slo-bars-2026-12-02/report-r4.json.gz",
    "h200-slo-tails-2026-12-02/report-aa1.json.gz",
    "h200-slo-tails-2026-12-02/report-aa2.json.gz",
    # the shared h200-2026-12-02/report-slo-aa.json.gz, byte for byte
    "h200-tails-2026-12-02/report-slo-aa.json.gz",
    "h200-slo-2026-12-01/report-aa-slo.json.gz",
    "h200-slo-2026-12-01/report-aa-warm.json.gz",
    "h200-slo-2026-12-01/report-reg-slo.json.gz",
]
RANK = {"Failed": 0, "Inconclusive": 1, "Passed": 2}
CHAIN = 44
"""Judgements per report: 44 * 43 / 2 = 946 comparable pairs, 10,406 over the 11 reports."""


def base(floor_percent: float = 10) -> dict[str, Any]:
    """The limits of the recorded gates (gpu-slo-aa.yaml), with a floor."""
    return {
        "maxRegressionPercent": 10,
        "slo": {
            "ttftMs": {"p99": 1000},
            "itlMs": {"p99": 100},
            "minGoodputPercent": 90,
            "maxErrorPercent": 1,
            "regressionFloorPercent": floor_percent,
        },
    }


def load(name: str) -> Recount:
    """A recorded report, read once and counted at every threshold asked (as ``judge
    --report`` counts it, ``recounted``)."""
    data = json.loads(gzip.decompress((CALIBRATION / name).read_bytes()))
    return Recount(BenchSummary.model_validate(data["summary"]), data)


def judged(report: Recount, thresholds: dict[str, Any]) -> str:
    limits = Thresholds.model_validate(thresholds)
    return verdict(report.at(limits, None), limits, None, require_paired=False, plan=None).outcome


# Each knob: where it sits, its tightest value, a step, and which way is looser (+1: up).
KNOBS: list[tuple[tuple[str, ...], float, float, int]] = [
    (("maxRegressionPercent",), 0.0, 4.0, 1),
    (("regressionFloorMs",), 0.0, 5.0, 1),
    (("slo", "regressionFloorPercent"), 0.0, 4.0, 1),
    (("slo", "ttftMs", "regressionFloorPercent"), 0.0, 4.0, 1),
    (("slo", "itlMs", "regressionFloorPercent"), 0.0, 6.0, 1),
    (("slo", "ttftMs", "p99"), 100.0, 150.0, 1),
    (("slo", "itlMs", "p99"), 20.0, 10.0, 1),
    (("slo", "minGoodputPercent"), 100.0, 2.0, -1),
    (("slo", "maxErrorPercent"), 0.0, 0.5, 1),
]


OWN_FLOORS = {("ttftMs", "regressionFloorPercent"), ("itlMs", "regressionFloorPercent")}


def _set(doc: dict[str, Any], path: tuple[str, ...], value: float) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def chain(
    rng: random.Random, length: int, knobs: list[tuple[tuple[str, ...], float, float, int]]
) -> Iterator[dict[str, Any]]:
    """Thresholds, each looser than the one before in one to three knobs, none tighter (a
    metric's own floor and the shorthand both, though the metric's wins)."""
    values = [tight + sign * rng.uniform(0, 2 * step) for _, tight, step, sign in knobs]
    for _ in range(length):
        doc = base()
        for (path, *_), value in zip(knobs, values, strict=True):
            _set(doc, path, round(min(max(value, 0.0), 100.0) if "Percent" in path[-1]
                                  else value, 3))  # fmt: skip
        yield doc
        for k in rng.sample(range(len(knobs)), rng.randint(1, 3)):
            _, _, step, sign = knobs[k]
            values[k] += sign * rng.uniform(0, step)


def test_no_recorded_report_gets_a_worse_verdict_from_looser_limits() -> None:
    rng = random.Random(40)
    pairs = 0
    violations: list[str] = []
    for n, name in enumerate(REPORTS):
        report = load(name)
        # every other report without the metrics' own floors: the shorthand's turn
        knobs = (
            KNOBS
            if n % 2
            else [k for k in KNOBS if k[0][-1] != "regressionFloorPercent" or len(k[0]) < 3]
        )
        outcomes = [(doc, judged(report, doc)) for doc in chain(rng, CHAIN, knobs)]
        for i, (tight, before) in enumerate(outcomes):
            for loose, after in outcomes[i + 1 :]:
                pairs += 1
                if RANK[after] < RANK[before]:
                    violations.append(f"{name}: {before} at {tight}, {after} at {loose}")
    assert pairs >= 10_000
    assert not violations, violations[:5]


def test_the_h100_aa2_report_never_gets_worse_as_the_floor_rises() -> None:
    # issue 40's worked example: Passed at 10, Inconclusive at 15, Passed at 20 before
    report = load("h100-2026-12-07/report-aa2.json.gz")
    floors = [10, 12.5, 15, 17.5, 20, 25, 30, 40]
    outcomes = [judged(report, base(f)) for f in floors]
    assert [RANK[o] for o in outcomes] == sorted(RANK[o] for o in outcomes), outcomes
    assert all(o == "Passed" for f, o in zip(floors, outcomes, strict=True) if f >= 20), outcomes
