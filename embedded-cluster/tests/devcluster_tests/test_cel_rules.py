"""The CRD's CEL rules (``x-kubernetes-validations``), run by the embedded API.

Every rule of the project's generated CRD is run here on an object it is written to refuse
(through the real kubectl, so the 422 is what a user reads) and on one it accepts; a rule
added to the CRD without a case here fails ``test_every_rule_has_a_case``. Transition rules
(``oldSelf``), ``messageExpression``, ``reason``, ``fieldPath``, ratcheting, runtime errors
and rules that do not compile are checked on a small CRD of their own.
"""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import DevCluster
from devcluster.apierrors import ApiError
from devcluster.cel import compile_schema, validate

from .crd import API_VERSION, PLURAL, widget, widget_crd
from .test_clients import kubectl_binary
from .test_project_crd import load_crd

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run(kubeconfig: Path, tmp_path: Path) -> Kubectl:
    binary = kubectl_binary()

    def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "c"), *args],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
            input=stdin,
        )

    return kubectl


# --- the project's CRD ------------------------------------------------------------------
def _rules(schema: Any, path: str = "") -> list[tuple[str, str]]:
    """(schema path, rule) of every rule in a schema."""
    found: list[tuple[str, str]] = []
    if not isinstance(schema, dict):
        return found
    found += [(path, str(r["rule"])) for r in schema.get("x-kubernetes-validations") or []]
    for key, sub in (schema.get("properties") or {}).items():
        found += _rules(sub, f"{path}.{key}" if path else key)
    if isinstance(schema.get("additionalProperties"), dict):
        found += _rules(schema["additionalProperties"], f"{path}[*]")
    found += _rules(schema.get("items"), f"{path}[]")
    return found


@dataclass(frozen=True)
class RuleCase:
    """One rule: a change that breaks it (and what the server says) and one that keeps it."""

    id: str
    rule_path: str  # where the rule sits in the schema ("" for the root)
    rule_start: str  # the rule's text starts so (picks one of two rules on a node)
    invalid: Callable[[dict[str, Any]], None]
    valid: Callable[[dict[str, Any]], None]
    error: str  # "<field>: <body>" as kubectl prints it


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = obj
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = copy.deepcopy(value)

    return apply


_SUBPATH = "subPath must be a relative path without '..' elements"
CASES = [
    RuleCase(
        "name-length",
        "",
        "size(",
        _set("metadata.name", "n" * 43),
        _set("metadata.name", "n" * 42),
        "<nil>: Invalid value: metadata.name must be at most 42 characters",
    ),
    RuleCase(
        "name-double-dash",
        "",
        "!self.metadata.name.contains",
        _set("metadata.name", "a--b"),
        _set("metadata.name", "a-b"),
        "<nil>: Invalid value: metadata.name must not contain '--'",
    ),
    RuleCase(
        "autoscaling-min-max",
        "spec.autoscaling",
        "!has(self.minReplicas)",
        _set("spec.autoscaling", {"minReplicas": 3, "maxReplicas": 2}),
        _set("spec.autoscaling", {"minReplicas": 2, "maxReplicas": 2}),
        "spec.autoscaling: Invalid value: minReplicas must not exceed maxReplicas",
    ),
    RuleCase(
        "autoscaling-keda-prometheus",
        "spec.autoscaling",
        "!has(self.engine)",
        _set("spec.autoscaling", {"engine": "keda", "maxReplicas": 2}),
        _set(
            "spec.autoscaling",
            {"engine": "keda", "maxReplicas": 2, "prometheus": {"serverAddress": "http://p:9090"}},
        ),
        "spec.autoscaling: Invalid value: engine keda needs prometheus.serverAddress",
    ),
    RuleCase(
        "gate-max-trials",
        "spec.gate",
        "(has(self.maxTrials)",
        _set("spec.gate", {"trials": 5, "maxTrials": 4}),
        _set("spec.gate", {"trials": 5, "maxTrials": 5}),
        "spec.gate: Invalid value: gate.maxTrials must be >= gate.trials",
    ),
    RuleCase(
        "disruption-one-budget",
        "spec.disruption",
        "!(has(self.maxUnavailable)",
        _set("spec.disruption", {"maxUnavailable": 1, "minAvailable": 1}),
        _set("spec.disruption", {"maxUnavailable": 1}),
        "spec.disruption: Invalid value: set maxUnavailable or minAvailable, not both",
    ),
    RuleCase(
        "compile-cache-subpath",
        "spec.engine.compileCache.subPath",
        "!self.startsWith('/')",
        _set("spec.engine.compileCache", {"claimName": "c", "subPath": "a/../b"}),
        _set("spec.engine.compileCache", {"claimName": "c", "subPath": "a/..b"}),
        f'spec.engine.compileCache.subPath: Invalid value: "a/../b": {_SUBPATH}',
    ),
    RuleCase(
        "weights-cache-subpath",
        "spec.model.weightsCache.subPath",
        "!self.startsWith('/')",
        _set("spec.model.weightsCache", {"claimName": "w", "subPath": "/abs"}),
        _set("spec.model.weightsCache", {"claimName": "w", "subPath": "models/q"}),
        f'spec.model.weightsCache.subPath: Invalid value: "/abs": {_SUBPATH}',
    ),
    RuleCase(
        "gpu-resource-name",
        "spec.resources.gpuResourceName",
        "!self.contains(",
        _set("spec.resources.gpuResourceName", "requests.nvidia.com/gpu"),
        _set("spec.resources.gpuResourceName", "amd.com/gpu"),
        'spec.resources.gpuResourceName: Invalid value: "requests.nvidia.com/gpu":'
        " gpuResourceName must be an extended resource",
    ),
]


