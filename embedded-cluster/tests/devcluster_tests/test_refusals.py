"""The embedded API refuses what a real API server refuses, with the same Status.

Every case of ``invalid_objects.CASES`` (each names the Kubernetes rule it follows) is
refused through the HTTP API with the real code and, for 422, a ``details.causes`` entry
for the field; the unbroken objects are accepted, so each case fails on its one change.
Custom resources: a schema violation lists its field as apiextensions-apiserver words it,
and a list declared ``x-kubernetes-list-type: map`` refuses two items with one key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ApiError, DevCluster

from .crd import API_VERSION, PLURAL, widget, widget_crd
from .invalid_objects import CASES, Case, deployment, job, service

ROOT = Path(__file__).resolve().parents[3]


def test_the_valid_objects_are_accepted(devcluster: DevCluster) -> None:
    for obj in (deployment(), job(), service()):
        created = devcluster.create(obj)
        assert created["metadata"]["uid"]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_builtin_is_refused(devcluster: DevCluster, case: Case) -> None:
    obj = case.build()
    with pytest.raises(ApiError) as refused:
        devcluster.create(obj)
    error = refused.value
    assert error.code == case.code, error.message
    assert case.message in error.message
    if case.code == 400:
        assert error.reason == "BadRequest"
        assert (
            f'{obj["kind"]} in version "v1" cannot be handled as a {obj["kind"]}' in error.message
        )
        return
    assert error.reason == "Invalid"
    group = obj["apiVersion"].rpartition("/")[0]
    assert error.details["kind"] == obj["kind"]
    assert error.details.get("group", "") == group
    qualified = f"{obj['kind']}.{group}" if group else obj["kind"]
    assert error.message.startswith(f'{qualified} "{obj["metadata"]["name"]}" is invalid: ')
    causes = [c for c in error.details["causes"] if c["field"] == case.field]
    assert causes, error.details
    assert any(c["reason"] == case.reason and case.message in c["message"] for c in causes)
    assert not devcluster.exists(
        obj["apiVersion"], obj["kind"].lower() + "s", obj["metadata"]["name"]
    )


def test_every_violation_is_listed_at_once(devcluster: DevCluster) -> None:
    """NewInvalid aggregates the whole ErrorList: the message is ``[a, b, ...]``."""
    obj = deployment()
    obj["spec"]["replicas"] = -2
    obj["spec"]["template"]["spec"]["containers"][0].pop("image")
    with pytest.raises(ApiError) as refused:
        devcluster.create(obj)
    fields = [c["field"] for c in refused.value.details["causes"]]
    assert fields == ["spec.replicas", "spec.template.spec.containers[0].image"]
    assert refused.value.message == (
        'Deployment.apps "d" is invalid: [spec.replicas: Invalid value: -2: must be greater'
        " than or equal to 0, spec.template.spec.containers[0].image: Required value]"
    )


def test_updates_are_validated_too(devcluster: DevCluster) -> None:
    devcluster.create(deployment())
    with pytest.raises(ApiError) as refused:
        devcluster.patch("apps/v1", "deployments", "d", {"spec": {"replicas": -1}})
    assert refused.value.code == 422
    assert devcluster.get("apps/v1", "deployments", "d")["spec"]["replicas"] == 1


def test_deployment_template_restart_policy_must_be_always(devcluster: DevCluster) -> None:
    """ValidatePodTemplateSpecForReplicaSet: only ``Always``."""
    obj = deployment()
    obj["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    with pytest.raises(ApiError) as refused:
        devcluster.create(obj)
    assert refused.value.details["causes"] == [
        {
            "reason": "FieldValueNotSupported",
            "message": 'Unsupported value: "Never": supported values: "Always"',
            "field": "spec.template.spec.restartPolicy",
        }
    ]


def test_a_job_without_restart_policy_defaults_to_always_and_is_refused(
    devcluster: DevCluster,
) -> None:
    obj = job()
    del obj["spec"]["template"]["spec"]["restartPolicy"]
    with pytest.raises(ApiError) as refused:
        devcluster.create(obj)
    assert 'Unsupported value: "Always"' in refused.value.message


def test_gpu_requests_must_equal_limits(devcluster: DevCluster) -> None:
    """ValidateResourceRequirements: extended resources cannot be overcommitted."""
    obj = deployment()
    resources = obj["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = 1
    with pytest.raises(ApiError) as missing:
        devcluster.create(obj)
    assert "Limit must be set for non overcommitable resources" in missing.value.message
    resources["limits"]["nvidia.com/gpu"] = 2
    with pytest.raises(ApiError) as unequal:
        devcluster.create(obj)
    assert "must be equal to nvidia.com/gpu limit of 2" in unequal.value.message
    resources["limits"]["nvidia.com/gpu"] = 1
    assert devcluster.create(obj)["metadata"]["name"] == "d"


def test_core_event_names_are_free_but_namespaces_must_agree(devcluster: DevCluster) -> None:
    """events.go legacyValidateEvent: no name rule, involvedObject.namespace must match."""
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "Widget.W1.abc", "namespace": "default"},
        "involvedObject": {"kind": "Widget", "name": "W1", "namespace": "default"},
        "reason": "Tested",
    }
    assert devcluster.create(event)["metadata"]["name"] == "Widget.W1.abc"
    event["metadata"]["name"] = "other"
    event["involvedObject"]["namespace"] = "elsewhere"
    with pytest.raises(ApiError) as refused:
        devcluster.create(event)
    assert refused.value.details["causes"][0]["field"] == "involvedObject.namespace"


def test_config_map_keys(devcluster: DevCluster) -> None:
    """ValidateConfigMap: keys are IsConfigMapKey."""
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"},
        "data": {"../etc": "x"},
    }
    with pytest.raises(ApiError) as refused:
        devcluster.create(cm)
    assert refused.value.details["causes"][0]["field"] == "data[../etc]"
    assert "must not start with '..'" in refused.value.message


def test_custom_resource_schema_violation_lists_the_field(devcluster: DevCluster) -> None:
    """apiextensions-apiserver ConvertToFieldErrors over kube-openapi's messages."""
    devcluster.create(widget_crd())
    bad = widget("w")
    bad["spec"]["size"] = "big"
    with pytest.raises(ApiError) as refused:
        devcluster.create(bad)
    error = refused.value
    assert error.code == 422
    assert error.details["causes"] == [
        {
            "reason": "FieldValueTypeInvalid",
            "message": 'Invalid value: "string": spec.size in body must be of type integer: '
            '"string"',
            "field": "spec.size",
        }
    ]
    assert error.message == (
        'Widget.test.devcluster.io "w" is invalid: spec.size: Invalid value: "string": '
        'spec.size in body must be of type integer: "string"'
    )


