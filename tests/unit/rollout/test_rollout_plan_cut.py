"""The operator judges a load gate with its plan cut to the trials the deadline can give.

The bench cuts ``maxTrials`` to the most trials a level can get before its deadline
(``gate.budget.reachable_plan``) and judges each look for that many looks; the operator cuts
its spec's plan the same way (``gate.decidable.gate_plan``) before taking the wider of it
and the summary's. Uncut, the spec's 3-10 would widen every look for 8 looks and overrule
the bench's 4: the kit's plan (8 and 24 req/s, 20 s levels, ``timeoutSeconds: 480``, a twin)
with 0 of 600 requests above the TTFT limit at 8 req/s after 3 trials is within at 99.17%
(546 needed) but not at 99.64% (630 needed).
"""

from __future__ import annotations

from typing import Any

from rollout_world import World, spec, summary

from vllm_operator.api.summary import BenchSummary, LoadLevelFigures, LoadSweep, TrialPlan
from vllm_operator.api.tail_counts import TailCounts

V16_EAGER = spec(image="vllm/vllm-openai:v0.16.0", mode="eager")


def load_gate() -> dict[str, Any]:
    gate = {
        "timeoutSeconds": 480,
        "suite": {"builtin": "none"},
        "baseline": {"mode": "twin"},
        "trials": 3,
        "maxTrials": 10,
        "workload": {
            "synthetic": {"inputTokens": {"mean": 512}, "outputTokens": {"mean": 128}},
            "load": {"mode": "rate", "rates": [8, 24], "secondsPerLevel": 20},
        },
        "thresholds": {"slo": {"ttftMs": {"p99": 1000}}},
    }
    return spec(image="vllm/vllm-openai:v0.17.0", mode="throughput", gate=gate)


def measured(per_trial: dict[float, int]) -> BenchSummary:
    levels = [
        LoadLevelFigures(
            level=level,
            requests=3 * n,
            tails={"ttft.p99": TailCounts(limit=1000.0, total=[n] * 3, above=[0] * 3)},
            goodput_percent=[100.0] * 3,
            error_percent=[0.0] * 3,
        )
        for level, n in per_trial.items()
    ]
    return summary().model_copy(
        update={
            "load": LoadSweep(mode="rate", levels=levels),
            "trial_plan": TrialPlan(min_trials=3, max_trials=6),
        }
    )


def test_the_operator_judges_a_load_gate_with_the_plan_its_deadline_allows() -> None:
    w = World(V16_EAGER)
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary())
    w.step()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"
    w.set_spec(load_gate())
    w.start_benchmark()
    assert "--baseline-url" in w.job_args()
    assert w.arg("--max-trials") == "10"  # the bench cuts it with its own deadline
    w.finish_job(measured({8.0: 200, 24.0: 480}))
    w.step()
    gate: dict[str, Any] = w.status["lastGate"]
    assert gate["outcome"] == "Passed", gate["reasons"]
    assert any("widened for 4 looks" in r for r in gate["reasons"]), gate["reasons"]