_WORKLOAD = "spec.gate.workload"
_TOKENS = {"inputTokens": {"mean": 8}, "outputTokens": {"mean": 8}}


def _token_cases(field: str) -> list[RuleCase]:
    """The three rules of a token-count distribution, on one of its two fields."""
    path = f"{_WORKLOAD}.synthetic.{field}"

    def synthetic(counts: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        return _set(f"{_WORKLOAD}.synthetic", {**_TOKENS, field: counts})

    return [
        RuleCase(
            f"{field}-min-max",
            path,
            "(has(self.min) ? self.min : 1) <= (has(self.max)",
            synthetic({"mean": 5, "min": 6, "max": 4}),
            synthetic({"mean": 5, "min": 4, "max": 6}),
            f"{path}: Invalid value: min must not exceed max",
        ),
        RuleCase(
            f"{field}-mean-in-range",
            path,
            "(has(self.min) ? self.min : 1) > (has(self.max)",
            synthetic({"mean": 9, "max": 8}),
            synthetic({"mean": 8, "max": 8}),
            f"{path}: Invalid value: mean must lie within [min, max]",
        ),
        RuleCase(
            f"{field}-fixed-spread",
            path,
            "!has(self.spread)",
            synthetic({"mean": 50, "spread": 5}),
            synthetic({"mean": 50, "spread": 5, "distribution": "lognormal"}),
            f"{path}: Invalid value: spread must be 0 with distribution fixed: use normal or "
            "lognormal",
        ),
    ]


CASES += [
    RuleCase(
        "workload-one-kind",
        _WORKLOAD,
        "(has(self.builtin)",
        _set(_WORKLOAD, {"builtin": "study", "dataset": {"configMap": "d"}}),
        _set(_WORKLOAD, {"dataset": {"configMap": "d"}}),
        f"{_WORKLOAD}: Invalid value: set one of builtin, synthetic or dataset",
    ),
    RuleCase(
        "dataset-one-source",
        f"{_WORKLOAD}.dataset",
        "has(self.configMap) !=",
        _set(f"{_WORKLOAD}.dataset", {"format": "sharegpt"}),
        _set(f"{_WORKLOAD}.dataset", {"format": "sharegpt", "configMap": "d"}),
        f"{_WORKLOAD}.dataset: Invalid value: set exactly one of configMap (with key) or "
        "persistentVolumeClaim (with path)",
    ),
    RuleCase(
        "dataset-claim-needs-path",
        f"{_WORKLOAD}.dataset",
        "!has(self.persistentVolumeClaim)",
        _set(f"{_WORKLOAD}.dataset", {"persistentVolumeClaim": "data"}),
        _set(f"{_WORKLOAD}.dataset", {"persistentVolumeClaim": "data", "path": "a.jsonl"}),
        f"{_WORKLOAD}.dataset: Invalid value: persistentVolumeClaim needs path: the dataset "
        "file in the claim",
    ),
    RuleCase(
        "dataset-path-only-with-claim",
        f"{_WORKLOAD}.dataset",
        "!has(self.configMap)",
        _set(f"{_WORKLOAD}.dataset", {"configMap": "d", "path": "a.jsonl"}),
        _set(f"{_WORKLOAD}.dataset", {"configMap": "d", "key": "a.jsonl"}),
        f"{_WORKLOAD}.dataset: Invalid value: path is for persistentVolumeClaim; a "
        "ConfigMap's file is its key",
    ),
    RuleCase(
        "dataset-path",
        f"{_WORKLOAD}.dataset.path",
        "!self.startsWith('/')",
        _set(f"{_WORKLOAD}.dataset", {"persistentVolumeClaim": "data", "path": "../a"}),
        _set(f"{_WORKLOAD}.dataset", {"persistentVolumeClaim": "data", "path": "a/..b"}),
        f'{_WORKLOAD}.dataset.path: Invalid value: "../a": {_SUBPATH}',
    ),
    RuleCase(
        "load-mode-needs-levels",
        f"{_WORKLOAD}.load",
        "(has(self.mode) && self.mode == 'rate') ? (has(self.rates)",
        _set(f"{_WORKLOAD}.load", {"mode": "rate"}),
        _set(f"{_WORKLOAD}.load", {"mode": "rate", "rates": [5]}),
        f"{_WORKLOAD}.load: Invalid value: mode rate needs at least one level in rates; mode "
        "concurrency in concurrency",
    ),
    RuleCase(
        "load-levels-ascending",
        f"{_WORKLOAD}.load",
        "(has(self.mode) && self.mode == 'rate') ? (!has(self.rates)",
        _set(f"{_WORKLOAD}.load", {"mode": "rate", "rates": [5, 5]}),
        _set(f"{_WORKLOAD}.load", {"mode": "rate", "rates": [5, 10], "concurrency": [2, 1]}),
        f"{_WORKLOAD}.load: Invalid value: load levels must be distinct and ascending",
    ),
    RuleCase(
        "load-rate-requests-per-level",
        f"{_WORKLOAD}.load",
        "!(has(self.mode) && self.mode == 'rate') || !has(self.rates)",
        _set(f"{_WORKLOAD}.load", {"mode": "rate", "rates": [10000], "secondsPerLevel": 3600}),
        _set(f"{_WORKLOAD}.load", {"mode": "rate", "rates": [10000], "secondsPerLevel": 10}),
        f"{_WORKLOAD}.load: Invalid value: every rate x secondsPerLevel must be at most 100000 "
        "requests per level: lower the rate or secondsPerLevel",
    ),
    RuleCase(
        "load-rates-need-mode-rate",
        f"{_WORKLOAD}.load",
        "(has(self.mode) && self.mode == 'rate') || !has(self.rates)",
        _set(f"{_WORKLOAD}.load", {"rates": [5, 10]}),
        _set(f"{_WORKLOAD}.load", {"mode": "rate", "rates": [5, 10]}),
        f"{_WORKLOAD}.load: Invalid value: rates are the levels of mode rate",
    ),
    RuleCase(
        "slo-levels-once",
        "spec.gate.thresholds.slo.levels",
        "self.all(x, self.exists_one(",
        _set(
            "spec.gate",
            {
                "thresholds": {"slo": {"levels": [{"at": 2}, {"at": 2}]}},
                "workload": {"synthetic": _TOKENS},
            },
        ),
        _set(
            "spec.gate",
            {
                "thresholds": {"slo": {"levels": [{"at": 2}, {"at": 4}]}},
                "workload": {"synthetic": _TOKENS},
            },
        ),
        "spec.gate.thresholds.slo.levels: Invalid value: slo.levels must name each level once "
        "(`at`)",
    ),
    RuleCase(
        "slo-levels-measured",
        "spec.gate",
        "!has(self.workload) || !has(self.thresholds)",
        _set(
            "spec.gate",
            {
                "thresholds": {"slo": {"levels": [{"at": 3}]}},
                "workload": {"synthetic": _TOKENS, "load": {"mode": "rate", "rates": [1, 2]}},
            },
        ),
        _set(
            "spec.gate",
            {
                "thresholds": {"slo": {"levels": [{"at": 2}]}},
                "workload": {"synthetic": _TOKENS, "load": {"mode": "rate", "rates": [1, 2]}},
            },
        ),
        "spec.gate: Invalid value: every gate.thresholds.slo.levels[].at must be a level of "
        "gate.workload.load (a level never measured has no figures to judge)",
    ),
    *_token_cases("inputTokens"),
    *_token_cases("outputTokens"),
    RuleCase(
        "gate-slo-needs-a-workload",
        "spec.gate",
        "!has(self.thresholds)",
        _set("spec.gate", {"thresholds": {"slo": {"ttftMs": {"p99": 500}}}}),
        _set(
            "spec.gate",
            {
                "thresholds": {"slo": {"ttftMs": {"p99": 500}}},
                "workload": {"synthetic": _TOKENS, "load": {"mode": "rate", "rates": [1]}},
            },
        ),
        "spec.gate: Invalid value: gate.thresholds.slo needs gate.workload.synthetic or "
        "gate.workload.dataset: the study's classes have no load levels to hold objectives at",
    ),
]


_CANARY = "spec.rollout.canary"
_STEP = [{"weight": 10}]


def _analysis_case(percentile: str, too_few: int) -> RuleCase:
    """minRequests must decide the highest percentile judged (rollout/canary's table)."""
    path = f"{_CANARY}.analysis"
    latency = [{"metric": "ttft", "percentile": percentile}]
    return RuleCase(
        f"canary-min-requests-{percentile}",
        path,
        f"!((has(self.slo) && ((has(self.slo.ttftMs) && has(self.slo.ttftMs.{percentile}))",
        _set(_CANARY, {"steps": _STEP, "analysis": {"latency": latency, "minRequests": too_few}}),
        _set(
            _CANARY,
            {"steps": _STEP, "analysis": {"latency": latency, "minRequests": too_few + 1}},
        ),
        f"{path}: Invalid value: minRequests is too few to judge a {percentile}",
    )


CASES += [
    RuleCase(
        "canary-steps-rise",
        f"{_CANARY}.steps",
        "(size(self) <= 1",
        _set(_CANARY, {"steps": [{"weight": 50}, {"weight": 50}]}),
        _set(_CANARY, {"steps": [{"weight": 50}, {"weight": 51}]}),
        f"{_CANARY}.steps: Invalid value: each step's weight must be above the previous step's",
    ),
    RuleCase(
        "canary-route-with-gateway",
        f"{_CANARY}.traffic",
        "((has(self.mode)",
        _set(_CANARY, {"steps": _STEP, "traffic": {"mode": "gatewayAPI"}}),
        _set(
            _CANARY,
            {"steps": _STEP, "traffic": {"mode": "gatewayAPI", "httpRoute": {"name": "r"}}},
        ),
        f"{_CANARY}.traffic: Invalid value: mode gatewayAPI needs httpRoute.name",
    ),
    _analysis_case("p50", 6),
    _analysis_case("p95", 85),
    _analysis_case("p99", 436),
]


def _schema() -> dict[str, Any]:
    crd = load_crd()
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _vllmd(crd: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}",
        "kind": crd["spec"]["names"]["kind"],
        "metadata": {"name": "m", "namespace": "default"},
        "spec": {
            "model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"image": "vllm/vllm-openai:v0.17.0"},
        },
    }