def _project_crd() -> dict[str, Any]:
    files = sorted((ROOT / "crds").glob("*.yaml"))
    return dict(next(d for d in yaml.safe_load_all(files[0].read_text()) if d))


def test_status_conditions_are_a_map_keyed_by_type(devcluster: DevCluster) -> None:
    """structural/listtype: x-kubernetes-list-type map refuses a duplicate key (the
    project CRD declares status.conditions so, keyed by type)."""
    crd = _project_crd()
    devcluster.create(crd)
    group, version = crd["spec"]["group"], crd["spec"]["versions"][0]["name"]
    plural = crd["spec"]["names"]["plural"]
    devcluster.create(
        {
            "apiVersion": f"{group}/{version}",
            "kind": crd["spec"]["names"]["kind"],
            "metadata": {"name": "m", "namespace": "default"},
            "spec": {
                "model": {"name": "Qwen/Qwen3-8B"},
                "engine": {"image": "vllm/vllm-openai:v0.17.0"},
            },
        }
    )
    ready = {"type": "Ready", "status": "True", "reason": "Serving"}
    with pytest.raises(ApiError) as refused:
        devcluster.patch(
            f"{group}/{version}",
            plural,
            "m",
            {"status": {"conditions": [ready, {**ready, "status": "False"}]}},
            subresource="status",
        )
    assert refused.value.code == 422
    assert refused.value.details["causes"] == [
        {
            "reason": "FieldValueDuplicate",
            "message": 'Duplicate value: map[string]interface {}{"type":"Ready"}',
            "field": "status.conditions[1]",
        }
    ]
    stored = devcluster.patch(
        f"{group}/{version}",
        plural,
        "m",
        {"status": {"conditions": [ready, {"type": "Stalled", "status": "False"}]}},
        subresource="status",
    )
    assert [c["type"] for c in stored["status"]["conditions"]] == ["Ready", "Stalled"]


def test_list_type_set_refuses_duplicates(devcluster: DevCluster) -> None:
    crd = widget_crd()
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["properties"]["tags"] = {
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-list-type": "set",
    }
    devcluster.create(crd)
    bad = widget("w")
    bad["spec"]["tags"] = ["a", "b", "a"]
    with pytest.raises(ApiError) as refused:
        devcluster.create(bad)
    assert refused.value.details["causes"][0]["field"] == "spec.tags[2]"
    assert not devcluster.exists(API_VERSION, PLURAL, "w")


