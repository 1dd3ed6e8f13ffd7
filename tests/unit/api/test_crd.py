"""The generated CRD: fresh, structural, described, valid, and as strict as the models.

A stale or non-structural CRD is found by the API server only at install time, on someone
else's cluster; these tests find it at commit time. The examples and hand-made bad objects
are checked against the generated openAPIV3Schema with a JSON-schema validator, so the CRD
refuses at ``kubectl apply`` what the operator would refuse later.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from pydantic import ValidationError

from builders import MODEL_30B, minimal_spec, resource
from vllm_operator.api import VLLMDeploymentSpec, VLLMDeploymentStatus
from vllm_operator.api.crd import CRD_FILENAME, crd_document, render_crd_yaml
from vllm_operator.api.spec import PerformanceMode
from vllm_operator.api.status import Phase
from vllm_operator.api.summary import BenchSummary, LatencyFigures

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "crds" / CRD_FILENAME
CHART_COPY = ROOT / "charts" / "vllm-operator" / "crds" / CRD_FILENAME
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

# Keys a structural schema node may carry (apiextensions v1 JSONSchemaProps we use).
_ALLOWED_KEYS = frozenset(
    {
        "type",
        "description",
        "properties",
        "required",
        "items",
        "additionalProperties",
        "enum",
        "default",
        "nullable",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "pattern",
        "format",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-validations",
        "x-kubernetes-int-or-string",  # IntOrString (disruption budgets): no type by design
    }
)


@functools.cache
def _schema() -> dict[str, Any]:
    version = crd_document()["spec"]["versions"][0]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _walk(node: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for name, sub in node.get("properties", {}).items():
        found += _walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        found += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        found += _walk(node["additionalProperties"], f"{path}{{}}")
    return found


def _structural_problems(schema: dict[str, Any]) -> list[str]:
    """Everything that makes a schema non-structural or undocumented, as messages."""
    problems: list[str] = []
    for path, node in _walk(schema, ""):
        unknown = set(node) - _ALLOWED_KEYS
        if unknown:
            problems.append(f"{path}: keys {sorted(unknown)} (e.g. $ref, anyOf, title)")
        untyped = ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string")
        if "type" not in node and not any(node.get(k) for k in untyped):
            problems.append(f"{path}: no type")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: properties and additionalProperties together")
        if isinstance(node.get("additionalProperties"), bool):
            problems.append(f"{path}: boolean additionalProperties")
        for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if key in node and (node[key] is not True or bound not in node):
                problems.append(f"{path}: {key} must be `true` next to {bound}")
        if "nullable" in node and node["nullable"] is not True:
            problems.append(f"{path}: nullable is not true")
        for name, sub in node.get("properties", {}).items():
            if not str(sub.get("description", "")).strip():
                problems.append(f"{path}.{name}: no description")
        for name in node.get("required", []):
            if name not in node.get("properties", {}):
                problems.append(f"{path}: required {name!r} is not a property")
        if "default" in node:
            try:
                _validator(node).validate(node["default"])
            except jsonschema.ValidationError as exc:
                problems.append(f"{path}: default {node['default']!r} is invalid: {exc.message}")
    return problems


def _to_draft4(node: dict[str, Any]) -> dict[str, Any]:
    """Kubernetes schema -> JSON Schema draft 4 (which shares its boolean exclusiveMinimum).

    ``nullable`` becomes a null type; objects with properties get ``additionalProperties:
    false``, standing in for the API server's pruning plus kubectl's strict field validation.
    """
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _to_draft4(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _to_draft4(value)
        elif key in ("nullable", "default") or key.startswith("x-kubernetes-"):
            continue
        else:
            out[key] = value
    if node.get("nullable"):
        out["type"] = [node["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def _validator(schema: dict[str, Any]) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(_to_draft4(schema))


def _errors(obj: dict[str, Any]) -> list[str]:
    return [
        f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in _validator(_schema()).iter_errors(obj)
    ]


def _cr(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = resource(spec, namespace="default")
    if status is not None:
        obj["status"] = status
    return obj


MINIMAL_SPEC = minimal_spec(MODEL_30B)

FULL_SPEC: dict[str, Any] = {
    "model": {
        "name": "meta-llama/Llama-3.3-70B-Instruct",
        "revision": "main",
        "servedModelName": "llama",
        "hfTokenSecret": {"name": "hf-token", "key": "token"},
        "weightsCache": {"claimName": "hf-cache", "subPath": "hub", "readOnly": True},
    },
    "engine": {
        "image": "vllm/vllm-openai@sha256:" + "a" * 64,
        "version": "0.17.0",
        "performanceMode": "throughput",
        "tensorParallelSize": 4,
        "maxModelLen": 32768,
        "gpuMemoryUtilization": 0.92,
        "extraArgs": ["--max-num-seqs", "256"],
        "env": [{"name": "VLLM_LOGGING_LEVEL", "value": "INFO"}],
        "libraryPathFix": "strip-cuda",
        "compileCache": {"claimName": "vllm-compile-cache"},
    },
    "resources": {"gpus": 4, "cpu": "16", "memory": "256Gi", "sharedMemory": "32Gi"},
    "replicas": 2,
    "scheduling": {
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"anything": ["goes", {"here": 1}]}},
        "runtimeClassName": "nvidia",
        "priorityClassName": "inference",
    },
    "service": {"port": 8000, "type": "ClusterIP"},
    "probes": {"warmupBudgetSeconds": 2400},
    "rollout": {"candidateReplicas": 1, "progressDeadlineSeconds": 5400, "onInconclusive": "hold"},
    "gate": {
        "enabled": True,
        "suite": {"configMap": "my-suite", "key": "suite.yaml"},
        "iterations": 5,
        "concurrency": [1, 2, 4, 8],
        "thresholds": {
            "quality": {"minPassed": 12, "mustPass": ["json-object"]},
            "latencyMs": {"short": 500, "medium": 1500, "long": 6000},
            "throughput": [{"concurrency": 8, "minTokensPerSecond": 800}],
            "maxRegressionPercent": 10,
        },
        "timeoutSeconds": 1800,
    },
}

SUMMARY: dict[str, Any] = {
    "schema": "vllm-operator.dev/bench-summary/v1",
    "model": "qwen",
    "latency": [
        {
            "promptClass": "medium",
            "requests": 5,
            "medianMs": 886.0,
            "ttftMs": 41.0,
            "outputTokens": 256,
            "e2eTokensPerSecond": 289.0,
            "decodeTokensPerSecond": 301.5,
        }
    ],
    "concurrency": [{"concurrency": 8, "aggregateTokensPerSecond": 1900.5, "requestsPerSecond": 3}],
    "quality": {"suite": "builtin:default", "passed": 13, "total": 13, "failed": []},
    "errors": {"timeout": 0},
    "verdict": "Passed",
    "reasons": [],
}


def _status(phase: str) -> dict[str, Any]:
    revision = {
        "revision": "0123456789",
        "image": "vllm/vllm-openai:v0.17.0",
        "version": "0.17.0",
        "performanceMode": "throughput",
        "keyFlags": ["--performance-mode", "throughput"],
        "replicas": 1,
        "readyReplicas": 1,
        "benchmark": SUMMARY,
        "since": "2026-11-29T15:00:00Z",
    }
    record = {
        "revision": "0123456789",
        "outcome": "Passed",
        "reasons": ["all thresholds met"],
        "summary": SUMMARY,
        "finishedAt": "2026-11-29T15:00:00Z",
        "decidedBy": "gate",
    }
    return {
        "observedGeneration": 3,
        "phase": phase,
        "message": "serving",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Serving",
                "message": "",
                "lastTransitionTime": "2026-11-29T15:00:00Z",
                "observedGeneration": 3,
            }
        ],
        "stable": revision,
        "candidate": {**revision, "revision": "abcdef0123"},
        "lastGate": record,
        "history": [record],
        "warnings": [],
    }


def test_committed_crd_and_chart_copy_are_fresh() -> None:
    fresh = render_crd_yaml()
    assert COMMITTED.read_text(encoding="utf-8") == fresh, "run `vllm-operator crds`"
    assert CHART_COPY.read_bytes() == COMMITTED.read_bytes(), "run `vllm-operator crds`"


def test_generation_is_deterministic_and_documented() -> None:
    first = render_crd_yaml()
    assert first == render_crd_yaml()
    assert first.startswith("# Generated by `vllm-operator crds`")
    assert yaml.safe_load(first) == crd_document()


def test_schema_is_structural_and_every_property_is_described() -> None:
    assert _structural_problems(_schema()) == []


def test_structural_check_catches_what_it_should() -> None:
    bad = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},  # no description
            "b": {"$ref": "#/x", "description": "ref"},
            "c": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "opt"},
            "d": {"type": "number", "exclusiveMinimum": 0, "description": "draft 2020 bound"},
            "e": {"type": "integer", "default": "x", "description": "bad default"},
        },
    }
    problems = "\n".join(_structural_problems(bad))
    for needle in (".a: no description", ".b: keys", ".c: keys", ".d: exclusiveMinimum", ".e:"):
        assert needle in problems


@pytest.mark.parametrize("version", ["1.30", kubernetes_validate.latest_version()])
def test_crd_passes_kubernetes_validate(version: str) -> None:
    kubernetes_validate.validate(crd_document(), version, strict=True)


def test_identity_scope_and_status_subresource() -> None:
    doc = crd_document()
    spec = doc["spec"]
    assert doc["metadata"]["name"] == "vllmdeployments.vllm-operator.dev"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["shortNames"] == ["vllmd"]
    assert spec["names"]["kind"] == "VLLMDeployment"
    (version,) = spec["versions"]
    assert version["subresources"] == {"status": {}}
    assert version["served"]
    assert version["storage"]


def test_name_length_rule_matches_the_renderer() -> None:
    from vllm_operator.render.names import MAX_NAME_LENGTH

    rule, separator = _schema()["x-kubernetes-validations"]
    assert rule["rule"] == f"size(self.metadata.name) <= {MAX_NAME_LENGTH}"
    assert str(MAX_NAME_LENGTH) in rule["message"]
    assert separator["rule"] == "!self.metadata.name.contains('--')"


def test_printer_columns_point_at_real_fields() -> None:
    version = crd_document()["spec"]["versions"][0]
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    for wanted in ("Model", "vLLM", "Phase", "Stable", "Candidate", "Age"):
        assert wanted in names
    for column in version["additionalPrinterColumns"]:
        path = column["jsonPath"].split("[")[0].strip(".").split(".")
        if path[0] == "metadata":
            continue
        node = _schema()
        for part in path:
            assert part in node.get("properties", {}), column
            node = node["properties"][part]


def test_enums_follow_the_literals() -> None:
    spec = _schema()["properties"]["spec"]
    mode = spec["properties"]["engine"]["properties"]["performanceMode"]
    assert mode["enum"] == list(PerformanceMode.__args__)
    assert mode["default"] == "balanced"
    phase = _schema()["properties"]["status"]["properties"]["phase"]
    assert phase["enum"] == list(Phase.__args__)


def test_bounds_are_kept_in_kubernetes_form() -> None:
    engine = _schema()["properties"]["spec"]["properties"]["engine"]["properties"]
    gmu = engine["gpuMemoryUtilization"]
    assert (gmu["minimum"], gmu["exclusiveMinimum"], gmu["maximum"]) == (0, True, 1)
    assert gmu["nullable"] is True
    assert engine["extraArgs"]["maxItems"] == 128
    assert engine["extraArgs"]["items"]["maxLength"] == 4096
    assert engine["env"]["items"]["properties"]["name"]["pattern"].startswith("^")
    scheduling = _schema()["properties"]["spec"]["properties"]["scheduling"]
    affinity = scheduling["properties"]["affinity"]
    assert affinity["x-kubernetes-preserve-unknown-fields"] is True


@pytest.mark.parametrize("spec", [MINIMAL_SPEC, FULL_SPEC], ids=["minimal", "full"])
def test_good_specs_pass_schema_and_models(spec: dict[str, Any]) -> None:
    assert _errors(_cr(spec)) == []
    VLLMDeploymentSpec.model_validate(spec)


@pytest.mark.parametrize("phase", list(Phase.__args__))
def test_status_written_by_the_operator_passes_the_schema(phase: str) -> None:
    # Read from the shape an older operator wrote (figures as objects), written as now.
    status = VLLMDeploymentStatus.model_validate(_status(phase)).to_wire()
    assert isinstance(status["stable"]["benchmark"], str)  # type: ignore[index]
    assert _errors(_cr(MINIMAL_SPEC, status)) == []


def test_model_dumped_status_passes_the_schema() -> None:
    wire = VLLMDeploymentStatus.model_validate(_status("Serving")).to_wire()
    assert _errors(_cr(MINIMAL_SPEC, wire)) == []


def test_summary_wire_spelling_is_e2e_not_e2E() -> None:
    """to_camel would write ``e2ETokensPerSecond``; the wire name is spelt as documented."""
    wire = BenchSummary.model_validate(SUMMARY).to_wire()
    latency = wire["latency"]
    assert isinstance(latency, list)
    assert latency[0]["e2eTokensPerSecond"] == 289.0
    assert "e2ETokensPerSecond" not in latency[0]
    by_name = LatencyFigures(
        prompt_class="short",
        requests=1,
        median_ms=10,
        ttft_ms=1,
        output_tokens=2,
        e2e_tokens_per_second=200,
        decode_tokens_per_second=111,
    )
    assert by_name.to_wire()["e2eTokensPerSecond"] == 200
    with pytest.raises(ValidationError):
        LatencyFigures.model_validate({**SUMMARY["latency"][0], "e2ETokensPerSecond": 1})


def _with(path: str, value: Any) -> dict[str, Any]:
    spec = copy.deepcopy(FULL_SPEC)
    *parents, last = path.split(".")
    node = spec
    for part in parents:
        node = node[part]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return spec


_DELETE = object()

BAD_SPECS: dict[str, dict[str, Any]] = {
    "unknown performance mode": _with("engine.performanceMode", "fast"),
    "negative replicas": _with("replicas", -1),
    "zero gpu memory utilisation (exclusive minimum)": _with("engine.gpuMemoryUtilization", 0),
    "gpu memory utilisation above 1": _with("engine.gpuMemoryUtilization", 1.5),
    "tensor parallel 0": _with("engine.tensorParallelSize", 0),
    "misspelt field": _with("engine.performanceMod", "throughput"),
    "literal token next to the secret ref": _with("model.hfTokenSecret.value", "hf_abc"),
    "missing model": _with("model", _DELETE),
    "missing image": _with("engine.image", _DELETE),
    "bad env name": _with("engine.env", [{"name": "1 bad", "value": "x"}]),
    "bad quantity": _with("resources.memory", "lots"),
    "bad library path fix": _with("engine.libraryPathFix", "strip"),
    "too many extra args": _with("engine.extraArgs", ["--x"] * 129),
    "port out of range": _with("service.port", 70000),
    "gate timeout below a minute": _with("gate.timeoutSeconds", 5),
    "regression above 100 percent": _with("gate.thresholds.maxRegressionPercent", 150),
    "bad service type": _with("service.type", "ExternalName"),
    "null replicas": _with("replicas", None),
}


@pytest.mark.parametrize("spec", BAD_SPECS.values(), ids=BAD_SPECS.keys())
def test_bad_specs_fail_schema_and_models(spec: dict[str, Any]) -> None:
    assert _errors(_cr(spec)), "the CRD schema accepted it"
    with pytest.raises(ValidationError):
        VLLMDeploymentSpec.model_validate(spec)


def test_unknown_phase_fails() -> None:
    assert _errors(_cr(MINIMAL_SPEC, _status("Exploded")))


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_pass_the_generated_schema(example: Path) -> None:
    for doc in yaml.safe_load_all(example.read_text(encoding="utf-8")):
        if doc and doc.get("kind") == "VLLMDeployment":
            assert _errors(doc) == [], example.name
