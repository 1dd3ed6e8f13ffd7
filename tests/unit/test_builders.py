"""The one builder of test resources builds what its name says: a valid, minimal resource."""

from __future__ import annotations

import copy

import pytest

from builders import API_VERSION, KIND, minimal_spec, resource
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.errors import SpecErrors


def test_the_minimal_resource_is_valid_and_named_as_asked() -> None:
    raw = resource(namespace="ml", generation=3)
    assert (raw["apiVersion"], raw["kind"]) == (API_VERSION, KIND)
    assert raw["metadata"] == {"name": "qwen", "namespace": "ml", "generation": 3}
    vd = parse_vllm_deployment(raw)
    assert vd.spec.engine.image == minimal_spec()["engine"]["image"]


@pytest.mark.parametrize(("section", "field"), [("model", "name"), ("engine", "image")])
def test_the_minimal_spec_has_nothing_to_spare(section: str, field: str) -> None:
    raw = resource()
    parse_vllm_deployment(copy.deepcopy(raw))
    del raw["spec"][section][field]
    with pytest.raises(SpecErrors):
        parse_vllm_deployment(raw)


def test_each_call_builds_a_fresh_object() -> None:
    first = resource()
    first["spec"]["engine"]["image"] = "changed"
    assert resource()["spec"]["engine"]["image"] != "changed"
