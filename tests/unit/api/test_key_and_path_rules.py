"""Keys, sub-paths and the GPU resource name follow Kubernetes' own rules.

A suite ``key`` becomes a file name in the benchmark pod's ConfigMap volume and a
``subPath`` a directory inside a volume: ``..`` or an absolute path there would reach
outside the mount. ``gpuResourceName: memory`` would request memory instead of a GPU. Each
is refused by the models (naming the field), by ``render`` (exit 2) and, where a pattern
or CEL rule can say it, by the generated CRD.
"""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest
import yaml

from builders import resource
from devcluster.schema import validate
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.api.crd import crd_document
from vllm_operator.commands.render import run
from vllm_operator.errors import SpecErrors


def base() -> dict[str, Any]:
    return resource()


def with_value(path: str, value: Any) -> dict[str, Any]:
    raw = base()
    node = raw
    *parents, leaf = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return raw


SUITE_KEY = "spec.gate.suite.key"
TOKEN_KEY = "spec.model.hfTokenSecret.key"
API_KEY = "spec.engine.apiKeySecret.key"
SUB_PATH = "spec.model.weightsCache.subPath"
CACHE_SUB_PATH = "spec.engine.compileCache.subPath"
DATASET_PATH = "spec.gate.workload.dataset.path"
GPU = "spec.resources.gpuResourceName"


def case(field: str, value: Any) -> dict[str, Any]:
    """A resource with ``value`` at ``field`` (its parent objects made valid)."""
    raw = base()
    if field == SUITE_KEY:
        raw["spec"]["gate"] = {"suite": {"configMap": "suite", "key": value}}
    elif field == TOKEN_KEY:
        raw["spec"]["model"]["hfTokenSecret"] = {"name": "hf", "key": value}
    elif field == API_KEY:
        raw["spec"]["engine"]["apiKeySecret"] = {"name": "api", "key": value}
    elif field == SUB_PATH:
        raw["spec"]["model"]["weightsCache"] = {"claimName": "hf", "subPath": value}
    elif field == CACHE_SUB_PATH:
        raw["spec"]["engine"]["compileCache"] = {"claimName": "cc", "subPath": value}
    elif field == DATASET_PATH:
        dataset = {"persistentVolumeClaim": "data", "path": value}
        raw["spec"]["gate"] = {"workload": {"dataset": dataset}}
    elif field == GPU:
        raw["spec"]["resources"] = {"gpuResourceName": value}
    return raw


KEY_FIELDS = (SUITE_KEY, TOKEN_KEY, API_KEY)
BAD_KEYS = ["/etc/passwd", "../x", "..", ".", "..hidden", "a/b", "a b", "", "k" * 254, "ключ"]
GOOD_KEYS = ["suite.yaml", ".hidden", "a..b", "A-b_c.9", "k" * 253]
PATH_FIELDS = (SUB_PATH, CACHE_SUB_PATH, DATASET_PATH)
CONTROL = ["a\x00b.jsonl", "data\nset.jsonl", "tab\t", "del\x7f"]
BAD_PATHS = ["/etc", "..", "../x", "a/../../b", "a/..", "/", *CONTROL]
GOOD_PATHS = ["models/qwen", "./a", "a/..b", "...", "a//b/"]
BAD_GPUS = [
    "memory",
    "cpu",
    "ephemeral-storage",
    "hugepages-2Mi",
    "gpu",
    "kubernetes.io/gpu",
    "example.kubernetes.io/gpu",
    "requests.nvidia.com/gpu",
    "nvidia.com/" + "g" * 64,
    "Nvidia.com/gpu",
    "nvidia.com/",
]
GOOD_GPUS = ["nvidia.com/gpu", "amd.com/gpu", "vllm-operator.dev/sim-gpu", "nvidia.com/" + "g" * 63]

INVALID = (
    [(f, v) for f in KEY_FIELDS for v in BAD_KEYS]
    + [(f, v) for f in PATH_FIELDS for v in BAD_PATHS]
    + [(GPU, v) for v in BAD_GPUS]
)
VALID = (
    [(f, v) for f in KEY_FIELDS for v in GOOD_KEYS]
    + [(f, v) for f in PATH_FIELDS for v in GOOD_PATHS]
    + [(GPU, v) for v in GOOD_GPUS]
)


@pytest.mark.parametrize(("field", "value"), INVALID)
def test_refused_by_the_models_naming_the_field(field: str, value: str) -> None:
    with pytest.raises(SpecErrors) as info:
        parse_vllm_deployment(case(field, value))
    assert [e.field for e in info.value.errors] == [field], str(info.value)


@pytest.mark.parametrize(("field", "value"), VALID)
def test_accepted_by_the_models(field: str, value: str) -> None:
    parse_vllm_deployment(case(field, value))


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        (SUITE_KEY, "/etc/passwd", "no '/'"),
        (TOKEN_KEY, "..", "not '.' or '..'"),
        (SUB_PATH, "/etc", "is absolute"),
        (CACHE_SUB_PATH, "a/../../b", "would leave the volume"),
        (GPU, "memory", "native resource name"),
        (GPU, "kubernetes.io/gpu", "reserved by Kubernetes"),
    ],
)
def test_render_exits_2_with_the_field_and_the_fix(field: str, value: str, needle: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run(["-f", "-"], "render", io.StringIO(yaml.safe_dump(case(field, value))), out, err)
    assert code == 2
    assert out.getvalue() == ""
    lines = [line for line in err.getvalue().splitlines() if line.startswith(f"{field}: ")]
    assert lines, err.getvalue()
    assert needle in lines[0], err.getvalue()


def _schema() -> dict[str, Any]:
    doc = crd_document()
    schema: dict[str, Any] = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize(
    ("field", "value"),
    [(f, v) for f, v in INVALID if f in KEY_FIELDS or (f == GPU and "/" not in v)],
)
def test_the_crd_pattern_refuses_what_the_models_refuse(field: str, value: str) -> None:
    errors = validate(_schema(), case(field, value))
    assert any(str(e).startswith(field) for e in errors), errors


@pytest.mark.parametrize("value", CONTROL)
@pytest.mark.parametrize("field", PATH_FIELDS)
def test_a_path_with_a_control_character_is_refused_by_the_crd_pattern(
    field: str, value: str
) -> None:
    errors = validate(_schema(), case(field, value))
    assert any(str(e).startswith(field) for e in errors), errors
    with pytest.raises(SpecErrors, match="has a control character"):
        parse_vllm_deployment(case(field, value))


@pytest.mark.parametrize(("field", "value"), VALID)
def test_the_crd_pattern_accepts_what_the_models_accept(field: str, value: str) -> None:
    assert validate(_schema(), copy.deepcopy(case(field, value))) == []


def test_the_crd_carries_cel_rules_for_what_a_pattern_cannot_say() -> None:
    spec = _schema()["properties"]["spec"]["properties"]
    sub_path = spec["model"]["properties"]["weightsCache"]["properties"]["subPath"]
    (rule,) = sub_path["x-kubernetes-validations"]
    assert "!self.startsWith('/')" in rule["rule"]
    assert "self.contains('/../')" in rule["rule"]
    gpu = spec["resources"]["properties"]["gpuResourceName"]
    (rule,) = gpu["x-kubernetes-validations"]
    assert rule["rule"] == "!self.contains('kubernetes.io/') && !self.startsWith('requests.')"
