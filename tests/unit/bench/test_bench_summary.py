"""The compact summary always fits a termination message (< 4,096 bytes), deterministically."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    MAX_TRIALS,
    PERCENTILE_KEYS,
    BenchSummary,
    ConcurrencyFigures,
    LatencyFigures,
    LoadLevelFigures,
    LoadSweep,
    PairedBaseline,
    Placement,
    QualityDifferential,
    QualityFigures,
)
from vllm_operator.bench.summary import LIMIT, fit, size, wire
from vllm_operator.gate import ERROR_CLASSES, verdict

names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=300)
ids = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,62}", fullmatch=True)
floats = st.floats(0, 1e9, allow_nan=False)
trials = st.lists(
    st.floats(0, 1e6, allow_nan=False).map(lambda x: round(x, 1)), max_size=MAX_TRIALS
)
label = st.none() | st.text(st.characters(codec="utf-8"), max_size=100)
placement = st.none() | st.builds(Placement, node=label, gpu_product=label, vllm_version=label)

latency = st.fixed_dictionaries(
    {
        "prompt_class": st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True),
        "requests": st.integers(0, 100),
        "median_ms": floats,
        "ttft_ms": floats,
        "output_tokens": floats,
        "e2e_tokens_per_second": floats,
        "decode_tokens_per_second": floats,
        "trials": trials,
    }
).map(lambda kw: LatencyFigures(**kw))
level = st.fixed_dictionaries(
    {
        "concurrency": st.integers(1, 1024),
        "aggregate_tokens_per_second": floats,
        "requests_per_second": floats,
        "requests": st.integers(0, 100_000),
        "trials": trials,
    }
).map(lambda kw: ConcurrencyFigures(**kw))
load_level = st.builds(
    LoadLevelFigures,
    level=st.integers(1, 10_000).map(float),
    requests=st.integers(1, 100_000),
    percentiles=st.dictionaries(st.sampled_from(sorted(PERCENTILE_KEYS)), trials, max_size=16),
    goodput_percent=st.lists(st.floats(0, 100).map(lambda x: round(x, 2)), max_size=MAX_TRIALS),
    error_percent=st.lists(st.floats(0, 100).map(lambda x: round(x, 2)), max_size=MAX_TRIALS),
)
sweeps = st.none() | st.builds(
    LoadSweep,
    mode=st.sampled_from(["rate", "concurrency"]),
    levels=st.lists(load_level, max_size=16, unique_by=lambda x: x.level).map(
        lambda xs: sorted(xs, key=lambda x: x.level)
    ),
)
paired = st.none() | st.builds(
    PairedBaseline,
    placement=placement,
    latency=st.lists(latency, max_size=3, unique_by=attrgetter("prompt_class")),
    concurrency=st.lists(level, max_size=16, unique_by=attrgetter("concurrency")),
    quality=st.none()
    | st.integers(0, 500).flatmap(
        lambda total: st.builds(
            QualityFigures,
            suite=st.just("default"),
            passed=st.integers(0, total),
            total=st.just(total),
        )
    ),
    errors=st.dictionaries(st.sampled_from(sorted(ERROR_CLASSES)), st.integers(0, 10**9)),
    load=sweeps,
)


@st.composite
def differentials(draw: st.DrawFn) -> QualityDifferential:
    """Counts that agree with each other (api.summary_checks refuses the others)."""
    compared = draw(st.integers(0, 500))
    identical = draw(st.integers(0, compared))
    baseline_passed = draw(st.integers(0, compared))
    still_passing = draw(st.integers(0, baseline_passed))
    return QualityDifferential(
        compared=compared,
        identical=identical,
        baseline_passed=baseline_passed,
        still_passing=still_passing,
        differing=draw(st.lists(ids, max_size=min(300, compared - identical))),
        lost=draw(st.lists(ids, max_size=min(300, baseline_passed - still_passing))),
    )


@st.composite
def qualities(draw: st.DrawFn) -> QualityFigures:
    total = draw(st.integers(0, 500))
    passed = draw(st.integers(0, total))
    return QualityFigures(
        suite=draw(st.from_regex(r"[a-z]{1,63}", fullmatch=True)),
        passed=passed,
        total=total,
        failed=draw(st.lists(ids, max_size=min(300, total - passed), unique=True)),
        differential=draw(st.none() | differentials()),
    )


summaries = st.fixed_dictionaries(
    {
        "model": names,
        "latency": st.lists(latency, max_size=3, unique_by=attrgetter("prompt_class")),
        "concurrency": st.lists(level, max_size=16, unique_by=attrgetter("concurrency")),
        "quality": st.none() | qualities(),
        "errors": st.dictionaries(st.sampled_from(sorted(ERROR_CLASSES)), st.integers(0, 10**9)),
        "verdict": st.sampled_from(["Passed", "Failed", "Inconclusive", "Error"]),
        "reasons": st.lists(names, max_size=60),
        "placement": placement,
        "paired_baseline": paired,
        "load": sweeps,
    }
).map(lambda kw: BenchSummary(**_one_kind(kw)))


def _one_kind(kw: dict[str, Any]) -> dict[str, Any]:
    """A run measures the study's shapes or a workload's load sweep, never both."""
    if kw["load"] is None:
        base = kw["paired_baseline"]
        if base is not None:
            kw["paired_baseline"] = base.model_copy(update={"load": None})
        return kw
    base = kw["paired_baseline"]
    if base is not None:
        kw["paired_baseline"] = base.model_copy(update={"latency": [], "concurrency": []})
    return {**kw, "latency": [], "concurrency": []}


@settings(max_examples=60, deadline=None)
@given(summaries)
def test_fitted_summary_is_under_4096_bytes_and_keeps_what_gates(summary: BenchSummary) -> None:
    fitted = fit(summary)
    assert size(fitted) <= LIMIT < 4096
    assert fit(summary) == fitted  # deterministic
    again = BenchSummary.model_validate_json(wire(fitted))
    assert again == fitted
    assert fitted.errors == summary.errors
    assert fitted.verdict == summary.verdict
    assert fitted.placement == summary.placement
    if summary.paired_baseline is not None:
        base = fitted.paired_baseline
        assert base is not None
        assert (base.placement, base.errors) == (
            summary.paired_baseline.placement,
            summary.paired_baseline.errors,
        )
        # a comparison cut away is never silently passed: the gate re-judging the fitted
        # summary finds the figure missing on one side
        lost = [
            kind
            for kind in ("latency", "concurrency")
            if getattr(summary, kind)
            and getattr(summary.paired_baseline, kind)
            and (not getattr(fitted, kind) or not getattr(base, kind))
        ]
        if lost:
            limits = Thresholds(max_regression_percent=10)
            assert verdict(fitted, limits, None).outcome != "Passed", lost
    for figure in [*fitted.latency, *fitted.concurrency]:
        assert len(figure.trials) <= MAX_TRIALS
    if summary.load is not None:
        # levels and their request counts stay; figures cut away are never passed silently
        assert fitted.load is not None
        assert [(x.level, x.requests) for x in fitted.load.levels] == [
            (x.level, x.requests) for x in summary.load.levels
        ]
        cut = [a for a, b in zip(fitted.load.levels, summary.load.levels, strict=True) if a != b]
        if cut:
            every = Thresholds.model_validate({"slo": {"ttftMs": {"p99": 1e6}}})
            assert verdict(fitted, every, None).outcome != "Passed"
    if summary.quality is not None:
        assert fitted.quality is not None
        shown = fitted.quality.failed
        assert shown == summary.quality.failed[: len(shown)]
        assert len(shown) + fitted.quality.failed_omitted == len(summary.quality.failed)
        diff, cut = summary.quality.differential, fitted.quality.differential
        assert (diff is None) == (cut is None)
        if diff is not None and cut is not None:
            # the counts the gate judges are never cut; the ids are cut from the tail
            counts = ("compared", "identical", "baseline_passed", "still_passing")
            assert [getattr(cut, c) for c in counts] == [getattr(diff, c) for c in counts]
            assert cut.differing == diff.differing[: len(cut.differing)]
            assert cut.lost == diff.lost[: len(cut.lost)]
            kept = len(cut.differing) + len(cut.lost)
            assert kept + cut.omitted == len(diff.differing) + len(diff.lost)


def test_small_summary_is_untouched() -> None:
    s = BenchSummary(
        model="m", reasons=["ok"], quality=QualityFigures(suite="d", passed=1, total=1)
    )
    assert fit(s) == s


def test_long_reasons_are_cut_with_a_count() -> None:
    s = BenchSummary(model="m", reasons=[f"reason {i} " + "x" * 150 for i in range(60)])
    fitted = fit(s)
    assert size(fitted) <= LIMIT
    assert fitted.reasons[-1].startswith("+")
    assert fitted.reasons[-1].endswith("more reason(s) in the report")
    assert fitted.reasons[0] == s.reasons[0]


def test_failed_ids_are_cut_after_reasons() -> None:
    failed = [f"test-{i:03d}-" + "y" * 40 for i in range(200)]
    s = BenchSummary(
        model="m", quality=QualityFigures(suite="big", passed=0, total=200, failed=failed)
    )
    fitted = fit(s)
    assert fitted.quality is not None
    assert fitted.quality.failed == failed[: len(fitted.quality.failed)]
    assert fitted.quality.failed_omitted == 200 - len(fitted.quality.failed) > 0


def test_differential_ids_go_before_reasons_and_failed_ids_counts_stay() -> None:
    names = [f"test-{i:03d}-" + "x" * 70 for i in range(60)]  # lost alone overflows
    diff = QualityDifferential(
        compared=60, identical=0, baseline_passed=60, still_passing=0, differing=names, lost=names
    )
    quality = QualityFigures(suite="big", passed=0, total=60, failed=names[:5], differential=diff)
    s = BenchSummary(model="m", quality=quality, reasons=[f"reason {i}" for i in range(5)])
    fitted = fit(s)
    assert size(fitted) <= LIMIT
    assert fitted.reasons == s.reasons  # untouched: the ids went first
    assert fitted.quality is not None
    assert fitted.quality.failed == names[:5]
    cut = fitted.quality.differential
    assert cut is not None
    assert cut.differing == []  # differing goes before lost
    assert cut.lost == names[: len(cut.lost)]
    assert 0 < len(cut.lost) < 60
    assert cut.omitted == 120 - len(cut.lost)
    assert (cut.compared, cut.identical, cut.baseline_passed, cut.still_passing) == (60, 0, 60, 0)
