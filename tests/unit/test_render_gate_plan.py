"""`vllm-operator render` warns on stderr when the gate's plan cannot decide a tail limit in
its time, and still renders (exit 0): a warning, not an invalid spec (issue 29)."""

from __future__ import annotations

import io
import re
from typing import Any

import yaml

import builders
from vllm_operator.api.resource import parse_vllm_deployment
from vllm_operator.commands.render import run
from vllm_operator.rollout.gate_plan import plan_power_notes


def cr(timeout: int) -> dict[str, Any]:
    doc = builders.resource(builders.minimal_spec(builders.MODEL_30B))
    doc["spec"]["gate"] = {
        "timeoutSeconds": timeout,
        "workload": {
            "synthetic": {"inputTokens": {"mean": 512}, "outputTokens": {"mean": 128}},
            "load": {"mode": "rate", "rates": [8, 24], "secondsPerLevel": 20},
        },
        "thresholds": {"slo": {"ttftMs": {"p99": 1000}, "itlMs": {"p99": 100}}},
    }
    return doc


def render(doc: dict[str, Any]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["-f", "-"], "vllm-operator render", io.StringIO(yaml.safe_dump(doc)), out, err)
    return code, out.getvalue(), err.getvalue()


def test_render_warns_naming_the_level_the_limit_and_the_fix() -> None:
    # 160 s: 2 trials of 8 req/s fit; the plan is cut to one look (gate.budget.reachable_plan)
    code, out, err = render(cr(160))
    assert code == 0
    assert "kind: Job" in out
    lines = [line for line in err.splitlines() if "gate plan:" in line]
    assert len(lines) == 3, err
    assert lines[0].startswith("warning: -: VLLMDeployment")
    assert "ttft p99 at 8 req/s cannot be decided" in lines[0]
    assert "at least 368 requests with none above it (95% look)" in lines[0]
    assert lines[0].endswith("it needs timeoutSeconds >= 170")
    assert "itl p99 at 24 req/s" in lines[2]
    assert "gaps" in lines[2]


def test_render_is_quiet_when_the_plan_can_decide() -> None:
    code, _, err = render(cr(500))
    assert code == 0
    assert "gate plan:" not in err


def _canary(replicas: int, weights: list[int], mode: str = "replicas") -> dict[str, Any]:
    doc = cr(500)
    doc["spec"]["replicas"] = replicas
    traffic: dict[str, Any] = {"mode": mode}
    if mode == "gatewayAPI":
        traffic["httpRoute"] = {"name": "web"}
    doc["spec"]["rollout"] = {
        "canary": {"steps": [{"weight": w} for w in weights], "traffic": traffic}
    }
    return doc


def test_render_warns_when_whole_replicas_cannot_make_a_canary_weight() -> None:
    # One stable pod: 10% is one candidate pod, half the traffic; 50% is made exactly.
    code, _, err = render(_canary(1, [10, 50]))
    assert code == 0
    lines = [line for line in err.splitlines() if "rollout.canary.steps" in line]
    assert len(lines) == 1, err
    assert "steps[0]: weight 10% cannot be made of whole replicas beside 1 stable pod" in lines[0]
    assert "1 candidate pod(s) get 50% of the serving traffic" in lines[0]
    # Four stable pods make 20% and 50% exactly; gatewayAPI makes any weight.
    assert "rollout.canary.steps" not in render(_canary(4, [20, 50]))[2]
    assert "rollout.canary.steps" not in render(_canary(1, [10, 50], "gatewayAPI"))[2]


def test_render_states_the_power_of_each_figure_compared_with_the_twin() -> None:
    doc = cr(500)
    doc["spec"]["gate"]["thresholds"]["maxRegressionPercent"] = 10
    code, out, err = render(doc)
    assert code == 0
    assert "kind: Job" in out
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 4, err  # TTFT and ITL p99 at 8 and 24 req/s
    assert not any(line.startswith("warning: ") for line in err.splitlines())
    wanted = plan_power_notes(parse_vllm_deployment(doc).spec.gate)
    assert [line.split("gate plan: ", 1)[1] for line in notes] == wanted
    assert re.fullmatch(r"detects TTFT p99 \+\d+ ms or more at 8 req/s", wanted[0])
    assert re.fullmatch(r"detects ITL p99 \+\d+ ms or more at 24 req/s", wanted[3])
    # a later deadline gives 24 req/s more trials: a smaller regression is detected
    doc["spec"]["gate"]["timeoutSeconds"] = 900
    _, _, later = render(doc)
    number = re.compile(r"TTFT p99 \+(\d+) ms or more at 24")
    before = int(next(m.group(1) for m in map(number.search, notes) if m))
    after = int(next(m.group(1) for m in map(number.search, later.splitlines()) if m))
    assert after < before