def test_immutable_fields_name_their_field(devcluster: DevCluster) -> None:
    """ValidateDeploymentUpdate: spec.selector is immutable (apps/v1)."""
    devcluster.create(deployment())
    changed = {"spec": {"selector": {"matchLabels": {"app": "x"}}}}
    changed["spec"]["template"] = {"metadata": {"labels": {"app": "x"}}}
    with pytest.raises(ApiError) as refused:
        devcluster.patch("apps/v1", "deployments", "d", changed)
    assert refused.value.details["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: field is immutable",
            "field": "spec.selector",
        }
    ]


def test_pod_disruption_budget_rules(devcluster: DevCluster) -> None:
    """pkg/apis/policy/validation ValidatePodDisruptionBudgetSpec."""
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "minAvailable": 1,
            "maxUnavailable": "150%",
            "selector": {"matchLabels": {"a": "b"}},
        },
    }
    with pytest.raises(ApiError) as refused:
        devcluster.create(pdb)
    fields = [c["field"] for c in refused.value.details["causes"]]
    assert fields == ["spec", "spec.maxUnavailable"]
    assert "minAvailable and maxUnavailable cannot be both set" in refused.value.message
    del pdb["spec"]["maxUnavailable"]
    assert devcluster.create(pdb)["spec"]["minAvailable"] == 1


def test_hpa_and_httproute_rules_apply_to_their_kinds() -> None:
    """pkg/apis/autoscaling/validation (HPA) and the Gateway API CRD bounds (HTTPRoute):
    keyed by kind, they apply as soon as the devcluster serves the kind."""
    from devcluster.validation import RULES

    hpa = RULES[("autoscaling", "horizontalpodautoscalers")]
    spec = {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "minReplicas": 3}
    errors = hpa({"spec": {**spec, "maxReplicas": 2}}, None)
    assert [str(e) for e in errors] == [
        "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"
    ]
    assert hpa({"spec": {**spec, "maxReplicas": 3}}, None) == []
    pods = {"metric": {"name": "vllm:num_requests_waiting"}, "target": {"type": "Value"}}
    metrics = [{"type": "Pods", "pods": pods}]
    errors = hpa({"spec": {**spec, "maxReplicas": 3, "metrics": metrics}}, None)
    assert [e.field for e in errors] == ["spec.metrics[0].pods.target.averageValue"]
    pods["target"] = {"type": "AverageValue", "averageValue": "0"}
    errors = hpa({"spec": {**spec, "maxReplicas": 3, "metrics": metrics}}, None)
    assert [str(e) for e in errors] == [
        'spec.metrics[0].pods.target.averageValue: Invalid value: "0": must be positive'
    ]
    pods["target"]["averageValue"] = "500m"
    assert hpa({"spec": {**spec, "maxReplicas": 3, "metrics": metrics}}, None) == []
    route = RULES[("gateway.networking.k8s.io", "httproutes")]
    backends = [{"name": "a", "port": 8000, "weight": 90}, {"name": "b", "port": 70000}]
    body = {"spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": backends}]}}
    assert [e.field for e in route(body, None)] == ["spec.rules[0].backendRefs[1].port"]
    backends[1]["port"] = 8000
    assert route(body, None) == []


SCHEDULING_CASES = [
    # (what, pod spec fields, field of the cause) -- validation.go validateTolerations,
    # ValidateAffinity, validateTopologySpreadConstraints, ValidatePodSecurityContext.
    (
        "toleration-without-key-not-exists",
        {"tolerations": [{"operator": "Equal"}]},
        "spec.template.spec.tolerations[0].operator",
    ),
    (
        "toleration-exists-with-value",
        {"tolerations": [{"key": "gpu", "operator": "Exists", "value": "x"}]},
        "spec.template.spec.tolerations[0].operator",
    ),
    (
        "toleration-seconds-without-noexecute",
        {
            "tolerations": [
                {"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}
            ]
        },
        "spec.template.spec.tolerations[0].effect",
    ),
    (
        "toleration-bad-effect",
        {"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "Never"}]},
        "spec.template.spec.tolerations[0].effect",
    ),
    (
        "node-affinity-in-without-values",
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "gpu", "operator": "In"}]}
                        ]
                    }
                }
            }
        },
        "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].values",
    ),
    (
        "preferred-weight-0",
        {
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 0,
                            "preference": {
                                "matchExpressions": [{"key": "gpu", "operator": "Exists"}]
                            },
                        }
                    ]
                }
            }
        },
        "spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        "[0].weight",
    ),
    (
        "pod-anti-affinity-without-topology-key",
        {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "d"}}}
                    ]
                }
            }
        },
        "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        "[0].topologyKey",
    ),
    (
        "spread-max-skew-0",
        {
            "topologySpreadConstraints": [
                {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
            ]
        },
        "spec.template.spec.topologySpreadConstraints[0].maxSkew",
    ),
    (
        "negative-run-as-user",
        {"securityContext": {"runAsUser": -1}},
        "spec.template.spec.securityContext.runAsUser",
    ),
]


