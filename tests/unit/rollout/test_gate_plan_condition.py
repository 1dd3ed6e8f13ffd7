"""A gate plan that cannot decide a tail limit in its time: a GatePlanDecides condition and
one GatePlanTooShort Event per limit and generation (issue 29, ``rollout/gate_plan.py``)."""

from __future__ import annotations

from typing import Any

from rollout_world import World, spec


def slo_gate(timeout: int) -> dict[str, Any]:
    return {
        "timeoutSeconds": timeout,
        "workload": {
            "synthetic": {"inputTokens": {"mean": 512}, "outputTokens": {"mean": 128}},
            "load": {"mode": "rate", "rates": [8, 24], "secondsPerLevel": 20},
        },
        "thresholds": {"slo": {"ttftMs": {"p99": 1000}}},
    }


def test_a_plan_too_short_is_a_condition_and_one_event_per_limit_and_generation() -> None:
    w = World(spec(gate=slo_gate(160)))
    p = w.step()
    warned = [e for e in p.events if e.reason == "GatePlanTooShort"]
    assert [e.type for e in warned] == ["Warning", "Warning"]
    assert "ttft p99 at 8 req/s cannot be decided" in warned[0].message
    assert "it needs timeoutSeconds >= 170" in warned[0].message
    assert "ttft p99 at 24 req/s" in warned[1].message
    cond = w.condition("GatePlanDecides")
    assert (cond["status"], cond["reason"]) == ("False", "TooFewObservations")
    assert warned[0].message in cond["message"]
    assert warned[1].message in cond["message"]
    assert not any(e.reason == "GatePlanTooShort" for e in w.step().events)
    w.set_spec(spec(gate=slo_gate(229)))  # a new generation, still one second short at 24/s
    again = [e for e in w.step().events if e.reason == "GatePlanTooShort"]
    assert len(again) == 1
    assert "at 24 req/s" in again[0].message
    assert "it needs timeoutSeconds >= 230" in again[0].message


def test_a_plan_that_can_decide_has_no_condition() -> None:
    w = World(spec(gate=slo_gate(484)))
    p = w.step()
    assert not any(e.reason == "GatePlanTooShort" for e in p.events)
    assert not any(c["type"] == "GatePlanDecides" for c in w.status["conditions"])


def test_a_plan_compared_with_the_twin_states_its_power_in_the_condition() -> None:
    gate = slo_gate(484)
    gate["thresholds"]["maxRegressionPercent"] = 10
    w = World(spec(gate=gate))
    w.step()
    cond = w.condition("GatePlanDecides")
    assert (cond["status"], cond["reason"]) == ("True", "PowerStated")
    assert "detects ttft p99" not in cond["message"]
    assert "detects TTFT p99 +" in cond["message"]
    assert "ms or more at 8 req/s" in cond["message"]
    assert "ms or more at 24 req/s" in cond["message"]


def test_a_plan_too_short_states_its_power_after_the_warning() -> None:
    gate = slo_gate(200)
    gate["thresholds"]["maxRegressionPercent"] = 10
    w = World(spec(gate=gate))
    w.step()
    cond = w.condition("GatePlanDecides")
    assert (cond["status"], cond["reason"]) == ("False", "TooFewObservations")
    assert cond["message"].index("cannot be decided") < cond["message"].index("detects TTFT")
