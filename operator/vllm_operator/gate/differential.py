"""The quality differential's limits: does the candidate still answer like the baseline?

The quality suite's pass count says how many assertions hold; it cannot see a candidate
that answers differently but still passes, nor one that fixes one test and breaks another.
The differential (``api.summary.QualityDifferential``, computed by the benchmark from the
answers both servers gave to the same greedy prompts) can, and two limits judge it:

- ``minIdenticalPercent``: the share of the suite's tests whose two answers are the same
  text;
- ``minStillPassingPercent``: of the tests the baseline passed, the share the candidate
  passed too.

A share exactly at its limit passes (``<``, as every limit of the gate). Both need the
baseline measured in the same run: a stored summary holds no answers, so without a paired
baseline (a first revision, ``gate.baseline.mode: stored``) the limits are not judged and a
note says so; a paired baseline without answers to compare is Inconclusive.
"""

from __future__ import annotations

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary, QualityDifferential
from vllm_operator.gate.finding import Finding

IDS_NAMED = 3
"""Test ids a reason names before "+N more" (a summary keeps 200 characters of a reason)."""

EXACT = 1e-9
"""Shares this close to a limit count as on it (float rounding, not data)."""


def differential_limits(summary: BenchSummary, thresholds: Thresholds) -> list[Finding]:
    """Findings of ``minIdenticalPercent`` and ``minStillPassingPercent`` on ``summary``."""
    limits = thresholds.quality
    asked = [
        name
        for name, limit in (
            ("minIdenticalPercent", limits.min_identical_percent),
            ("minStillPassingPercent", limits.min_still_passing_percent),
        )
        if limit is not None
    ]
    if not asked:
        return []
    fields = " and ".join(asked)
    quality = summary.quality
    if quality is None:
        verb = "are" if len(asked) > 1 else "is"
        return [Finding("error", f"quality {fields} {verb} set but no quality suite was run")]
    if summary.paired_baseline is None:
        return [
            Finding(
                "note",
                f"quality {fields} not judged: it compares answers with the baseline measured "
                "in the same run (gate.baseline.mode twin, bench --baseline-url), and there "
                "was none (a first revision, or a stored baseline)",
            )
        ]
    diff = quality.differential
    if diff is None or diff.compared == 0:
        return [
            Finding(
                "inconclusive",
                f"quality {fields}: no answers of the paired baseline to compare (its suite "
                "did not run, or it ran another suite)",
            )
        ]
    found = []
    if limits.min_identical_percent is not None:
        found.append(_identical(diff, limits.min_identical_percent))
    if limits.min_still_passing_percent is not None:
        found.append(_still_passing(diff, limits.min_still_passing_percent))
    return found


def _below(count: int, base: int, limit: float) -> bool:
    """Is ``count / base`` below ``limit`` percent (exactly at it is not)?"""
    return 100.0 * count < limit * base - EXACT * max(1.0, limit * base)


def _identical(diff: QualityDifferential, limit: float) -> Finding:
    share = f"{diff.identical}/{diff.compared} answers ({diff.identical_percent:.1f}%)"
    if _below(diff.identical, diff.compared, limit):
        return Finding(
            "fail",
            f"quality differential: {share} identical to the paired baseline's, below "
            f"minIdenticalPercent {limit:g} (differing: {_ids(diff.differing, diff)})",
        )
    return Finding(
        "note",
        f"quality differential: {share} identical to the paired baseline's, limit "
        f"minIdenticalPercent {limit:g}: within the limit",
    )


def _still_passing(diff: QualityDifferential, limit: float) -> Finding:
    if diff.baseline_passed == 0:
        return Finding(
            "note",
            "quality differential: the paired baseline passed no test, nothing to keep "
            f"(minStillPassingPercent {limit:g})",
        )
    share = (
        f"{diff.still_passing} of the baseline's {diff.baseline_passed} passing test(s) "
        f"({diff.still_passing_percent:.1f}%)"
    )
    if _below(diff.still_passing, diff.baseline_passed, limit):
        return Finding(
            "fail",
            f"quality differential: {share} still pass on the candidate, below "
            f"minStillPassingPercent {limit:g} (no longer passing: {_ids(diff.lost, diff)})",
        )
    return Finding(
        "note",
        f"quality differential: {share} still pass on the candidate, limit "
        f"minStillPassingPercent {limit:g}: within the limit",
    )


def _ids(ids: list[str], diff: QualityDifferential) -> str:
    named = ", ".join(ids[:IDS_NAMED]) or "-"
    rest = len(ids) - IDS_NAMED
    text = f"{named} +{rest} more" if rest > 0 else named
    return text + (f"; {diff.omitted} id(s) cut to fit the summary" if diff.omitted else "")
