"""The operator judges with the widest of the spec's trial plan and the summary's.

Each look's interval is widened for the plan's number of looks (``gate.sequential``), so a
summary that claims fewer looks than the spec allowed would narrow its own intervals. The
operator's verdict (``rollout.trust.judge``) takes whichever plan allows more looks.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from rollout_world import World, spec, summary

from vllm_operator.api.summary import BenchSummary, TrialPlan

V16_EAGER = spec(image="vllm/vllm-openai:v0.16.0", mode="eager")


def gate_spec(max_trials: int) -> dict[str, Any]:
    gate = {"thresholds": {"maxRegressionPercent": 10}, "trials": 3, "maxTrials": max_trials}
    return spec(image="vllm/vllm-openai:v0.17.0", mode="throughput", gate=gate)


def with_trials(result: BenchSummary, logs: tuple[float, ...], plan: TrialPlan) -> BenchSummary:
    """``result`` with three trials at 8 streams (log ratios ``logs``) and ``plan`` claimed."""
    levels = [
        f.model_copy(
            update={
                "trials": [
                    f.aggregate_tokens_per_second * math.exp(x if f.concurrency == 8 else 0.0)
                    for x in logs
                ]
            }
        )
        for f in result.concurrency
    ]
    return result.model_copy(update={"concurrency": levels, "trial_plan": plan})


def gate_outcome(spec_max_trials: int, claimed: TrialPlan) -> dict[str, Any]:
    w = World(V16_EAGER)
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary())
    w.step()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"
    w.set_spec(gate_spec(spec_max_trials))
    w.start_benchmark()
    assert "--baseline-url" in w.job_args()
    assert w.arg("--max-trials") == str(spec_max_trials)
    # -3% +- 1.5%: within -10% at 95% (one look), straddling at 1 - 0.025/7 (eight looks)
    cand = with_trials(summary(), (-0.045, -0.03, -0.015), claimed)
    base = with_trials(summary(), (0.0, 0.0, 0.0), claimed)
    w.finish_job(cand, baseline=base)  # the bench's own verdict: Passed, exit 0
    w.step()
    gate: dict[str, Any] = w.status["lastGate"]
    return gate


def test_a_summary_claiming_one_look_cannot_narrow_the_specs_eight() -> None:
    gate = gate_outcome(10, TrialPlan(min_trials=3, max_trials=3))
    assert gate["outcome"] == "Inconclusive", gate["reasons"]
    assert any("widened for 8 looks" in r for r in gate["reasons"]), gate["reasons"]


def test_one_look_on_both_sides_is_judged_at_the_stated_confidence() -> None:
    gate = gate_outcome(3, TrialPlan(min_trials=3, max_trials=3))
    assert gate["outcome"] == "Passed", gate["reasons"]
    assert not any("widened" in r for r in gate["reasons"])


@pytest.mark.parametrize("spec_max", [3, 10])
def test_a_summary_claiming_more_looks_than_the_spec_is_judged_by_its_own(spec_max: int) -> None:
    gate = gate_outcome(spec_max, TrialPlan(min_trials=3, max_trials=10))
    assert gate["outcome"] == "Inconclusive", gate["reasons"]
    assert any("widened for 8 looks" in r for r in gate["reasons"])
