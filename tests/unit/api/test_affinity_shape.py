"""``spec.scheduling.affinity`` must be a core/v1 Affinity, checked before any Deployment.

The CRD accepts any map there; a wrong one used to be refused only when the operator
created the Deployment, on every pass. Each case names the field and says what to write.
"""

from __future__ import annotations

from typing import Any

import pytest

import builders
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.api.resource import parse_spec
from vllm_operator.errors import SpecErrors

A = "spec.scheduling.affinity"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def resource(affinity: Any, **spec: Any) -> dict[str, Any]:
    return builders.resource(
        {**builders.minimal_spec(), "scheduling": {"affinity": affinity}, **spec}
    )


def node_pref(weight: Any) -> dict[str, Any]:
    return {"nodeAffinity": {PREF: [{"weight": weight, "preference": {}}]}}


def requirement(operator: str, values: list[str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "gpu", "operator": operator, "values": values}]}
    return {"nodeAffinity": {REQ: {"nodeSelectorTerms": [term]}}}


REQ_PATH = f"{A}.nodeAffinity.{REQ}.nodeSelectorTerms[0].matchExpressions[0]"

CASES = [
    ({"nodeAffinity": "gpu"}, f"{A}.nodeAffinity", "must be a map (NodeAffinity)"),
    ({"nodeAfinity": {}}, f"{A}.nodeAfinity", "is not a field of Affinity"),
    ({"nodeAffinity": {REQ: {}}}, f"{A}.nodeAffinity.{REQ}.nodeSelectorTerms", "is required"),
    ({"podAffinity": {REQ: [{}]}}, f"{A}.podAffinity.{REQ}[0].topologyKey", "is required"),
    ({"podAntiAffinity": {REQ: {}}}, f"{A}.podAntiAffinity.{REQ}", "must be a list"),
    (node_pref(0), f"{A}.nodeAffinity.{PREF}[0].weight", "use 1 to 100"),
    (node_pref(101), f"{A}.nodeAffinity.{PREF}[0].weight", "use 1 to 100"),
    (node_pref("10"), f"{A}.nodeAffinity.{PREF}[0].weight", "not an integer"),
    (requirement("Equals", ["a"]), f"{REQ_PATH}.operator", "use one of"),
    (requirement("In", []), f"{REQ_PATH}.values", "is empty for In"),
    (requirement("Exists", ["a"]), f"{REQ_PATH}.values", "must be empty for Exists"),
    (
        {"podAffinity": {REQ: [{"topologyKey": "z", "labelSelector": {"matchLabels": {"a": 1}}}]}},
        f"{A}.podAffinity.{REQ}[0].labelSelector.matchLabels",
        "map of strings",
    ),
    (
        {"podAffinity": {REQ: [{"topologyKey": 7}]}},
        f"{A}.podAffinity.{REQ}[0].topologyKey",
        "not a string",
    ),
]


@pytest.mark.parametrize(("affinity", "field", "needle"), CASES)
def test_wrong_affinity_is_refused_naming_the_field(affinity: Any, field: str, needle: str) -> None:
    with pytest.raises(SpecErrors) as info:
        parse_vllm_deployment(resource(affinity))
    found = {e.field: f"{e.message} ({e.fix})" for e in info.value.errors}
    assert field in found, found
    assert needle in found[field]


@pytest.mark.parametrize("weight", [1, 100])
def test_weight_bounds_are_inclusive(weight: int) -> None:
    parse_vllm_deployment(resource(node_pref(weight)))


@pytest.mark.parametrize(
    ("operator", "values"),
    [("In", ["a"]), ("NotIn", ["a"]), ("Exists", []), ("DoesNotExist", []), ("Gt", ["1"])],
)
def test_valid_requirements_pass(operator: str, values: list[str]) -> None:
    parse_vllm_deployment(resource(requirement(operator, values)))


def test_affinity_and_other_field_errors_are_reported_together() -> None:
    raw = resource({"nodeAfinity": {}}, replicas=-1)
    with pytest.raises(SpecErrors) as info:
        parse_vllm_deployment(raw)
    assert {e.field for e in info.value.errors} == {f"{A}.nodeAfinity", "spec.replicas"}
    with pytest.raises(SpecErrors) as info:
        parse_spec(raw["spec"])
    assert {e.field for e in info.value.errors} == {f"{A}.nodeAfinity", "spec.replicas"}


@pytest.mark.parametrize(
    ("affinity", "field", "needle"), [c for c in CASES if "is not a field" not in c[2]]
)
def test_the_embedded_api_server_refuses_them_too(affinity: Any, field: str, needle: str) -> None:
    """The check exists because the API server refuses these in a pod template; the
    embedded API's ValidateAffinity agrees (400 when it cannot decode, else 422). Unknown
    fields are the exception: a real server drops them from built-in objects."""
    from devcluster import validation
    from devcluster.resources import Registry

    deployments = Registry().get("apps", "v1", "deployments")
    assert deployments is not None
    template = {
        "metadata": {"labels": {"app": "q"}},
        "spec": {"containers": [{"name": "c", "image": "i"}], "affinity": affinity},
    }
    body = {
        "metadata": {"name": "q"},
        "spec": {"selector": {"matchLabels": {"app": "q"}}, "template": template},
    }
    try:
        errors = validation.validate(deployments, body)
    except validation.DecodeError:
        return
    assert errors, affinity
