"""A ``mustPass`` name the suite does not have is refused where the suite is known (issue 38
hole 8): at apply (the operator's spec check, so InvalidSpec), in ``render`` and in
``bench``, each with "did you mean". On 953c1d3 ``mustPass: [code1]`` (a typo of ``code-1``)
was accepted and never enforced. A ConfigMap suite's ids are unknown at apply: accepted
there, refused by bench and judge at run time (``test_judge_inputs``, ``test_bench_cli``).
"""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest
import yaml
from rollout_world import World, spec

import builders
from vllm_operator.api.gate_spec import BUILTIN_TEST_IDS
from vllm_operator.api.resource import parse_vllm_deployment
from vllm_operator.bench.quality.suite import load_suite
from vllm_operator.commands.render import run
from vllm_operator.errors import SpecErrors


def cr(gate: dict[str, Any]) -> dict[str, Any]:
    doc = builders.resource(builders.minimal_spec(builders.MODEL_30B))
    doc["spec"]["gate"] = gate
    return doc


def must_pass(*names: str, **suite: Any) -> dict[str, Any]:
    gate: dict[str, Any] = {"thresholds": {"quality": {"mustPass": list(names)}}}
    if suite:
        gate["suite"] = suite
    return gate


def test_the_core_s_copy_of_the_builtin_ids_is_the_suite_s() -> None:
    assert tuple(load_suite("builtin:default").ids) == BUILTIN_TEST_IDS


def test_a_misspelt_must_pass_name_is_refused_with_did_you_mean() -> None:
    with pytest.raises(SpecErrors) as caught:
        parse_vllm_deployment(cr(must_pass("code1", "classify-1")))
    (error,) = caught.value.errors
    assert error.field == "spec.gate"
    assert "suite builtin:default does not have: 'code1' (did you mean 'code-1'?)" in str(error)


def test_names_the_suite_has_and_a_config_map_suite_are_accepted() -> None:
    parse_vllm_deployment(cr(must_pass("code-1", "classify-1")))
    # A ConfigMap's suite is read by the Job: its names are checked by bench, not here.
    parse_vllm_deployment(cr(must_pass("anything", configMap="my-suite")))


def test_must_pass_with_no_suite_is_refused() -> None:
    with pytest.raises(SpecErrors) as caught:
        parse_vllm_deployment(cr(must_pass("code-1", builtin="none")))
    assert "suite builtin:none does not have: 'code-1'" in str(caught.value)


def test_render_refuses_it_with_exit_2() -> None:
    out, err = io.StringIO(), io.StringIO()
    doc = yaml.safe_dump(cr(must_pass("code1")))
    code = run(["-f", "-"], "vllm-operator render", io.StringIO(doc), out, err)
    assert code == 2
    assert out.getvalue() == ""
    assert "(did you mean 'code-1'?)" in err.getvalue()


def test_the_operator_stops_on_it_as_an_invalid_spec() -> None:
    w = World(spec(image="vllm/vllm-openai:v0.17.0", mode="throughput"))
    doc = copy.deepcopy(w.body["spec"])
    doc["gate"] = must_pass("code1")
    w.set_spec(doc)
    p = w.step()
    assert p.actions == ()
    assert w.condition("Stalled")["reason"] == "InvalidSpec"
    assert "did you mean 'code-1'?" in w.condition("Stalled")["message"]
