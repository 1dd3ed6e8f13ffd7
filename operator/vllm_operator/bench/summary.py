"""The compact summary: the figures a gate needs, always under 4,096 bytes.

Kubernetes keeps at most 4,096 bytes of a container's termination message; a longer one is
cut mid-JSON and the operator would read garbage. So the summary is built small (rounded
figures, per-trial figures but no per-request data) and then fitted: if it is still too
large, it drops, in this order and deterministically, the tail of the quality
differential's ``differing`` ids and then of its ``lost`` ids (counted in ``omitted``; its
counts stay, so the gate judges it the same, and the reasons name the first ids), the tail
of ``reasons`` (leaving a "+N more" line), the tail of ``quality.failed`` (must-pass ids
are listed first and counted in ``failedOmitted``), then the reasons and the failed list
entirely, then the concurrency
and latency figures (the baseline's first; the gate calls a comparison with one side
missing Inconclusive, so a cut never passes silently), then of a load sweep the paired
baseline's per-trial percentiles and counts, the candidate's per-trial percentiles (its
pooled ones and its counts, what the gate judges, stay), then the levels emptied from
the highest down, every level of the baseline's (then its whole sweep) before any of the
candidate's (the level and its request count stay, and the gate calls a limit without
figures Inconclusive). Error counts,
placements and the verdict are never dropped.

The per-trial figures are what the gate's interval is computed from (``gate.regression``):
the operator re-judges the summary from them instead of trusting the benchmark's verdict.
"""

from __future__ import annotations

import json
import statistics

from vllm_operator.api.summary import (
    BenchSummary,
    ConcurrencyFigures,
    LatencyFigures,
    LoadLevelFigures,
    LoadSweep,
    QualityDifferential,
    QualityFigures,
)
from vllm_operator.bench.http.request import RequestRecord
from vllm_operator.bench.quality.run import SuiteOutcome, differential
from vllm_operator.bench.stats import decode_rate, level_figures

LIMIT = 4095
"""Bytes of the wire JSON (strictly below Kubernetes' 4,096)."""

MAX_REASON = 200
MAX_MODEL = 200


def _median(values: list[float], digits: int = 2) -> float:
    return round(statistics.median(values), digits) if values else 0.0


def latency_figures(name: str, trials: list[list[RequestRecord]]) -> LatencyFigures:
    """Medians over every trial's requests, plus each trial's own median latency."""
    done = [r for records in trials for r in records if r.ok]
    per_trial = [[r.e2e * 1000 for r in records if r.ok] for records in trials]
    return LatencyFigures(
        prompt_class=name,
        requests=len(done),
        median_ms=_median([r.e2e * 1000 for r in done]),
        ttft_ms=_median([r.ttft * 1000 for r in done]),
        output_tokens=_median([float(r.output_tokens) for r in done]),
        e2e_tokens_per_second=_median([t for r in done if (t := r.e2e_tps) is not None]),
        decode_tokens_per_second=_median([t for r in done if (t := decode_rate(r)) is not None]),
        trials=[_median(ms, 1) for ms in per_trial if ms],
    )


def concurrency_figures(level: int, trials: list[list[list[RequestRecord]]]) -> ConcurrencyFigures:
    """Median over trials of each trial's steady-window figures, and the trials themselves."""
    figures = [level_figures(level, streams) for streams in trials]
    return ConcurrencyFigures(
        concurrency=level,
        aggregate_tokens_per_second=_median([f.aggregate_tps for f in figures]),
        requests_per_second=_median([f.requests_per_second for f in figures], 3),
        requests=sum(f.completed for f in figures),
        trials=[round(f.aggregate_tps, 1) for f in figures],
    )


def quality_figures(
    outcome: SuiteOutcome, must_pass: tuple[str, ...], baseline: SuiteOutcome | None = None
) -> QualityFigures:
    """The suite's counts; with the paired ``baseline``'s run, the differential too."""
    compared = None if baseline is None else differential(outcome, baseline)
    return QualityFigures(
        suite=outcome.suite.name,
        passed=outcome.passed,
        total=len(outcome.suite.tests),
        failed=outcome.failed_ids(must_pass),
        differential=(
            None
            if compared is None
            else QualityDifferential(
                compared=compared.compared,
                identical=compared.identical,
                baseline_passed=compared.baseline_passed,
                still_passing=compared.still_passing,
                differing=compared.differing,
                lost=compared.lost,
            )
        ),
    )


def size(summary: BenchSummary) -> int:
    """Bytes of the summary's compact wire JSON."""
    return len(wire(summary).encode("utf-8"))


def wire(summary: BenchSummary) -> str:
    return json.dumps(summary.to_wire(), separators=(",", ":"), ensure_ascii=False)


