"""rollout.canary.latency: the latency rule decides at vLLM's real bucket bounds."""

from __future__ import annotations

import math
import pathlib
import re

import canary_latency_table as table

from vllm_operator.api.canary import CanaryAnalysis
from vllm_operator.rollout.canary.analysis import judge_step
from vllm_operator.rollout.canary.latency import (
    VLLM_BUCKETS,
    PodHistogram,
    candidate_bound,
    difference_interval,
    gap_design_effect,
    judge_latency,
)
from vllm_operator.rollout.canary.metrics import PodCounts, PodDelta
from vllm_operator.sim.metrics import ITL_BUCKETS, LATENCY_BUCKETS, TTFT_BUCKETS

DOC = pathlib.Path(__file__).parents[3] / "docs" / "rollout.md"


def _threshold(value: float) -> float:
    return max(value * 2.0, value + 0.025)


def test_the_docs_table_is_what_the_rule_gives_at_the_real_buckets() -> None:
    text = DOC.read_text()
    found = re.search(
        r"<!-- canary-latency-table:start -->\n(.*?)<!-- canary-latency-table:end -->",
        text,
        re.S,
    )
    assert found, "docs/rollout.md lost its canary latency table markers"
    documented = [
        line
        for line in found.group(1).splitlines()
        if line.startswith("| ") and (line.split("|")[1].strip() in {"TTFT", "ITL", "E2E"})
    ]
    computed = table.rows()
    assert documented == computed, "rerun: python tests/unit/rollout/canary_latency_table.py"
    # Every range decidable, none Failed, for an identical candidate.
    assert all(row.split("|")[3].strip() == "within" for row in computed)
    assert f"{table.REQUESTS:,} requests" in text


def test_the_simulator_exports_the_real_bounds() -> None:
    assert VLLM_BUCKETS == {"ttft": TTFT_BUCKETS, "itl": ITL_BUCKETS, "e2e": LATENCY_BUCKETS}


def _lognormal(bounds: tuple[float, ...], p95: float, n: float, slower: float = 1.0) -> PodDelta:
    cdf = table._histogram(bounds, p95, slower, 1.0).buckets
    scaled = tuple((le, c * n / table.REQUESTS) for le, c in cdf)
    e2e = tuple(
        (le, c * n / table.REQUESTS)
        for le, c in table._histogram(VLLM_BUCKETS["e2e"], 2.0, 1.0, 1.0).buckets
    )
    itl = tuple(
        (le, c * n / table.REQUESTS * 20)
        for le, c in table._histogram(VLLM_BUCKETS["itl"], 0.04, 1.0, 1.0).buckets
    )
    counts = PodCounts(
        histograms={"ttft": scaled, "itl": itl, "e2e": e2e}, finished=n, generation_tokens=n
    )
    return PodDelta(counts, restarted=False)


def test_an_identical_candidate_passes_with_the_stables_ttft_p95_in_100_to_250_ms() -> None:
    # The case: the old rule could never show "within" here and held the step.
    analysis = CanaryAnalysis.model_validate({"minRequests": 400})
    stable = {"s-0": _lognormal(TTFT_BUCKETS, 0.18, 1000)}
    same = {"c-0": _lognormal(TTFT_BUCKETS, 0.18, 1000)}
    judged = judge_step(analysis, same, stable, 60.0)
    assert judged.decision == "Passed", judged.reasons()
    slower = {"c-0": _lognormal(TTFT_BUCKETS, 0.18, 1000, slower=4.0)}
    judged = judge_step(analysis, slower, stable, 60.0)
    assert judged.decision == "Failed"
    assert judged.failed_figures[0].name == "TTFT p95"


def test_the_limit_is_rounded_to_the_nearest_bound_above_and_exact_bounds_are_kept() -> None:
    bounds = list(TTFT_BUCKETS)
    assert candidate_bound(0.25, bounds, _threshold).candidate == 0.5
    assert not candidate_bound(0.25, bounds, _threshold).rounded
    rounded = candidate_bound(0.75, bounds, _threshold)  # 1.5 s: 1 s is nearer than 2.5 s
    assert (rounded.candidate, rounded.rounded) == (1.0, True)
    assert candidate_bound(0.1, bounds, lambda v: v * 1.01).candidate == 0.25  # never B itself


