"""Objects a real API server refuses, each with the Kubernetes source of the rule.

Shared by the HTTP-client tests (every case) and the kubectl test (one parametrized run).
Each case builds a valid object, breaks one thing, and names what the server answers:
the status code, and for 422 the field, the cause ``reason`` and a piece of the message.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

POD_SPEC: dict[str, Any] = {
    "containers": [
        {
            "name": "main",
            "image": "vllm/vllm-openai:v0.17.0",
            "args": ["--port", "8000"],
            "env": [{"name": "HF_HOME", "value": "/cache"}],
            "ports": [{"name": "http", "containerPort": 8000}],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}},
        }
    ]
}


def deployment(name: str = "d") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": copy.deepcopy(POD_SPEC)},
        },
    }


def job(name: str = "j") -> dict[str, Any]:
    spec = {**copy.deepcopy(POD_SPEC), "restartPolicy": "Never"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"spec": spec}},
    }


def service(name: str = "s") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"app": "d"}, "ports": [{"name": "http", "port": 80}]},
    }


def container(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj["spec"]["template"]["spec"]["containers"][0])


@dataclass(frozen=True)
class Case:
    id: str
    source: str  # the Kubernetes rule this follows
    build: Callable[[], dict[str, Any]]
    code: int
    field: str = ""
    reason: str = ""
    message: str = ""


def _edit(
    make: Callable[[], dict[str, Any]], change: Callable[[dict[str, Any]], None]
) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        obj = make()
        change(obj)
        return obj

    return build


def _ctr(obj: dict[str, Any]) -> dict[str, Any]:
    ctr: dict[str, Any] = obj["spec"]["template"]["spec"]["containers"][0]
    return ctr


CTR = "spec.template.spec.containers[0]"
CASES = [
    Case(
        "container-without-image",
        "pkg/apis/core/validation/validation.go validateContainerCommon: image Required",
        _edit(deployment, lambda o: _ctr(o).pop("image")),
        422,
        f"{CTR}.image",
        "FieldValueRequired",
        "Required value",
    ),
    Case(
        "uppercase-container-name",
        "validateContainerCommon: ValidateDNS1123Label(ctr.Name)",
        _edit(deployment, lambda o: _ctr(o).update(name="Main")),
        422,
        f"{CTR}.name",
        "FieldValueInvalid",
        'Invalid value: "Main": a lowercase RFC 1123 label must consist of',
    ),
    Case(
        "label-value-over-63",
        "apimachinery validation.go ValidateLabels / content.IsLabelValue (63 characters)",
        _edit(deployment, lambda o: o["metadata"]["labels"].update(app="v" * 64)),
        422,
        "metadata.labels",
        "FieldValueInvalid",
        "must be no more than 63 characters",
    ),
    Case(
        "port-name-over-15",
        "validateContainerPorts / IsValidPortName (IANA_SVC_NAME, 15 characters)",
        _edit(deployment, lambda o: _ctr(o)["ports"][0].update(name="http-metrics-port")),
        422,
        f"{CTR}.ports[0].name",
        "FieldValueInvalid",
        "must be no more than 15 characters",
    ),
    Case(
        "memory-2GB",
        "apimachinery resource.ParseQuantity: the body does not decode (400, not 422)",
        _edit(deployment, lambda o: _ctr(o)["resources"]["requests"].update(memory="2GB")),
        400,
        message="quantities must match the regular expression",
    ),
    Case(
        "requests-above-limits",
        "ValidateResourceRequirements: requests <= limits",
        _edit(deployment, lambda o: _ctr(o)["resources"]["requests"].update(cpu="3")),
        422,
        f"{CTR}.resources.requests",
        "FieldValueInvalid",
        'Invalid value: "3": must be less than or equal to cpu limit of 2',
    ),
    Case(
        "replicas-negative",
        "pkg/apis/apps/validation ValidateDeploymentSpec: ValidateNonnegativeField(replicas)",
        _edit(deployment, lambda o: o["spec"].update(replicas=-1)),
        422,
        "spec.replicas",
        "FieldValueInvalid",
        "Invalid value: -1: must be greater than or equal to 0",
    ),
    Case(
        "job-restart-always",
        "pkg/apis/batch/validation validateJobSpec: restartPolicy OnFailure or Never",
        _edit(job, lambda o: o["spec"]["template"]["spec"].update(restartPolicy="Always")),
        422,
        "spec.template.spec.restartPolicy",
        "FieldValueNotSupported",
        'Unsupported value: "Always": supported values: "OnFailure", "Never"',
    ),
    Case(
        "service-port-70000",
        "pkg/apis/core/validation ValidateService: port IsValidPortNum (1..65535)",
        _edit(service, lambda o: o["spec"]["ports"][0].update(port=70000)),
        422,
        "spec.ports[0].port",
        "FieldValueInvalid",
        "Invalid value: 70000: must be between 1 and 65535, inclusive",
    ),
    Case(
        "service-name-not-dns-label",
        "ValidateServiceName = NameIsDNS1035Label",
        _edit(service, lambda o: o["metadata"].update(name="my_svc")),
        422,
        "metadata.name",
        "FieldValueInvalid",
        "a DNS-1035 label must consist of lower case alphanumeric characters",
    ),
    Case(
        "service-name-70-characters",
        "NameIsDNS1035Label: at most 63 characters",
        _edit(service, lambda o: o["metadata"].update(name="s" * 70)),
        422,
        "metadata.name",
        "FieldValueInvalid",
        "must be no more than 63 characters",
    ),
    Case(
        "job-name-70-characters",
        "batch defaulting labels the template job-name=<name>: ValidateLabels, 63 characters",
        _edit(job, lambda o: o["metadata"].update(name="j" * 70)),
        422,
        "spec.template.labels",
        "FieldValueInvalid",
        "must be no more than 63 characters",
    ),
]