def fit(summary: BenchSummary, limit: int = LIMIT) -> BenchSummary:
    """``summary`` cut down (see module docstring) until its wire JSON is <= ``limit`` bytes."""
    s = summary.model_copy(
        update={
            "model": _cut(summary.model, MAX_MODEL),
            "reasons": [_cut(r, MAX_REASON) for r in summary.reasons],
        }
    )
    if size(s) <= limit:
        return s
    if s.quality is not None and s.quality.differential is not None:
        s = _fit_differential(s, limit)
        if size(s) <= limit:
            return s
    reasons = s.reasons
    for keep in range(len(reasons) - 1, -1, -1):
        more = [f"+{len(reasons) - keep} more reason(s) in the report"]
        s = s.model_copy(update={"reasons": reasons[:keep] + more})
        if size(s) <= limit:
            return s
    s = s.model_copy(update={"reasons": []})
    if s.quality is not None and size(s) > limit:
        quality = s.quality
        failed = quality.failed
        for keep in range(len(failed) - 1, -1, -1):
            cut = quality.model_copy(
                update={
                    "failed": failed[:keep],
                    "failed_omitted": quality.failed_omitted + len(failed) - keep,
                }
            )
            s = s.model_copy(update={"quality": cut})
            if size(s) <= limit:
                return s
    for dropped in ("concurrency", "latency"):
        if size(s) <= limit:
            return s
        if s.paired_baseline is not None:
            base = s.paired_baseline.model_copy(update={dropped: []})
            s = s.model_copy(update={"paired_baseline": base})
            if size(s) <= limit:
                return s
        s = s.model_copy(update={dropped: []})
    s = _fit_load(s, limit)
    if size(s) > limit:
        s = s.model_copy(update={"model": _cut(s.model, 32)})
    return s


def _fit_differential(s: BenchSummary, limit: int) -> BenchSummary:
    """``s`` with ids cut from the end of ``differing``, then of ``lost`` (counted)."""
    assert s.quality is not None
    assert s.quality.differential is not None
    quality, diff = s.quality, s.quality.differential
    total = len(diff.differing) + len(diff.lost)

    def with_ids(differing: list[str], lost: list[str]) -> BenchSummary:
        omitted = diff.omitted + total - len(differing) - len(lost)
        cut = diff.model_copy(update={"differing": differing, "lost": lost, "omitted": omitted})
        return s.model_copy(update={"quality": quality.model_copy(update={"differential": cut})})

    # ids past ``limit`` bytes cannot fit: never try them one by one (a suite has no size cap)
    differing, lost = _prefix_within(diff.differing, limit), _prefix_within(diff.lost, limit)
    for keep in range(len(differing), -1, -1):
        fitted = with_ids(differing[:keep], lost)
        if size(fitted) <= limit:
            return fitted
    for keep in range(len(lost) - 1, -1, -1):
        fitted = with_ids([], lost[:keep])
        if size(fitted) <= limit:
            return fitted
    return fitted


def _prefix_within(ids: list[str], limit: int) -> list[str]:
    """The longest prefix of ``ids`` whose JSON strings take at most ``limit`` bytes."""
    used = 0
    for n, item in enumerate(ids):
        used += len(json.dumps(item, ensure_ascii=False).encode("utf-8")) + 1
        if used > limit:
            return ids[:n]
    return ids


def _fit_load(s: BenchSummary, limit: int) -> BenchSummary:
    """Cut a load sweep until the summary fits: the paired baseline's per-trial percentiles,
    then its counts (the gate judges the candidate's counts, which carry their comparison
    with the baseline), then the candidate's per-trial percentiles (the pooled ones stay for
    people), then levels emptied from the highest down, every one of the baseline's (then its
    sweep) before any of the candidate's."""
    for side, field in (("baseline", "percentiles"), ("baseline", "tails"),
                        ("candidate", "percentiles")):  # fmt: skip
        if size(s) <= limit:
            return s
        s = _without(s, side, field)
    pb = s.paired_baseline
    if pb is not None and pb.load is not None:
        for index in range(len(pb.load.levels) - 1, -1, -1):
            if size(s) <= limit:
                return s
            pb = s.paired_baseline
            assert pb is not None
            assert pb.load is not None
            emptied = pb.model_copy(update={"load": _emptied(pb.load, index)})
            s = s.model_copy(update={"paired_baseline": emptied})
        if size(s) <= limit:
            return s
        # the candidate's counts carry the comparison: the baseline's sweep is not needed
        s = s.model_copy(update={"paired_baseline": pb.model_copy(update={"load": None})})
    if s.load is not None:
        for index in range(len(s.load.levels) - 1, -1, -1):
            if size(s) <= limit:
                return s
            s = s.model_copy(update={"load": _emptied(s.load, index)})
    return s


def _without(s: BenchSummary, side: str, field: str) -> BenchSummary:
    """``s`` with ``field`` of every level of one side's sweep emptied."""

    def cut(sweep: LoadSweep) -> LoadSweep:
        levels = [lv.model_copy(update={field: {}}) for lv in sweep.levels]
        return sweep.model_copy(update={"levels": levels})

    if side == "candidate":
        return s if s.load is None else s.model_copy(update={"load": cut(s.load)})
    pb = s.paired_baseline
    if pb is None or pb.load is None:
        return s
    return s.model_copy(update={"paired_baseline": pb.model_copy(update={"load": cut(pb.load)})})


def _emptied(sweep: LoadSweep, index: int) -> LoadSweep:
    levels = list(sweep.levels)
    levels[index] = LoadLevelFigures(level=levels[index].level, requests=levels[index].requests)
    return sweep.model_copy(update={"levels": levels})


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
