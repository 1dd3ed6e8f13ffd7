"""Tail counts of a load level (``bench.load.tails``), from runs and from a report's samples.

Runs are built the way the load loops leave them (``fold`` moves each stream's chunk times
into the run's gaps), with seeded lognormal TTFT and gaps, so the counts are those the
benchmark would write; the report path (``bench.load.recount``) must count the same from the
run entries the report keeps.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    BenchSummary,
    LoadLevelFigures,
    LoadSweep,
    PairedBaseline,
    Placement,
    RunIdentity,
    TrialPlan,
)
from vllm_operator.api.tail_counts import TailCounts, TailRegression
from vllm_operator.bench import summary as summary_mod
from vllm_operator.bench.load.figures import MAX_SLOW_GAPS, level_figures, run_json, tally
from vllm_operator.bench.load.recount import (
    NO_GAPS,
    ReplayGapTally,
    ReportError,
    RequestGaps,
    recounted,
    run_tally,
)
from vllm_operator.bench.load.send import LoadRecord, LoadRun, fold
from vllm_operator.gate import verdict
from vllm_operator.gate.clustering import tail_clustering
from vllm_operator.gate.sequential import look_confidence
from vllm_operator.gate.slo import judge_slo

LIMITS = {"ttftMs": {"p99": 1000}, "itlMs": {"p99": 100}}
PLAN = TrialPlan(min_trials=3, max_trials=10)
CHUNKS = 32


def make_run(
    seed: int, server: str = "candidate", slow: float = 1.0, n: int = 240, spread: float = 0.5
) -> LoadRun:
    """``n`` streamed requests of 33 chunks: TTFT ~ 80 ms (log sd ``spread``), gaps ~ 7 ms,
    ``slow`` times that."""
    rng = random.Random(seed)
    run = LoadRun(server, 24.0, seed % 10, "rate", 10.0)
    for i in range(n):
        at = i / 24
        rec = LoadRecord(scheduled_at=at, offset=at)
        rec.sent_at = at
        t = at + rng.lognormvariate(-2.5, spread) * slow
        rec.first_token_at = t
        times = [t]
        for _ in range(CHUNKS):
            t += rng.lognormvariate(-5, 0.4) * slow
            times.append(t)
        rec.chunk_times = times
        rec.last_event_at = t
        rec.output_tokens = 33
        run.records.append(rec)
        fold(rec, run)
    return run


def thresholds(**more: Any) -> Thresholds:
    return Thresholds.model_validate({"slo": LIMITS, "maxRegressionPercent": 10, **more})


def figures(cand: list[LoadRun], base: list[LoadRun] | None, t: Thresholds) -> LoadLevelFigures:
    assert t.slo is not None
    return level_figures(
        24.0,
        cand,
        t.slo.at(24.0),
        baseline_runs=base,
        thresholds=t,
        confidence=look_confidence(0.95, PLAN, len(cand)),
    )


def test_itl_is_counted_gap_by_gap_grouped_by_request() -> None:
    run = make_run(1)
    counted = tally(run, "itl")
    assert counted.exceedance(0.0).total == len(run.gaps) == 240 * 32
    groups = counted.groups  # type: ignore[attr-defined]
    assert len(groups) == 240
    first = run.records[0]
    assert (first.gap_start, first.gap_count) == (0, 32)
    assert run.records[1].gap_start == 32
    assert groups[0] == tuple(sorted(g * 1000 for g in run.gaps[:32]))
    ttft = tally(run, "ttft").exceedance(0.0)
    assert ttft.total == 240


def test_a_level_carries_its_counts_and_the_pooled_percentiles() -> None:
    cand = [make_run(i) for i in range(3)]
    t = thresholds()
    fig = figures(cand, None, t)
    assert set(fig.tails) == {"ttft.p99", "itl.p99"}
    ttft = fig.tails["ttft.p99"]
    assert (ttft.limit, ttft.total, ttft.above) == (1000, [240] * 3, [0] * 3)
    assert ttft.regression is None  # no baseline to count against
    itl = fig.tails["itl.p99"]
    assert itl.total == [240 * 32] * 3
    every = sorted(v for r in cand for v in (g * 1000 for g in r.gaps))
    assert fig.pooled["itl.p99"] == pytest.approx(every[int(0.99 * (len(every) - 1))], abs=0.2)


def test_against_the_baseline_identical_servers_pass_and_a_slow_one_fails() -> None:
    t = thresholds()
    # TTFT p99 about 2.3 x its median: a lognormal log sd of 0.35 (an H200 at 24 req/s read
    # p99 / p50 of 3-5, but with a far shorter tail above its p99 than a lognormal's)
    base = [make_run(100 + i, "baseline", n=480, spread=0.35) for i in range(3)]
    same = figures([make_run(i, n=480, spread=0.35) for i in range(3)], base, t)
    slow = figures([make_run(i, slow=3.0, n=480, spread=0.35) for i in range(3)], base, t)
    record = same.tails["ttft.p99"].regression
    assert record is not None
    # the 100 ms floor; each pair's bar is the baseline's 5th slowest of 480 plus 100 ms
    assert (record.relative_percent, record.floor, record.total) == (10, 100, [480] * 3)
    for trial, run in enumerate(base):
        fifth = sorted((r.first_token_at - r.sent_at) * 1000 for r in run.records)[-5]
        assert record.bars[trial] == round(max(fifth * 1.1, fifth + 100), 1)
    slower = slow.tails["ttft.p99"].regression
    assert slower is not None
    assert sum(slower.above) > sum(record.above)
    for fig, expected in ((same, "note"), (slow, "fail")):
        s = BenchSummary(
            load=LoadSweep(mode="rate", levels=[fig]),
            paired_baseline=PairedBaseline(load=LoadSweep(mode="rate", levels=[fig])),
            trial_plan=PLAN,
        )
        found = [
            j.finding
            for j in judge_slo(s, t, None, PLAN)
            if "against the baseline" in j.finding.text and j.finding.text.startswith("ttft")
        ]
        assert [f.severity for f in found] == [expected], [f.text for f in found]


def test_design_effects_are_stored_rounded_up_and_only_when_not_one() -> None:
    run = make_run(3)
    bunched = LoadRun("candidate", 24.0, 0, "rate", 10.0)
    stalled = LoadRecord(scheduled_at=0.0, offset=0.0)
    stalled.sent_at, stalled.first_token_at = 0.0, 0.05
    stalled.chunk_times = [0.05 + 0.5 * k for k in range(33)]  # every gap 500 ms
    stalled.last_event_at, stalled.output_tokens = stalled.chunk_times[-1], 33
    bunched.records.append(stalled)
    fold(stalled, bunched)
    for rec in run.records:
        bunched.records.append(rec)
        bunched.gaps.extend(run.gaps[rec.gap_start : rec.gap_start + rec.gap_count])
        rec.gap_start = len(bunched.gaps) - rec.gap_count
    t = Thresholds.model_validate({"slo": {"itlMs": {"p99": 100}}})
    fig = figures([bunched], None, t)
    effects = fig.tails["itl.p99"].design_effect
    assert effects is not None
    # estimated once over the candidate's tail (gate.clustering), not at the limit: the
    # stalled stream holds the slowest gaps at every share of the grid
    fixed = tail_clustering([tally(bunched, "itl")], 0.01, 4).effects[0]
    assert effects == [math.ceil(fixed * 10) / 10]
    assert effects[0] >= fixed > 10
    assert fig.tails["itl.p99"].across == 1.0  # one trial: nothing across


def test_the_worst_summary_fits_with_every_count_of_the_candidate() -> None:
    keys = ["ttft.p50", "ttft.p99", "itl.p99", "e2e.p99"]

    def counts(key: str, against: bool) -> TailCounts:
        itl = key.startswith("itl")
        record = TailRegression(
            relative_percent=10,
            floor=100,
            top=[3669 if itl else 29] * 10,
            candidate=[1234 if itl else 12] * 10,
            design_effect=[12.37] * 10 if itl else None,
        )
        return TailCounts(
            limit=1000.0,
            total=[183456 if itl else 1440] * 10,
            above=[1234 if itl else 12] * 10,
            design_effect=[12.37] * 10 if itl else None,
            across=123.4,  # the clustering fixed once per run (gate.clustering)
            stray_trial=10,
            regression=record if against else None,
        )

    def level(at: float, against: bool) -> LoadLevelFigures:
        return LoadLevelFigures(
            level=at,
            requests=14400,
            percentiles={k: [1234.5] * 10 for k in keys},
            pooled=dict.fromkeys(keys, 1234.5),
            tails={k: counts(k, against) for k in keys},
            goodput_percent=[99.51] * 10,
            error_percent=[0.25] * 10,
        )

    where = Placement(node="n" * 40, gpu_product="NVIDIA-H200", vllm_version="0.22.0")
    s = BenchSummary(
        model="qwen3-30b-a3b",
        load=LoadSweep(mode="rate", levels=[level(8, True), level(24, True)]),
        paired_baseline=PairedBaseline(
            load=LoadSweep(mode="rate", levels=[level(8, False), level(24, False)]),
            placement=where,
        ),
        placement=where,
        trial_plan=PLAN,
        verdict="Passed",
        reasons=["x" * 200] * 20,
        identity=RunIdentity(job="j" * 63, revision="r" * 63, attempt=10),
    )
    assert summary_mod.size(s) > 4095
    fitted = summary_mod.fit(s)
    assert summary_mod.size(fitted) <= 4095
    assert fitted.load is not None
    assert [lv.tails for lv in fitted.load.levels] == [lv.tails for lv in s.load.levels]  # type: ignore[union-attr]
    assert [lv.pooled for lv in fitted.load.levels] == [dict.fromkeys(keys, 1234.5)] * 2
    assert all(lv.goodput_percent and lv.error_percent for lv in fitted.load.levels)


# -- counted again from a report ---------------------------------------------------------


def report_of(cand: list[LoadRun], base: list[LoadRun], t: Thresholds) -> dict[str, Any]:
    assert t.slo is not None
    runs = [run_json(r, t.slo.at(24.0)) for r in [*cand, *base]]
    return {"load": {"runs": runs}}


def test_a_report_counts_what_the_bench_counted() -> None:
    t = thresholds()
    cand = [make_run(i) for i in range(3)]
    base = [make_run(100 + i, "baseline") for i in range(3)]
    for i, r in enumerate([*cand, *base]):
        r.trial = i % 3
    bench = figures(cand, base, t)
    s = BenchSummary(
        load=LoadSweep(mode="rate", levels=[LoadLevelFigures(level=24.0, requests=720)]),
        paired_baseline=PairedBaseline(
            load=LoadSweep(mode="rate", levels=[LoadLevelFigures(level=24.0, requests=720)])
        ),
        trial_plan=PLAN,
    )
    again = recounted(s, report_of(cand, base, t), t, None)
    assert again.load is not None
    got = again.load.levels[0]
    for key in ("ttft.p99", "itl.p99"):
        # ITL too: the limit and the thresholds lie above the runs' p90 gaps
        ours, theirs = got.tails[key], bench.tails[key]
        assert (ours.limit, ours.total, ours.above) == (theirs.limit, theirs.total, theirs.above)
        assert ours.regression is not None
        assert theirs.regression is not None
        assert ours.regression == theirs.regression
    assert got.goodput_percent == [100.0] * 3
    assert (
        verdict(again, t, None).outcome
        == verdict(
            s.model_copy(update={"load": LoadSweep(mode="rate", levels=[bench])}), t, None
        ).outcome
    )


def test_a_report_without_gap_counts_cannot_decide_itl() -> None:
    run = run_json(make_run(1), None)
    for sample in run["samples"]:
        sample.pop("gaps")
        sample.pop("slow_gaps_ms")
    assert run_tally(run, "itl") == NO_GAPS
    assert run_tally(run, "ttft").exceedance(0).total == 240  # type: ignore[union-attr]
    with pytest.raises(ReportError, match="without samples"):
        run_tally({}, "ttft")


def test_replayed_gaps_below_their_floor_are_bracketed_never_guessed() -> None:
    # 10 gaps, 3 above the floor of 10 ms (two listed, one cut by the cap at 15 ms or less)
    tally_ = ReplayGapTally(10.0, (RequestGaps(10, (15.0, 20.0), 3),))
    exact = tally_.exceedance(15.0)
    assert (exact.above, exact.least) == (1, 1)
    cut = tally_.exceedance(12.0)  # the unlisted one is somewhere in (10, 15]
    assert (cut.above, cut.least) == (3, 2)
    below = tally_.exceedance(5.0)  # the 7 at or below the floor may or may not be above
    assert (below.above, below.least, below.total) == (10, 3, 10)
    at_floor = tally_.exceedance(10.0)
    assert (at_floor.above, at_floor.least) == (3, 3)
    assert list(tally_.points()) == [10.0, 15.0, 20.0]


def test_a_samples_slow_gaps_are_capped_and_counted() -> None:
    run = LoadRun("candidate", 24.0, 0, "rate", 10.0)
    for k in range(10):
        rec = LoadRecord(scheduled_at=0.0, offset=0.0)
        rec.sent_at, rec.first_token_at = 0.0, 0.01
        slow = k == 0
        step = [0.2 if slow and j % 2 else 0.001 for j in range(2 * MAX_SLOW_GAPS + 10)]
        times = [0.01]
        for s in step:
            times.append(times[-1] + s)
        rec.chunk_times, rec.last_event_at, rec.output_tokens = times, times[-1], len(times)
        run.records.append(rec)
        fold(rec, run)
    entry = run_json(run, None)
    first = entry["samples"][0]
    assert first["gaps"] == 2 * MAX_SLOW_GAPS + 10
    assert len(first["slow_gaps_ms"]) == MAX_SLOW_GAPS
    assert first["slow_gaps"] == MAX_SLOW_GAPS + 5
    assert "slow_gaps" not in entry["samples"][1]
    replayed = run_tally(entry, "itl")
    assert not isinstance(replayed, str)
    assert replayed.exceedance(150.0).above == MAX_SLOW_GAPS + 5
