"""Every rule of the gate, one branch per test, on hand-made summaries."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    BenchSummary,
    ConcurrencyFigures,
    LatencyFigures,
    QualityFigures,
)
from vllm_operator.gate import ERROR_CLASSES, MIN_LATENCY_SAMPLES, kind_of, verdict

# The published study's figures (shared/docs/published-study.md), as summaries.
STUDY = {
    "0.16-eager": ((471, 4602, 29130), (22.4, 44.7, 86.9, 167.3)),
    "0.17-eager": ((454, 5151, 30605), (21.0, 35.4, 69.2, 137.9)),
    "0.17-throughput": ((280, 886, 4817), (97.2, 193.3, 374.9, 714.3)),
}


def summary(
    latency: tuple[float, ...] = (471, 4602, 29130),
    agg: tuple[float, ...] = (22.4, 44.7, 86.9, 167.3),
    *,
    passed: int = 12,
    failed: tuple[str, ...] = ("multi-step-reason-1",),
    requests: int = 5,
    errors: dict[str, int] | None = None,
    **extra: Any,
) -> BenchSummary:
    return BenchSummary(
        model="m",
        latency=[
            LatencyFigures(
                prompt_class=name,
                requests=requests,
                median_ms=ms,
                ttft_ms=10,
                output_tokens=2,
                e2e_tokens_per_second=1,
                decode_tokens_per_second=1,
            )
            for name, ms in zip(("short", "medium", "long"), latency, strict=False)
        ],
        concurrency=[
            ConcurrencyFigures(
                concurrency=c, aggregate_tokens_per_second=a, requests_per_second=1, requests=3 * c
            )
            for c, a in zip((1, 2, 4, 8), agg, strict=False)
        ],
        quality=QualityFigures(
            suite="default", passed=passed, total=13, failed=list(failed)[: 13 - passed]
        ),
        errors=errors or {},
        **extra,
    )


def limits(**wire: Any) -> Thresholds:
    return Thresholds.model_validate(wire)


def test_no_limits_no_baseline_passes() -> None:
    result = verdict(summary(), Thresholds(), None)
    assert result.outcome == "Passed"
    assert result.reasons == ["every measured figure is within its limits"]


def test_study_gate_rejects_017_eager_against_016_eager() -> None:
    base = summary(*STUDY["0.16-eager"])
    cand = summary(*STUDY["0.17-eager"])
    result = verdict(cand, limits(maxRegressionPercent=10), base)
    assert result.outcome == "Failed"
    text = "\n".join(result.reasons)
    # one figure per side (no trials): a point comparison, said so
    assert (
        "medium prompts, median latency: 5,151 ms, +11.9% vs baseline 4,602 ms (one trial "
        "each: no interval, a point comparison), limit +10%: regression beyond the limit"
    ) in text
    assert "2 streams: 35.4 tok/s, -20.8% vs baseline 44.7 tok/s" in text
    # the figures that did not decide: in a few words, after the deciding ones
    assert result.deciding == 4  # medium and 2, 4, 8 streams
    assert all("beyond the limit" in r for r in result.reasons[:4])
    assert (
        "long prompts, median latency: +5.1% vs baseline, limit +10%: within the limit"
        in (result.reasons[4:])
    )
    assert text.count("beyond the limit") == 4
    assert result.headline.startswith("medium prompts, median latency: +11.9% vs baseline")
    assert result.headline.endswith(
        "; also 2 streams tok/s, 4 streams tok/s, 8 streams tok/s; other figures: 3 within"
    )


def test_study_gate_passes_017_throughput_against_016_eager() -> None:
    base = summary(*STUDY["0.16-eager"])
    cand = summary(*STUDY["0.17-throughput"])
    result = verdict(cand, limits(maxRegressionPercent=10, quality={"minPassed": 12}), base)
    assert result.outcome == "Passed", result.reasons


@pytest.mark.parametrize("name", sorted(ERROR_CLASSES))
def test_any_error_class_never_passes(name: str) -> None:
    result = verdict(summary(errors={name: 1}), Thresholds(), None)
    expected = "Failed" if kind_of(name) == "server" else "Error"
    assert result.outcome == expected
    assert any(name in r for r in result.reasons)


def test_unknown_error_class_is_a_measurement_error() -> None:
    result = verdict(summary(errors={"cosmic_ray": 2}), Thresholds(), None)
    assert result.outcome == "Error"
    assert "2 request(s) cosmic_ray" in result.reasons[0]


def test_zero_counts_are_not_errors() -> None:
    assert verdict(summary(errors={"http_5xx": 0}), Thresholds(), None).outcome == "Passed"


def test_failed_outranks_error_and_both_are_reported() -> None:
    result = verdict(
        summary(passed=5, errors={"timeout": 1}), limits(quality={"minPassed": 12}), None
    )
    assert result.outcome == "Failed"
    assert result.reasons[0].startswith("quality 5/13 passed, fewer than minPassed 12")
    assert any("timeout" in r for r in result.reasons)


def test_min_passed() -> None:
    ok = verdict(summary(passed=12), limits(quality={"minPassed": 12}), None)
    bad = verdict(summary(passed=11), limits(quality={"minPassed": 12}), None)
    assert (ok.outcome, bad.outcome) == ("Passed", "Failed")


def test_must_pass() -> None:
    th = limits(quality={"mustPass": ["multi-step-reason-1"]})
    result = verdict(summary(), th, None)
    assert result.outcome == "Failed"
    assert result.reasons == ["must-pass quality test multi-step-reason-1 failed"]
    assert verdict(summary(failed=()), th, None).outcome == "Passed"


def test_must_pass_with_cut_failed_list_is_inconclusive() -> None:
    cut = summary(failed=("classify-1",))
    cut = cut.model_copy(update={"quality": cut.quality.model_copy(update={"failed_omitted": 3})})  # type: ignore[union-attr]
    result = verdict(cut, limits(quality={"mustPass": ["code-1"]}), None)
    assert result.outcome == "Inconclusive"


def test_quality_limits_without_a_suite_is_an_error() -> None:
    result = verdict(
        summary().model_copy(update={"quality": None}), limits(quality={"minPassed": 1}), None
    )
    assert result.outcome == "Error"


def test_absolute_latency() -> None:
    assert verdict(summary(), limits(latencyMs={"medium": 5000}), None).outcome == "Passed"
    bad = verdict(summary(), limits(latencyMs={"medium": 4000}), None)
    assert bad.outcome == "Failed"
    assert bad.reasons == ["medium prompts: median latency 4602 ms > limit 4000 ms"]


def test_absolute_latency_not_measured_is_an_error() -> None:
    result = verdict(summary(latency=(471,)), limits(latencyMs={"long": 1}), None)
    assert result.outcome == "Error"
    assert "long prompts but not measured" in result.reasons[0]


def test_absolute_latency_with_too_few_samples_is_inconclusive() -> None:
    thin = summary(requests=MIN_LATENCY_SAMPLES - 1)
    assert verdict(thin, limits(latencyMs={"short": 10_000}), None).outcome == "Inconclusive"


def test_absolute_throughput() -> None:
    ok = limits(throughput=[{"concurrency": 8, "minTokensPerSecond": 100}])
    bad = limits(throughput=[{"concurrency": 8, "minTokensPerSecond": 200}])
    missing = limits(throughput=[{"concurrency": 16, "minTokensPerSecond": 1}])
    assert verdict(summary(), ok, None).outcome == "Passed"
    assert verdict(summary(), bad, None).outcome == "Failed"
    assert verdict(summary(), missing, None).outcome == "Error"


def test_throughput_level_with_fewer_requests_than_streams_is_inconclusive() -> None:
    s = summary()
    thin = [c.model_copy(update={"requests": c.concurrency - 1}) for c in s.concurrency]
    s = s.model_copy(update={"concurrency": thin})
    th = limits(throughput=[{"concurrency": 8, "minTokensPerSecond": 1}])
    assert verdict(s, th, None).outcome == "Inconclusive"
    assert verdict(s, limits(maxRegressionPercent=10), summary()).outcome == "Inconclusive"


def test_regression_without_baseline_is_noted_not_blocking() -> None:
    result = verdict(summary(), limits(maxRegressionPercent=10), None)
    assert result.outcome == "Passed"
    assert result.reasons == ["no baseline: regressions not checked (first revision)"]


def test_baseline_ignored_without_regression_limit() -> None:
    assert verdict(summary(latency=(1e6, 1e6, 1e6)), Thresholds(), summary()).outcome == "Passed"


def test_regression_exactly_at_the_limit_passes() -> None:
    base = summary(latency=(100, 1000, 10000))
    cand = summary(latency=(110, 1100, 11000))
    assert verdict(cand, limits(maxRegressionPercent=10), base).outcome == "Passed"
    worse = summary(latency=(100, 1101, 10000))
    assert verdict(worse, limits(maxRegressionPercent=10), base).outcome == "Failed"


def test_quality_regression() -> None:
    base = summary(passed=12)
    th = limits(maxRegressionPercent=10)
    assert verdict(summary(passed=11), th, base).outcome == "Passed"  # 8.3% drop
    result = verdict(summary(passed=10), th, base)  # 16.7% drop
    assert result.outcome == "Failed"
    assert "quality 10/13 is 16.7% below baseline 12/13" in result.reasons[0]


def test_quality_regression_with_different_suites_is_inconclusive() -> None:
    base = summary()
    other = base.model_copy(update={"quality": QualityFigures(suite="custom", passed=12, total=13)})
    assert verdict(other, limits(maxRegressionPercent=10), base).outcome == "Inconclusive"
    no_quality = base.model_copy(update={"quality": None})
    assert verdict(summary(), limits(maxRegressionPercent=10), no_quality).outcome == "Inconclusive"


def test_baseline_without_the_compared_figure_is_inconclusive() -> None:
    base = summary(latency=(471, 4602), agg=(22.4, 44.7, 86.9))
    result = verdict(summary(), limits(maxRegressionPercent=10), base)
    assert result.outcome == "Inconclusive"
    assert "baseline has no long-prompt latency" in result.reasons
    assert "baseline has no figure at 8 streams" in result.reasons


def test_thin_baseline_is_inconclusive() -> None:
    base = summary(requests=1)
    result = verdict(summary(), limits(maxRegressionPercent=10), base)
    assert result.outcome == "Inconclusive"
    assert any(r.startswith("baseline short prompts: 1 request(s)") for r in result.reasons)


def test_baseline_with_errors_is_inconclusive() -> None:
    base = summary(errors={"http_5xx": 1})
    result = verdict(summary(), limits(maxRegressionPercent=10), base)
    assert (result.outcome, result.reasons) == (
        "Inconclusive",
        ["baseline has failed requests (http_5xx)"],
    )


def test_foreign_summary_formats() -> None:
    odd = summary().model_copy(update={"schema_": "other/v9"})
    assert verdict(odd, Thresholds(), None).outcome == "Error"
    assert verdict(summary(), limits(maxRegressionPercent=5), odd).outcome == "Inconclusive"


def test_verdict_round_trips_through_wire_json() -> None:
    base = summary(*STUDY["0.16-eager"])
    cand = summary(*STUDY["0.17-eager"])
    again = BenchSummary.model_validate(cand.to_wire())
    th = limits(maxRegressionPercent=10)
    assert verdict(again, th, BenchSummary.model_validate(base.to_wire())) == verdict(
        cand, th, base
    )


@settings(max_examples=60, deadline=None)
@given(
    errors=st.dictionaries(st.sampled_from(sorted(ERROR_CLASSES)), st.integers(1, 50), min_size=1),
    passed=st.integers(0, 13),
    pct=st.none() | st.floats(0, 100),
)
def test_property_errors_never_pass_and_verdict_is_deterministic(
    errors: dict[str, int], passed: int, pct: float | None
) -> None:
    s = summary(passed=passed, errors=errors)
    th = limits(maxRegressionPercent=pct)
    first = verdict(s, th, summary())
    assert first.outcome in ("Failed", "Error")
    assert verdict(s, th, summary()) == first