def test_inter_token_gaps_count_as_their_requests() -> None:
    # 5% vs 3% of 2,000 gaps: decided when gaps were independent, not when they come 50 to a
    # request (40 requests each).
    def pod(above: float, effect: float) -> PodHistogram:
        return PodHistogram(((0.05, 2000.0), (0.1, 2000.0 - above), (math.inf, 2000.0)), effect)

    def judged(effect: float) -> str:
        return judge_latency(
            [pod(300, effect)],
            [PodHistogram(((0.05, 1800.0), (0.1, 2000.0), (math.inf, 2000.0)), effect)],
            0.05,
            lambda v: v * 2,
            0.95,
        ).decision

    assert judged(1.0) == "beyond"
    assert judged(50.0) == "undecided"
    itl = ((0.05, 1000.0), (math.inf, 2000.0))
    e2e = ((1.0, 40.0), (math.inf, 40.0))
    assert gap_design_effect(itl, e2e) == 50.0
    assert gap_design_effect(itl, ()) == 1.0


def test_a_stable_in_the_first_bucket_holds_the_candidate_to_the_allowed_share() -> None:
    stable = [PodHistogram(((0.001, 1000.0), (0.005, 1000.0), (0.04, 1000.0), (math.inf, 1000.0)))]
    fine = [PodHistogram(((0.001, 990.0), (0.005, 1000.0), (0.04, 1000.0), (math.inf, 1000.0)))]
    slow = [PodHistogram(((0.001, 0.0), (0.005, 0.0), (0.04, 500.0), (math.inf, 1000.0)))]
    assert judge_latency(fine, stable, 0.05, _threshold, 0.95).decision == "within"
    judged = judge_latency(slow, stable, 0.05, _threshold, 0.95)
    assert (judged.decision, judged.first_bucket) == ("beyond", True)


def test_newcombe_interval_brackets_the_difference() -> None:
    low, high = difference_interval(10, 100, 20, 100, 1.96)
    assert low < -0.1 < high < 0
    assert difference_interval(0, 0, 1, 10, 1.96) == (-1.0, 1.0)


def test_a_stable_above_the_largest_bound_is_undecided_and_says_why() -> None:
    top = [PodHistogram(((1.0, 0.0), (2.0, 0.0), (math.inf, 100.0)))]
    judged = judge_latency(top, top, 0.05, _threshold, 0.95)
    assert judged.decision == "undecided"
    assert "largest bucket bound" in judged.reason


def _itl_pod(requests: float, gaps_above: float) -> PodDelta:
    gaps = requests * 50  # 50 gaps per request: ITL count / E2E count
    itl = ((0.05, gaps - gaps_above), (0.1, gaps), (math.inf, gaps))
    e2e = ((1.0, requests), (math.inf, requests))
    ttft = ((0.1, requests), (math.inf, requests))
    counts = PodCounts(histograms={"ttft": ttft, "itl": itl, "e2e": e2e}, finished=requests)
    return PodDelta(counts, restarted=False)


def test_an_itl_slo_counts_gaps_clustered_by_their_requests() -> None:
    # 3% of 5,000 gaps above 50 ms against a p95 limit: as independent gaps that is within
    # 5%; 50 gaps to a request, it rests on 100 requests and cannot be shown within.
    analysis = CanaryAnalysis.model_validate(
        {
            "minRequests": 100,
            "maxErrorPercentPoints": 5,
            "latency": [],
            "slo": {"itlMs": {"p95": 50}},
        }
    )
    judged = judge_step(analysis, {"c-0": _itl_pod(100, 150)}, {"s-0": _itl_pod(100, 0)}, 60)
    slo = next(f for f in judged.figures if f.name == "ITL p95 SLO")
    assert slo.decision == "undecided", slo.text
    many = judge_step(analysis, {"c-0": _itl_pod(4000, 6000)}, {"s-0": _itl_pod(100, 0)}, 60)
    assert next(f for f in many.figures if f.name == "ITL p95 SLO").decision == "within"
