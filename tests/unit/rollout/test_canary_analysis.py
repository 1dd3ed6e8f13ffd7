"""rollout.canary.analysis: a step judged from both revisions' per-pod deltas."""

from __future__ import annotations

import math
import random
from typing import Any

from vllm_operator.api.canary import CanaryAnalysis
from vllm_operator.api.workload import SloLimits
from vllm_operator.rollout.canary.analysis import bucket_quantile, judge_step
from vllm_operator.rollout.canary.metrics import PodCounts, PodDelta
from vllm_operator.sim.metrics import ITL_BUCKETS, LATENCY_BUCKETS, TTFT_BUCKETS

_BOUNDS = {"ttft": TTFT_BUCKETS, "itl": ITL_BUCKETS, "e2e": LATENCY_BUCKETS}


def _hist(values: list[float], bounds: tuple[float, ...]) -> tuple[tuple[float, float], ...]:
    return tuple((le, float(sum(1 for v in values if v <= le))) for le in (*bounds, math.inf))


def _pod(
    n: int, *, ttft_scale: float = 1.0, errors: int = 0, seed: int = 0, tokens: float = 0.0
) -> PodDelta:
    rng = random.Random(seed)
    # p95s inside vLLM's buckets: TTFT ~49 ms in (40, 60], ITL ~33 ms in (25, 50], E2E
    # ~1.6 s in (1.5, 2.0]; the default 100% limit reaches the next bound of each.
    ttft = [rng.lognormvariate(math.log(0.03), 0.3) * ttft_scale for _ in range(n)]
    itl = [rng.lognormvariate(math.log(0.02), 0.3) for _ in range(n * 5)]
    e2e = [rng.lognormvariate(math.log(1.0), 0.3) for _ in range(n)]
    counts = PodCounts(
        histograms={
            "ttft": _hist(ttft, _BOUNDS["ttft"]),
            "itl": _hist(itl, _BOUNDS["itl"]),
            "e2e": _hist(e2e, _BOUNDS["e2e"]),
        },
        finished=float(n),
        aborted=float(errors),
        generation_tokens=tokens or float(n * 50),
    )
    return PodDelta(counts, restarted=False)


def _analysis(**fields: Any) -> CanaryAnalysis:
    return CanaryAnalysis.model_validate({"minRequests": 400, **fields})


def _stable() -> dict[str, PodDelta]:
    return {"s-0": _pod(1200, seed=1), "s-1": _pod(1200, seed=2)}


def test_same_revision_passes_with_enough_requests() -> None:
    judged = judge_step(_analysis(), {"c-0": _pod(600, seed=3)}, _stable(), 60.0)
    assert judged.decision == "Passed", judged.reasons()
    assert judged.enough_requests
    assert judged.candidate.requests == 600
    assert judged.stable.pods == 2
    assert judged.candidate.ttft_p95_ms is not None


def test_too_few_requests_waits_even_when_every_figure_is_fine() -> None:
    judged = judge_step(_analysis(minRequests=601), {"c-0": _pod(600, seed=3)}, _stable(), 60.0)
    assert judged.decision == "Waiting"
    assert not judged.enough_requests


def test_a_tenfold_ttft_fails_naming_the_figure() -> None:
    judged = judge_step(_analysis(), {"c-0": _pod(600, ttft_scale=10.0, seed=3)}, _stable(), 60.0)
    assert judged.decision == "Failed"
    assert [f.name for f in judged.failed_figures] == ["TTFT p95"]
    assert judged.reasons()[0].startswith("TTFT p95 regressed beyond +100% and +25 ms of stable")


def test_ttft_regression_limit_boundary() -> None:
    # Tenfold: beyond a 100% limit, within a 1000% one (both decided at bucket bounds).
    slower = {"c-0": _pod(600, ttft_scale=10, seed=3)}
    strict = [{"metric": "ttft", "percentile": "p95", "maxRegressionPercent": 100}]
    loose = [{"metric": "ttft", "percentile": "p95", "maxRegressionPercent": 1000}]
    assert judge_step(_analysis(latency=strict), slower, _stable(), 60).decision == "Failed"
    assert judge_step(_analysis(latency=loose), slower, _stable(), 60).decision == "Passed"


