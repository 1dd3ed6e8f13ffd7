"""Pod specs and pod templates, by the rules of ``pkg/apis/core/validation/validation.go``.

What an operator's rendered pods get wrong and a naive emulator stores anyway: a
container without an image or with an upper-case name (``validateContainerCommon``:
``Required`` / ``ValidateDNS1123Label``), duplicate container or volume names, port names
that are no IANA_SVC_NAME (15 characters, ``validateContainerPorts``), ports outside
1..65535, environment names (``ValidateEnv``), quantities that do not parse (a 400 decode
error) or requests above limits (``ValidateResourceRequirements``: "must be less than or
equal to cpu limit of 1"; extended resources such as ``nvidia.com/gpu`` need
requests == limits and whole numbers), volume mounts of undeclared volumes, and restart
policies (``ValidatePodSpec``; a Job's template only ``OnFailure``/``Never``, a
Deployment's only ``Always``, both checked by their kinds).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .. import fielderrors as fe
from ..fielderrors import FieldError
from . import names
from .common import (
    DecodeError,
    invalid_each,
    key,
    validate_annotations,
    validate_labels,
    want_dict,
    want_int,
    want_list,
    want_str,
)
from .quantity import QuantityError, parse_quantity
from .scheduling import validate_scheduling

RESTART_POLICIES = ["Always", "OnFailure", "Never"]
_PROTOCOLS = ["SCTP", "TCP", "UDP"]
_PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
_STANDARD = {"cpu", "memory", "ephemeral-storage"}
_VOLUME_SOURCES = (
    "emptyDir",
    "configMap",
    "secret",
    "persistentVolumeClaim",
    "hostPath",
    "projected",
    "downwardAPI",
    "nfs",
    "csi",
    "ephemeral",
    "image",
)


def _quantity(value: Any, path: str) -> Fraction:
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        raise DecodeError(str(exc)) from exc


def _native(resource: str) -> bool:
    return "/" not in resource or "kubernetes.io/" in resource


def _overcommit_allowed(resource: str) -> bool:
    return _native(resource) and not resource.startswith("hugepages-")


def _resource_name(resource: str, path: str) -> list[FieldError]:
    errors = invalid_each(path, resource, names.label_key(resource))
    if errors:
        return errors
    if resource in _STANDARD or resource.startswith("hugepages-"):
        return []
    if _native(resource):
        return [fe.invalid(path, resource, "must be a standard resource for containers")]
    return invalid_each(path, resource, names.label_key("requests." + resource))


def validate_resources(body: Any, path: str) -> list[FieldError]:
    resources = want_dict(body, path)
    limits = want_dict(resources.get("limits"), f"{path}.limits")
    requests = want_dict(resources.get("requests"), f"{path}.requests")
    errors: list[FieldError] = []
    limit_values: dict[str, Fraction] = {}
    for resource, raw in limits.items():
        where = key(f"{path}.limits", resource)
        errors += _resource_name(resource, where)
        value = limit_values[resource] = _quantity(raw, where)
        errors += _quantity_value(resource, raw, value, where)
    for resource, raw in requests.items():
        where = key(f"{path}.requests", resource)
        errors += _resource_name(resource, where)
        value = _quantity(raw, where)
        errors += _quantity_value(resource, raw, value, where)
        shown = str(raw)
        if resource in limit_values:
            limit = limit_values[resource]
            limit_text = str(limits[resource])
            if value != limit and not _overcommit_allowed(resource):
                errors.append(
                    fe.invalid(
                        f"{path}.requests",
                        shown,
                        f"must be equal to {resource} limit of {limit_text}",
                    )
                )
            elif value > limit:
                errors.append(
                    fe.invalid(
                        f"{path}.requests",
                        shown,
                        f"must be less than or equal to {resource} limit of {limit_text}",
                    )
                )
        elif not _overcommit_allowed(resource):
            errors.append(
                fe.required(f"{path}.limits", "Limit must be set for non overcommitable resources")
            )
    return errors


def _quantity_value(resource: str, raw: Any, value: Fraction, path: str) -> list[FieldError]:
    errors = []
    if value < 0:
        errors.append(fe.invalid(path, str(raw), "must be greater than or equal to 0"))
    if not _native(resource) and value.denominator != 1:
        errors.append(fe.invalid(path, str(raw), "must be an integer"))
    return errors


def _ports(ports: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for index, raw in enumerate(want_list(ports, path)):
        where = f"{path}[{index}]"
        port = want_dict(raw, where)
        name = want_str(port.get("name"), f"{where}.name")
        if name:
            problems = names.port_name(name)
            errors += invalid_each(f"{where}.name", name, problems)
            if not problems and name in seen:
                errors.append(fe.duplicate(f"{where}.name", name))
            seen.add(name)
        number = want_int(port.get("containerPort"), f"{where}.containerPort")
        if not number:
            errors.append(fe.required(f"{where}.containerPort"))
        else:
            errors += invalid_each(f"{where}.containerPort", number, names.port_number(number))
        host = want_int(port.get("hostPort"), f"{where}.hostPort")
        if host:
            errors += invalid_each(f"{where}.hostPort", host, names.port_number(host))
        protocol = want_str(port.get("protocol"), f"{where}.protocol")
        if protocol and protocol not in _PROTOCOLS:
            errors.append(fe.not_supported(f"{where}.protocol", protocol, _PROTOCOLS))
    return errors


def _env(env: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, raw in enumerate(want_list(env, path)):
        where = f"{path}[{index}]"
        var = want_dict(raw, where)
        name = want_str(var.get("name"), f"{where}.name")
        if not name:
            errors.append(fe.required(f"{where}.name"))
        else:
            errors += invalid_each(f"{where}.name", name, names.env_var_name(name))
        source = want_dict(var.get("valueFrom"), f"{where}.valueFrom")
        if source:
            kinds = [
                k
                for k in (
                    "fieldRef",
                    "resourceFieldRef",
                    "configMapKeyRef",
                    "secretKeyRef",
                    "fileKeyRef",
                )
                if source.get(k)
            ]
            if len(kinds) != 1:
                errors.append(
                    fe.invalid(
                        f"{where}.valueFrom",
                        "",
                        "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`"
                        " or `secretKeyRef`",
                    )
                )
            if var.get("value"):
                errors.append(
                    fe.invalid(
                        f"{where}.valueFrom", "", "may not be specified when `value` is not empty"
                    )
                )
    return errors


def _probe_port(handler: dict[str, Any], path: str) -> list[FieldError]:
    port = handler.get("port")
    if isinstance(port, str):
        return invalid_each(f"{path}.port", port, names.port_name(port))
    number = want_int(port, f"{path}.port")
    if number is None:
        return [fe.required(f"{path}.port")]
    return invalid_each(f"{path}.port", number, names.port_number(number))


def _probe(probe: Any, path: str) -> list[FieldError]:
    body = want_dict(probe, path)
    if not body:
        return []
    handlers = [h for h in ("exec", "httpGet", "tcpSocket", "grpc") if body.get(h) is not None]
    errors: list[FieldError] = []
    if not handlers:
        errors.append(fe.required(path, "must specify a handler type"))
    elif len(handlers) > 1:
        errors.append(
            fe.forbidden(f"{path}.{handlers[1]}", "may not specify more than 1 handler type")
        )
    for handler in ("httpGet", "tcpSocket"):
        if body.get(handler) is not None:
            errors += _probe_port(
                want_dict(body[handler], f"{path}.{handler}"), f"{path}.{handler}"
            )
    for field in (
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ):
        number = want_int(body.get(field), f"{path}.{field}")
        if number is not None and number < 0:
            errors.append(
                fe.invalid(f"{path}.{field}", number, "must be greater than or equal to 0")
            )
    return errors


def _container(raw: Any, path: str, volumes: set[str]) -> list[FieldError]:
    container = want_dict(raw, path)
    errors: list[FieldError] = []
    name = want_str(container.get("name"), f"{path}.name")
    if not name:
        errors.append(fe.required(f"{path}.name"))
    else:
        errors += invalid_each(f"{path}.name", name, names.dns1123_label(name))
    if not want_str(container.get("image"), f"{path}.image"):
        errors.append(fe.required(f"{path}.image"))
    policy = want_str(container.get("imagePullPolicy"), f"{path}.imagePullPolicy")
    if policy and policy not in _PULL_POLICIES:
        errors.append(fe.not_supported(f"{path}.imagePullPolicy", policy, _PULL_POLICIES))
    errors += _ports(container.get("ports"), f"{path}.ports")
    errors += _env(container.get("env"), f"{path}.env")
    errors += validate_resources(container.get("resources"), f"{path}.resources")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        errors += _probe(container.get(probe), f"{path}.{probe}")
    mounts: set[str] = set()
    for index, mount_raw in enumerate(
        want_list(container.get("volumeMounts"), f"{path}.volumeMounts")
    ):
        where = f"{path}.volumeMounts[{index}]"
        mount = want_dict(mount_raw, where)
        volume = want_str(mount.get("name"), f"{where}.name")
        if not volume:
            errors.append(fe.required(f"{where}.name"))
        elif volume not in volumes:
            errors.append(FieldError("FieldValueNotFound", f"{where}.name", volume))
        mount_path = want_str(mount.get("mountPath"), f"{where}.mountPath")
        if not mount_path:
            errors.append(fe.required(f"{where}.mountPath"))
        elif mount_path in mounts:
            errors.append(fe.invalid(f"{where}.mountPath", mount_path, "must be unique"))
        mounts.add(mount_path)
    return errors


def _container_restart(raw: Any, path: str, *, init: bool) -> list[FieldError]:
    """validateInitContainers / validateContainers: a container-level restartPolicy makes
    an init container a native sidecar (``Always`` only); regular containers may not set
    it, and plain init containers may not have probes."""
    container = want_dict(raw, path)
    policy = want_str(container.get("restartPolicy"), f"{path}.restartPolicy")
    if not init:
        if policy:
            return [fe.forbidden(f"{path}.restartPolicy", "may not be set for non-init containers")]
        return []
    if policy and policy != "Always":
        return [fe.not_supported(f"{path}.restartPolicy", policy, ["Always"])]
    if policy:
        return []
    return [
        fe.forbidden(
            f"{path}.{probe}", "may not be set for init containers without restartPolicy=Always"
        )
        for probe in ("livenessProbe", "readinessProbe", "startupProbe")
        if container.get(probe) is not None
    ]


def _volumes(raw: Any, path: str) -> tuple[list[FieldError], set[str]]:
    errors: list[FieldError] = []
    declared: set[str] = set()
    for index, volume_raw in enumerate(want_list(raw, path)):
        where = f"{path}[{index}]"
        volume = want_dict(volume_raw, where)
        name = want_str(volume.get("name"), f"{where}.name")
        if not name:
            errors.append(fe.required(f"{where}.name"))
        else:
            problems = names.dns1123_label(name)
            errors += invalid_each(f"{where}.name", name, problems)
            if name in declared:
                errors.append(fe.duplicate(f"{where}.name", name))
        declared.add(name)
        sources = [s for s in _VOLUME_SOURCES if volume.get(s) is not None]
        if len(sources) > 1:
            errors.append(
                fe.forbidden(f"{where}.{sources[1]}", "may not specify more than 1 volume type")
            )
    return errors, declared


def validate_pod_spec(raw: Any, path: str) -> list[FieldError]:
    """ValidatePodSpec: containers, init containers, volumes, restartPolicy, selectors."""
    spec = want_dict(raw, path)
    errors, volumes = _volumes(spec.get("volumes"), f"{path}.volumes")
    containers = want_list(spec.get("containers"), f"{path}.containers")
    if not containers:
        errors.append(fe.required(f"{path}.containers"))
    seen: set[str] = set()
    for field in ("initContainers", "containers"):
        for index, container in enumerate(want_list(spec.get(field), f"{path}.{field}")):
            where = f"{path}.{field}[{index}]"
            errors += _container(container, where, volumes)
            errors += _container_restart(container, where, init=field == "initContainers")
            name = container.get("name") if isinstance(container, dict) else None
            if isinstance(name, str) and name:
                if name in seen:
                    errors.append(fe.duplicate(f"{where}.name", name))
                seen.add(name)
    policy = want_str(spec.get("restartPolicy"), f"{path}.restartPolicy")
    if policy and policy not in RESTART_POLICIES:
        errors.append(fe.not_supported(f"{path}.restartPolicy", policy, RESTART_POLICIES))
    errors += validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    errors += validate_scheduling(spec, path)
    account = want_str(spec.get("serviceAccountName"), f"{path}.serviceAccountName")
    if account:
        errors += invalid_each(
            f"{path}.serviceAccountName", account, names.dns1123_subdomain(account)
        )
    grace = want_int(
        spec.get("terminationGracePeriodSeconds"), f"{path}.terminationGracePeriodSeconds", 64
    )
    if grace is not None and grace < 0:
        errors.append(
            fe.invalid(
                f"{path}.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0"
            )
        )
    deadline = want_int(spec.get("activeDeadlineSeconds"), f"{path}.activeDeadlineSeconds", 64)
    if deadline is not None and deadline < 1:
        errors.append(
            fe.invalid(
                f"{path}.activeDeadlineSeconds",
                deadline,
                "must be between 1 and 2147483647, inclusive",
            )
        )
    return errors


def restart_policy(spec: Any) -> str:
    """The effective restartPolicy: the API server defaults an empty one to ``Always``."""
    policy = spec.get("restartPolicy") if isinstance(spec, dict) else None
    return policy if isinstance(policy, str) and policy else "Always"


def validate_template(raw: Any, path: str, allowed_restart: list[str]) -> list[FieldError]:
    """ValidatePodTemplateSpec plus the owning kind's restart policies."""
    template = want_dict(raw, path)
    metadata = want_dict(template.get("metadata"), f"{path}.metadata")
    errors = validate_labels(metadata.get("labels"), f"{path}.labels")
    errors += validate_annotations(metadata.get("annotations"), f"{path}.annotations")
    spec = template.get("spec")
    errors += validate_pod_spec(spec, f"{path}.spec")
    policy = restart_policy(spec)
    if policy in RESTART_POLICIES and policy not in allowed_restart:
        errors.append(fe.not_supported(f"{path}.spec.restartPolicy", policy, allowed_restart))
    return errors


def pod_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    return validate_pod_spec(obj.get("spec"), "spec")