def test_every_rule_has_a_case() -> None:
    """A rule added to the CRD without a case below is a rule no test runs."""
    rules = _rules(_schema())
    assert len(rules) >= 8
    for path, rule in rules:
        covering = [c for c in CASES if c.rule_path == path and rule.startswith(c.rule_start)]
        assert len(covering) == 1, f"rule at {path or '<root>'} has no case: {rule}"
    assert len(CASES) == len(rules)


def test_every_rule_compiles_and_judges_in_process() -> None:
    """The pure evaluator alone: each invalid object breaks exactly its own rule."""
    crd = load_crd()
    node, errors = compile_schema(_schema(), "schema")
    assert errors == []
    for case in CASES:
        good, bad = _vllmd(crd), _vllmd(crd)
        case.valid(good)
        case.invalid(bad)
        assert validate(node, good) == [], case.id
        (error,) = validate(node, bad)
        assert str(error).startswith(case.error), (case.id, str(error))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_kubectl_refuses_what_each_rule_forbids(
    devcluster: DevCluster, run: Kubectl, case: RuleCase
) -> None:
    crd = load_crd()
    devcluster.create(crd)
    bad = _vllmd(crd)
    case.invalid(bad)
    done = run("apply", "-f", "-", stdin=yaml.safe_dump(bad))
    assert done.returncode == 1, done.stdout
    name = bad["metadata"]["name"]
    assert f'The VLLMDeployment "{name}" is invalid: {case.error}' in done.stderr, done.stderr
    good = _vllmd(crd)
    case.valid(good)
    done = run("apply", "-f", "-", stdin=yaml.safe_dump(good))
    assert done.returncode == 0, done.stderr
    # An update that breaks the rule is refused as well (create and update both run it).
    if case.rule_path:
        broken = copy.deepcopy(good)
        case.invalid(broken)
        done = run("apply", "-f", "-", stdin=yaml.safe_dump(broken))
        assert done.returncode == 1, done.stdout
        assert case.error in done.stderr, done.stderr


