"""The quality differential's limits: each share against its limit, at and around the edge."""

from __future__ import annotations

from typing import Any

import pytest

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    BenchSummary,
    PairedBaseline,
    QualityDifferential,
    QualityFigures,
)
from vllm_operator.gate import verdict

IDS = [f"t{i}" for i in range(13)]


def summary(
    identical: int = 13,
    still: int = 12,
    baseline_passed: int = 12,
    *,
    compared: int = 13,
    paired: bool = True,
    differential: bool = True,
    omitted: int = 0,
) -> BenchSummary:
    diff = QualityDifferential(
        compared=compared,
        identical=identical,
        baseline_passed=baseline_passed,
        still_passing=still,
        differing=IDS[identical:compared],
        lost=IDS[:baseline_passed][still:],
        omitted=omitted,
    )
    quality = QualityFigures(
        suite="default",
        passed=still,
        total=compared,
        differential=diff if differential else None,
    )
    base = QualityFigures(suite="default", passed=baseline_passed, total=compared)
    return BenchSummary(
        model="m",
        quality=quality,
        paired_baseline=PairedBaseline(quality=base) if paired else None,
    )


def limits(**quality: Any) -> Thresholds:
    return Thresholds.model_validate({"quality": quality})


def outcome(s: BenchSummary, **quality: Any) -> str:
    return verdict(s, limits(**quality), None).outcome


@pytest.mark.parametrize(
    ("identical", "compared", "limit", "expected"),
    [
        (9, 10, 90, "Passed"),  # exactly at the limit passes
        (9, 10, 90.01, "Failed"),  # a hair above the share fails
        (9, 10, 89.99, "Passed"),
        (8, 10, 90, "Failed"),
        (2, 3, 66.66, "Passed"),  # 66.67%
        (2, 3, 66.67, "Failed"),
        (2, 3, 200 / 3, "Passed"),  # the share itself, as a float
        (0, 13, 0, "Passed"),
        (13, 13, 100, "Passed"),
        (12, 13, 100, "Failed"),
    ],
)
def test_identical_share_against_its_limit(
    identical: int, compared: int, limit: float, expected: str
) -> None:
    s = summary(identical, still=0, baseline_passed=0, compared=compared)
    assert outcome(s, minIdenticalPercent=limit) == expected


@pytest.mark.parametrize(
    ("still", "baseline_passed", "limit", "expected"),
    [
        (11, 12, 91.66, "Passed"),  # 91.67%
        (11, 12, 91.67, "Failed"),
        (12, 12, 100, "Passed"),
        (11, 12, 100, "Failed"),
        (6, 12, 50, "Passed"),
        (5, 12, 50, "Failed"),
        (0, 0, 100, "Passed"),  # the baseline passed nothing: nothing to keep
    ],
)
def test_still_passing_share_against_its_limit(
    still: int, baseline_passed: int, limit: float, expected: str
) -> None:
    s = summary(13, still=still, baseline_passed=baseline_passed)
    assert outcome(s, minStillPassingPercent=limit) == expected


def test_failing_reason_names_share_limit_and_differing_ids() -> None:
    result = verdict(summary(6), limits(minIdenticalPercent=90), None)
    assert result.outcome == "Failed"
    assert result.reasons[0] == (
        "quality differential: 6/13 answers (46.2%) identical to the paired baseline's, "
        "below minIdenticalPercent 90 (differing: t6, t7, t8 +4 more)"
    )


def test_failing_still_passing_reason_names_the_lost_ids() -> None:
    result = verdict(summary(13, still=10), limits(minStillPassingPercent=100), None)
    assert result.reasons[0] == (
        "quality differential: 10 of the baseline's 12 passing test(s) (83.3%) still pass on "
        "the candidate, below minStillPassingPercent 100 (no longer passing: t10, t11)"
    )


def test_ids_cut_from_the_summary_are_counted_in_the_reason() -> None:
    s = summary(11, omitted=4)
    reason = verdict(s, limits(minIdenticalPercent=100), None).reasons[0]
    assert reason.endswith("(differing: t11, t12; 4 id(s) cut to fit the summary)")


def test_within_the_limit_is_a_note_and_passes() -> None:
    result = verdict(summary(13), limits(minIdenticalPercent=100, minStillPassingPercent=100), None)
    assert result.outcome == "Passed"
    assert result.reasons == [
        "quality differential: 13/13 answers (100.0%) identical to the paired baseline's, "
        "limit minIdenticalPercent 100: within the limit",
        "quality differential: 12 of the baseline's 12 passing test(s) (100.0%) still pass "
        "on the candidate, limit minStillPassingPercent 100: within the limit",
    ]


def test_without_a_paired_baseline_it_is_a_note_not_a_block() -> None:
    # a first revision (no stable to twin) or a stored baseline holds no answers
    result = verdict(summary(0, paired=False), limits(minIdenticalPercent=100), None)
    assert result.outcome == "Passed"
    assert "minIdenticalPercent not judged" in result.reasons[0]


def test_paired_baseline_without_answers_is_inconclusive() -> None:
    s = summary(differential=False)
    result = verdict(s, limits(minStillPassingPercent=90), None)
    assert result.outcome == "Inconclusive"
    assert result.reasons[0].startswith("quality minStillPassingPercent: no answers")


def test_no_suite_run_is_an_error() -> None:
    s = BenchSummary(model="m", paired_baseline=PairedBaseline())
    result = verdict(s, limits(minIdenticalPercent=50, minStillPassingPercent=50), None)
    assert result.outcome == "Error"
    assert result.reasons == [
        "quality minIdenticalPercent and minStillPassingPercent are set but no quality suite "
        "was run"
    ]


def test_unset_limits_judge_nothing() -> None:
    assert verdict(summary(0, still=0), Thresholds(), None).outcome == "Passed"


@pytest.mark.parametrize("bad", [-1, 100.5])
def test_limits_are_percentages(bad: float) -> None:
    with pytest.raises(ValueError, match="minIdenticalPercent"):
        limits(minIdenticalPercent=bad)