@pytest.mark.parametrize(
    ("fields", "field"), [c[1:] for c in SCHEDULING_CASES], ids=[c[0] for c in SCHEDULING_CASES]
)
def test_scheduling_fields_are_validated(
    devcluster: DevCluster, fields: dict[str, Any], field: str
) -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"].update(fields)
    with pytest.raises(ApiError) as refused:
        devcluster.create(obj)
    assert [c["field"] for c in refused.value.details["causes"]] == [field]


def test_valid_scheduling_fields_are_accepted(devcluster: DevCluster) -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"].update(
        {
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"operator": "Exists"},
                {"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30},
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "mem", "operator": "Gt", "values": ["8"]}
                                ]
                            }
                        ]
                    }
                },
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"app": "d"}},
                                "topologyKey": "kubernetes.io/hostname",
                            },
                        }
                    ]
                },
            },
            "securityContext": {"runAsUser": 2000, "runAsGroup": 0, "fsGroup": 0},
            "priorityClassName": "inference-high",
        }
    )
    assert devcluster.create(obj)["metadata"]["name"] == "d"


def test_container_restart_policy_is_for_native_sidecars_only(devcluster: DevCluster) -> None:
    """validation.go validateInitContainers / validateContainers (native sidecars, 1.29+)."""
    sidecar = {
        "name": "side",
        "image": "i",
        "restartPolicy": "Always",
        "readinessProbe": {"tcpSocket": {"port": 9000}},
    }
    obj = job()
    obj["spec"]["template"]["spec"]["initContainers"] = [sidecar]
    assert devcluster.create(obj)["metadata"]["name"] == "j"
    obj = job("j2")
    obj["spec"]["template"]["spec"]["initContainers"] = [{**sidecar, "restartPolicy": "Never"}]
    obj["spec"]["template"]["spec"]["containers"][0]["restartPolicy"] = "Always"
    with pytest.raises(ApiError) as refused:
        devcluster.create(obj)
    assert [(c["field"], c["reason"]) for c in refused.value.details["causes"]] == [
        ("spec.template.spec.initContainers[0].restartPolicy", "FieldValueNotSupported"),
        ("spec.template.spec.containers[0].restartPolicy", "FieldValueForbidden"),
    ]
    plain = {k: v for k, v in sidecar.items() if k != "restartPolicy"}
    obj["spec"]["template"]["spec"]["initContainers"] = [plain]
    del obj["spec"]["template"]["spec"]["containers"][0]["restartPolicy"]
    with pytest.raises(ApiError) as probed:
        devcluster.create(obj)
    assert probed.value.details["causes"][0]["field"] == (
        "spec.template.spec.initContainers[0].readinessProbe"
    )


@pytest.mark.parametrize(
    ("replicas", "cpu", "message"),
    [
        ("Infinity", '"1"', "invalid character 'I' looking for beginning of value"),
        ("4294967296", '"1"', "cannot unmarshal number 4294967296 into Go struct field"),
        ('"3"', '"1"', "cannot unmarshal string into Go struct field spec.replicas"),
        ("1", "NaN", "invalid character 'N' looking for beginning of value"),
        ("1", '"1e99999"', "unable to parse quantity's suffix"),
    ],
)
def test_hostile_numbers_are_bad_requests_not_server_errors(
    devcluster: DevCluster, replicas: str, cpu: str, message: str
) -> None:
    """Go's decoder refuses NaN/Infinity, int32 overflow and strings for integers (400);
    Python's JSON parser accepts the first two, so the server must not store them."""

    body = (
        '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{'
        f'"replicas":{replicas},"selector":{{"matchLabels":{{"a":"b"}}}},"template":{{'
        '"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i",'
        f'"resources":{{"limits":{{"cpu":{cpu}}}}}}}]}}}}}}}}'
    )
    response = devcluster.http.post(
        devcluster.url + "/apis/apps/v1/namespaces/default/deployments",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400, response.text
    assert message in response.json()["message"]
    assert not devcluster.exists("apps/v1", "deployments", "d")