# --- transition rules and the rest of the rule API, on a small CRD -------------------------
def _ruled_crd() -> dict[str, Any]:
    crd = widget_crd(columns=False)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    spec["properties"]["image"]["x-kubernetes-validations"] = [
        {"rule": "self == oldSelf", "message": "image is immutable"}
    ]
    spec["properties"]["tags"] = {
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-validations": [
            {
                "rule": "self.isSorted()",
                "messageExpression": "'tags must be sorted, got ' + self.join(',')",
            }
        ],
    }
    spec["properties"]["ratio"] = {"type": "number"}
    spec["x-kubernetes-validations"] = [
        {
            "rule": "!has(oldSelf.size) || self.size >= oldSelf.size",
            "message": "size may only grow",
            "reason": "FieldValueForbidden",
            "fieldPath": ".size",
        },
        {"rule": "!has(self.ratio) || self.ratio <= 1.0", "message": "ratio at most 1"},
        {"rule": "self.size != 7 || self.size / (self.size - 7) > 0"},
    ]
    return crd


def test_kubectl_transition_rule_sees_old_self(devcluster: DevCluster, run: Kubectl) -> None:
    devcluster.create(_ruled_crd())
    first = widget("w", image="a:1", size=3)
    done = run("apply", "-f", "-", stdin=yaml.safe_dump(first))
    assert done.returncode == 0, done.stderr  # no oldSelf on create: transition rules skip
    changed = widget("w", image="a:2", size=3)
    done = run("apply", "-f", "-", stdin=yaml.safe_dump(changed))
    assert done.returncode == 1
    assert 'spec.image: Invalid value: "a:2": image is immutable' in done.stderr
    shrunk = widget("w", image="a:1", size=2)
    done = run("apply", "-f", "-", stdin=yaml.safe_dump(shrunk))
    assert done.returncode == 1
    assert "spec.size: Forbidden: size may only grow" in done.stderr
    grown = widget("w", image="a:1", size=4)
    done = run("apply", "-f", "-", stdin=yaml.safe_dump(grown))
    assert done.returncode == 0, done.stderr
    assert devcluster.get(API_VERSION, PLURAL, "w")["spec"]["size"] == 4


