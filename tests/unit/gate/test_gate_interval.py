"""The interval arithmetic and the decisions built on it, at their boundaries.

Every boundary test moves one input a little (the limit, the confidence, one trial) and
expects the decision to change, so a mutated comparison or quantile cannot pass.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    BenchSummary,
    ConcurrencyFigures,
    LatencyFigures,
    PairedBaseline,
    Placement,
    QualityFigures,
)
from vllm_operator.gate import verdict
from vllm_operator.gate.interval import relative_interval, t_cdf, t_quantile

# Two-sided 95% (and one 99%) Student t quantiles from printed tables.
TABLE = [(0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 4, 2.776), (0.975, 9, 2.262)]
TABLE += [(0.975, 30, 2.042), (0.995, 5, 4.032), (0.95, 3, 2.353)]


@pytest.mark.parametrize(("p", "df", "expected"), TABLE)
def test_t_quantiles_match_printed_tables(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=6e-4)
    assert t_cdf(expected, df) == pytest.approx(p, abs=1e-4)
    assert t_cdf(-expected, df) == pytest.approx(1 - p, abs=1e-4)


def test_paired_interval_by_hand() -> None:
    # log ratios -0.10, -0.12, -0.08: mean -0.10, sd 0.02, se 0.02/sqrt(3), t(0.975, 2) 4.303
    base = [100.0, 200.0, 50.0]
    cand = [b * math.exp(d) for b, d in zip(base, (-0.10, -0.12, -0.08), strict=True)]
    iv = relative_interval(cand, base, confidence=0.95, paired=True)
    assert iv is not None
    assert iv.paired
    assert iv.change == pytest.approx(math.exp(-0.10) - 1, abs=1e-12)
    half = 4.3027 * 0.02 / math.sqrt(3)
    assert iv.low == pytest.approx(math.exp(-0.10 - half) - 1, abs=1e-5)
    assert iv.high == pytest.approx(math.exp(-0.10 + half) - 1, abs=1e-5)
    # unpaired, the same numbers spread over 50..200 give a far wider interval
    wide = relative_interval(cand, base, confidence=0.95, paired=False)
    assert wide is not None
    assert not wide.paired
    assert wide.high - wide.low > 10 * (iv.high - iv.low)


def test_one_trial_each_is_a_point_and_one_side_borrows_the_other_spread() -> None:
    point = relative_interval([90.0], [100.0], confidence=0.95, paired=True)
    assert point is not None
    assert not point.estimated
    assert point.low == point.high == pytest.approx(-0.1)
    borrowed = relative_interval([90.0, 99.0, 81.0], [100.0], confidence=0.95, paired=True)
    assert borrowed is not None
    assert borrowed.estimated
    assert borrowed.low < borrowed.change < borrowed.high
    assert relative_interval([0.0, 1.0], [1.0, 1.0], confidence=0.95, paired=True) is None
    assert relative_interval([], [1.0], confidence=0.95, paired=True) is None


def lat(name: str, trials: list[float]) -> LatencyFigures:
    return LatencyFigures(
        prompt_class=name,
        requests=5 * len(trials),
        median_ms=sorted(trials)[len(trials) // 2],
        ttft_ms=1,
        output_tokens=2,
        e2e_tokens_per_second=1,
        decode_tokens_per_second=0,
        trials=trials,
    )


def level(c: int, trials: list[float]) -> ConcurrencyFigures:
    return ConcurrencyFigures(
        concurrency=c,
        aggregate_tokens_per_second=sorted(trials)[len(trials) // 2],
        requests_per_second=1,
        requests=3 * c,
        trials=trials,
    )


def paired(
    cand8: list[float], base8: list[float], *, gpus: tuple[str, str] | None = None, **kw: Any
) -> BenchSummary:
    quality = QualityFigures(suite="default", passed=12, total=13)
    cp = Placement(node="a", gpu_product=gpus[0]) if gpus else None
    bp = Placement(node="b", gpu_product=gpus[1]) if gpus else None
    return BenchSummary(
        model="m",
        latency=[lat("medium", [470.0, 471.0, 469.0])],
        concurrency=[level(8, cand8)],
        quality=quality,
        placement=cp,
        paired_baseline=PairedBaseline(
            placement=bp,
            latency=[lat("medium", [470.0, 470.0, 470.0])],
            concurrency=[level(8, base8)],
            quality=quality,
        ),
        **kw,
    )


BASE8 = [743.6, 760.0, 730.0]
DROP8 = [b * math.exp(d) for b, d in zip(BASE8, (-0.12, -0.15, -0.10), strict=True)]


def limits(percent: float, confidence: float = 95.0) -> Thresholds:
    return Thresholds(max_regression_percent=percent, confidence_percent=confidence)


def bounds(confidence: float = 0.95) -> tuple[float, float]:
    iv = relative_interval(DROP8, BASE8, confidence=confidence, paired=True)
    assert iv is not None
    return iv.low * 100, iv.high * 100


def test_failed_only_when_the_whole_interval_is_beyond_the_limit() -> None:
    low, high = bounds()  # about -19% to -7%
    assert -20 < low < high < -5
    just_failed = verdict(paired(DROP8, BASE8), limits(-high - 0.05), None)
    assert just_failed.outcome == "Failed"
    straddles = verdict(paired(DROP8, BASE8), limits(-high + 0.05), None)
    assert straddles.outcome == "Inconclusive"
    just_passed = verdict(paired(DROP8, BASE8), limits(-low + 0.05), None)
    assert just_passed.outcome == "Passed", just_passed.reasons
    assert verdict(paired(DROP8, BASE8), limits(-low - 0.05), None).outcome == "Inconclusive"


def test_a_little_more_confidence_widens_the_interval_into_inconclusive() -> None:
    _, high = bounds(0.95)
    th = -high - 0.05
    assert verdict(paired(DROP8, BASE8), limits(th, 95.0), None).outcome == "Failed"
    assert verdict(paired(DROP8, BASE8), limits(th, 95.5), None).outcome == "Inconclusive"
    low, _ = bounds(0.95)
    assert verdict(paired(DROP8, BASE8), limits(-low + 0.05, 95.5), None).outcome != "Passed"


def test_reason_states_figures_interval_and_limit_in_plain_words() -> None:
    result = verdict(paired(DROP8, BASE8), limits(5), None)
    assert result.outcome == "Failed"
    low, high = bounds()
    change = (math.exp(-0.37 / 3) - 1) * 100
    expected = (
        f"8 streams: {statistics.geometric_mean(DROP8):,.1f} tok/s, {change:+.1f}% vs baseline "
        f"{statistics.geometric_mean(BASE8):,.1f} tok/s "
        f"(95% interval {low:+.1f}% to {high:+.1f}%, paired, 3 trials), limit -5%: "
        "regression beyond the limit"
    )
    assert result.reasons[0] == expected
    assert any(r.startswith("medium prompts, median latency:") for r in result.reasons)


def test_paired_baseline_replaces_the_stored_one_and_can_be_required() -> None:
    stored = BenchSummary(concurrency=[level(8, [100.0, 100.0, 100.0])])
    same = paired(BASE8, BASE8)
    result = verdict(same, limits(10), stored)  # stored would say +600%: ignored
    assert result.outcome == "Passed", result.reasons
    unpaired = same.model_copy(update={"paired_baseline": None})
    required = verdict(unpaired, limits(10), stored, require_paired=True)
    assert required.outcome == "Error"
    assert "paired baseline was required" in required.reasons[0]
    assert verdict(same, limits(10), None, require_paired=True).outcome == "Passed"


def test_different_gpu_products_are_inconclusive_on_regressions_only() -> None:
    result = verdict(
        paired(DROP8, BASE8, gpus=("NVIDIA-H200", "NVIDIA-H100-80GB-HBM3")), limits(5), None
    )
    assert result.outcome == "Inconclusive"
    assert "different GPU products" in result.reasons[0]
    assert "NVIDIA-H200" in result.reasons[0]
    same_gpu = verdict(paired(DROP8, BASE8, gpus=("NVIDIA-H200", "NVIDIA-H200")), limits(5), None)
    assert same_gpu.outcome == "Failed"
    # an absolute limit still fails across GPU products
    th = Thresholds.model_validate(
        {"maxRegressionPercent": 5, "throughput": [{"concurrency": 8, "minTokensPerSecond": 900}]}
    )
    mixed = verdict(paired(DROP8, BASE8, gpus=("A", "B")), th, None)
    assert mixed.outcome == "Failed"


def test_figures_only_the_baseline_has_are_inconclusive() -> None:
    s = paired(BASE8, BASE8)
    assert s.paired_baseline is not None
    cut = s.model_copy(update={"concurrency": []})
    result = verdict(cut, limits(10), None)
    assert result.outcome == "Inconclusive"
    assert "baseline has a figure at 8 streams, candidate not" in result.reasons


def test_noisy_identical_revisions_pass_and_a_real_regression_fails() -> None:
    noise = (0.02, -0.015, 0.01, -0.005, 0.0)
    base = [700.0 * math.exp(e) for e in noise]
    same = [700.0 * math.exp(-e) for e in noise]
    assert verdict(paired(same, base), limits(10), None).outcome == "Passed"
    slower = [0.7 * x for x in same]
    result = verdict(paired(slower, base), limits(10), None)
    assert result.outcome == "Failed"
    assert "limit -10%" in result.reasons[0]