def test_a_limit_narrower_than_the_buckets_is_rounded_and_says_to_which_bound() -> None:
    # The stable's p95 (~49 ms) lies in (40, 60] ms, nearer 40 ms in share (16% of the
    # stable above 40 ms, 1% above 60); +20% and +5 ms of 40 ms is 48 ms, between the bounds
    # 40 and 60: the candidate is judged above 60 ms against the stable above 40 ms, and the
    # reason says so. An identical revision is decided within (the old rule left it waiting).
    narrow = [{"metric": "ttft", "percentile": "p95", "maxRegressionPercent": 20, "floorMs": 5}]
    judged = judge_step(_analysis(latency=narrow), {"c-0": _pod(600, seed=3)}, _stable(), 60)
    assert judged.decision == "Passed", judged.reasons()
    assert "the limit at 40 ms is 48 ms, rounded to the bucket bound 60 ms" in judged.reasons()[0]


def test_error_share_boundary_in_points_over_stable() -> None:
    failing = {"c-0": _pod(2000, errors=100, seed=3)}  # 5%
    judged = judge_step(_analysis(maxErrorPercentPoints=1), failing, _stable(), 60)
    assert judged.decision == "Failed"
    assert [f.name for f in judged.failed_figures] == ["error share"]
    assert "candidate 5.00% of 2000 requests failed" in judged.reasons()[0]
    assert judge_step(_analysis(maxErrorPercentPoints=10), failing, _stable(), 60).decision == (
        "Passed"
    )


def test_all_errors_fail_before_min_requests() -> None:
    judged = judge_step(_analysis(), {"c-0": _pod(40, errors=40, seed=3)}, _stable(), 60)
    assert judged.decision == "Failed"
    assert not judged.enough_requests


def test_absolute_slo_limits_and_the_gates_reused() -> None:
    candidate = {"c-0": _pod(600, seed=3)}
    # TTFT p50 is ~30 ms: a 20 ms p50 limit fails, a 500 ms one holds.
    slo = {"ttftMs": {"p50": 20}}
    judged = judge_step(_analysis(slo=slo), candidate, _stable(), 60)
    assert [f.name for f in judged.failed_figures] == ["TTFT p50 SLO"]
    gate = SloLimits.model_validate({"ttftMs": {"p50": 500}})
    ok = judge_step(_analysis(useGateSlo=True), candidate, _stable(), 60, gate_slo=gate)
    assert ok.decision == "Passed"
    bad = SloLimits.model_validate({"ttftMs": {"p50": 20}})
    judged = judge_step(_analysis(useGateSlo=True), candidate, _stable(), 60, gate_slo=bad)
    assert [f.name for f in judged.failed_figures] == ["TTFT p50 gate SLO"]


def test_throughput_per_replica_boundary() -> None:
    stable = {"s-0": _pod(1200, seed=1, tokens=60_000)}  # 1000 tokens/s over 60 s
    slow = {"c-0": _pod(600, seed=3, tokens=42_000)}  # 700 tokens/s: a 30% drop
    assert judge_step(_analysis(maxThroughputDropPercent=25), slow, stable, 60).decision == (
        "Failed"
    )
    assert judge_step(_analysis(maxThroughputDropPercent=35), slow, stable, 60).decision == (
        "Passed"
    )


def test_bucket_quantile_is_a_bound_never_below() -> None:
    buckets = ((0.1, 50.0), (0.5, 95.0), (1.0, 100.0), (math.inf, 100.0))
    assert bucket_quantile(buckets, 0.5) == 0.1
    assert bucket_quantile(buckets, 0.95) == 0.5
    assert bucket_quantile(buckets, 0.96) == 1.0
    assert bucket_quantile(((1.0, 0.0), (math.inf, 3.0)), 0.5) is None