def test_message_expression_and_list_library(devcluster: DevCluster) -> None:
    devcluster.create(_ruled_crd())
    with pytest.raises(ApiError) as caught:
        devcluster.create(widget("w", tags=["b", "a"]))
    assert caught.value.code == 422
    assert "spec.tags: Invalid value: tags must be sorted, got b,a" in str(caught.value)
    devcluster.create(widget("w", tags=["a", "b"]))


def test_number_fields_and_runtime_errors(devcluster: DevCluster) -> None:
    devcluster.create(_ruled_crd())
    devcluster.create(widget("ok", ratio=1))  # an integer in a number field is a double
    with pytest.raises(ApiError) as caught:
        devcluster.create(widget("big", ratio=2))
    assert "spec: Invalid value: ratio at most 1" in str(caught.value)
    with pytest.raises(ApiError) as caught:
        devcluster.create(widget("zero", size=7))
    assert (
        'spec: Invalid value: "object": division by zero evaluating rule:'
        " self.size != 7 || self.size / (self.size - 7) > 0"
    ) in str(caught.value)


def test_ratcheting_keeps_an_unchanged_invalid_value(devcluster: DevCluster) -> None:
    """A value stored before a rule existed may stay while it is unchanged."""
    devcluster.create(widget_crd(columns=False))
    devcluster.create(widget("w", image="a:1", size=2))
    crd = widget_crd(columns=False)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["properties"]["image"]["x-kubernetes-validations"] = [
        {"rule": "self.startsWith('b')", "message": "image must start with b"}
    ]
    name = crd["metadata"]["name"]
    stored = devcluster.get("apiextensions.k8s.io/v1", "customresourcedefinitions", name)
    crd["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
    devcluster.replace(crd)
    devcluster.patch(API_VERSION, PLURAL, "w", {"spec": {"size": 3}})  # image untouched
    with pytest.raises(ApiError) as caught:
        devcluster.patch(API_VERSION, PLURAL, "w", {"spec": {"image": "a:2"}})
    assert 'spec.image: Invalid value: "a:2": image must start with b' in str(caught.value)


def test_a_rule_that_does_not_compile_refuses_the_crd(devcluster: DevCluster) -> None:
    crd = widget_crd(columns=False)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["x-kubernetes-validations"] = [{"rule": "self.size >", "message": "m"}]
    with pytest.raises(ApiError) as caught:
        devcluster.create(crd)
    assert caught.value.code == 422
    text = str(caught.value)
    assert (
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]"
        '.rule: Invalid value: apiextensions.ValidationRule{Rule:"self.size >", Message:"m"'
    ) in text
    assert "compilation failed: ERROR: <input>:1:12: Syntax error" in text
    assert not devcluster.exists(
        "apiextensions.k8s.io/v1", "customresourcedefinitions", crd["metadata"]["name"]
    )


def test_hostile_values_meet_the_rules_as_a_server_decodes_them() -> None:
    """An integer past int64 is a double (Go's JSON decoding), a lone surrogate is U+FFFD;
    neither is a 500, and an error quoting a huge value stays short."""
    schema = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "x-kubernetes-validations": [
            {"rule": "self.n > 0.0", "message": "n positive"},
            {"rule": "self.s != ''", "message": "s set"},
        ],
    }
    node, errors = compile_schema(schema, "schema")
    assert errors == []
    assert validate(node, {"n": 10**30, "s": "\ud800"}) == []
    (error,) = validate(node, {"n": -(10**30), "s": "x"})
    assert str(error) == "<nil>: Invalid value: n positive"
    big = {"type": "object", "x-kubernetes-validations": [{"rule": "self.missing == 1"}]}
    node, _ = compile_schema(big, "schema")
    (error,) = validate(node, {"filler": "x" * 100_000})
    assert len(str(error)) < 1000
    assert "no such key: missing" in str(error)
