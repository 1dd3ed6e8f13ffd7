"""rollout.canary: the fields, their checks and the request count a percentile needs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from vllm_operator.api.canary import (
    CanaryAnalysis,
    CanarySpec,
    error_requests,
    minimum_requests,
)
from vllm_operator.api.spec import VLLMDeploymentSpec
from vllm_operator.gate.tail_baseline import judge_regression
from vllm_operator.gate.tails import allowed_share, observations_needed
from vllm_operator.gate.tallies import SampleTally


def _spec(canary: dict[str, Any], gate: dict[str, Any] | None = None) -> VLLMDeploymentSpec:
    body: dict[str, Any] = {
        "model": {"name": "m"},
        "engine": {"image": "vllm/vllm-openai:v0.22.0"},
        "rollout": {"canary": canary},
    }
    if gate is not None:
        body["gate"] = gate
    return VLLMDeploymentSpec.model_validate(body)


def test_defaults_judge_p95_of_three_latencies_with_replicas() -> None:
    canary = CanarySpec.model_validate({"steps": [{"weight": 10}, {"weight": 50}]})
    assert [(f.metric, f.percentile) for f in canary.analysis.latency] == [
        ("ttft", "p95"),
        ("itl", "p95"),
        ("e2e", "p95"),
    ]
    assert canary.traffic.mode == "replicas"
    assert canary.steps[0].hold_seconds == 600
    assert canary.analysis.min_requests >= minimum_requests("p95", 95)


@pytest.mark.parametrize(
    ("percentile", "confidence", "needed"),
    [("p99", 95, 437), ("p99", 99, 597), ("p99", 90, 368), ("p95", 95, 86), ("p50", 95, 7)],
)
def test_minimum_requests_is_the_tail_judges_count(
    percentile: Any, confidence: int, needed: int
) -> None:
    # The judge of a regression errs with (1 - c) / 4 on the candidate's upper bound.
    assert minimum_requests(percentile, confidence) == needed
    allowed = allowed_share(percentile)
    half = 1 - (1 - confidence / 100) / 2
    assert observations_needed(allowed, half) == needed
    # ... and that many fast candidate requests decide "within" against a slower stable;
    # one fewer cannot, however fast.
    stable = [SampleTally.of([0.5 + i / 2000 for i in range(1000)])]

    def judged(n: int) -> str:
        fast = [SampleTally.of([0.1] * n)]
        return judge_regression(fast, stable, percentile, lambda v: v, confidence / 100).decision

    assert judged(needed) == "within"
    assert judged(needed - 1) == "undecided"


def test_p99_with_too_few_requests_is_refused_naming_the_count() -> None:
    analysis = {"latency": [{"metric": "ttft", "percentile": "p99"}], "minRequests": 436}
    with pytest.raises(ValidationError, match=r"minRequests \(436\).*p99.*at least 437"):
        CanarySpec.model_validate({"steps": [{"weight": 10}], "analysis": analysis})
    analysis["minRequests"] = 437
    CanarySpec.model_validate({"steps": [{"weight": 10}], "analysis": analysis})


def test_slo_limits_count_as_judged_percentiles() -> None:
    analysis = {
        "slo": {"e2eMs": {"p99": 2000}},
        "minRequests": 100,
        "maxErrorPercentPoints": 5,
        "latency": [],
    }
    with pytest.raises(ValidationError, match="p99"):
        CanarySpec.model_validate({"steps": [{"weight": 10}], "analysis": analysis})


def test_gate_slo_reused_needs_its_requests_too() -> None:
    gate = {
        "thresholds": {"slo": {"ttftMs": {"p99": 500}}},
        "workload": {
            "synthetic": {"inputTokens": {"mean": 8}, "outputTokens": {"mean": 8}},
            "load": {"mode": "rate", "rates": [1]},
        },
    }
    canary: dict[str, Any] = {
        "steps": [{"weight": 10}],
        "analysis": {"useGateSlo": True, "minRequests": 100, "maxErrorPercentPoints": 5},
    }
    with pytest.raises(ValidationError, match=r"useGateSlo.*p99.*at least 437"):
        _spec(canary, gate)
    canary["analysis"]["useGateSlo"] = False
    assert _spec(canary, gate).rollout.canary is not None
    canary["analysis"] = {"useGateSlo": True, "minRequests": 437}
    assert _spec(canary, gate).rollout.canary is not None


@pytest.mark.parametrize(("points", "needed"), [(1.0, 368), (2.0, 183), (5.0, 72)])
def test_error_share_points_need_their_requests(points: float, needed: int) -> None:
    assert error_requests(points, 95) == needed
    assert observations_needed(points / 100, 0.95) == needed
    analysis = {"maxErrorPercentPoints": points, "minRequests": needed - 1, "latency": []}
    with pytest.raises(ValidationError, match=f"at least {needed}"):
        CanaryAnalysis.model_validate(analysis)
    CanaryAnalysis.model_validate({**analysis, "minRequests": needed})


def test_weights_must_rise() -> None:
    with pytest.raises(ValidationError, match="must rise"):
        CanarySpec.model_validate({"steps": [{"weight": 50}, {"weight": 50}]})


def test_gateway_mode_needs_a_route_and_only_it() -> None:
    with pytest.raises(ValidationError, match="gatewayAPI needs httpRoute"):
        CanarySpec.model_validate({"steps": [{"weight": 5}], "traffic": {"mode": "gatewayAPI"}})
    with pytest.raises(ValidationError, match="gatewayAPI needs httpRoute"):
        CanarySpec.model_validate(
            {"steps": [{"weight": 5}], "traffic": {"httpRoute": {"name": "r"}}}
        )
    traffic = {"mode": "gatewayAPI", "httpRoute": {"name": "r"}}
    canary = CanarySpec.model_validate({"steps": [{"weight": 5}], "traffic": traffic})
    assert canary.traffic.http_route is not None
    assert canary.traffic.http_route.name == "r"
