"""Services, ConfigMaps, Events and Pods, by ``pkg/apis/core/validation``.

Services (``ValidateService``): ports 1..65535 ("must be between 1 and 65535,
inclusive"), a name on every port once there are several, port names DNS labels and
unique, ``targetPort`` a port number or an IANA_SVC_NAME, supported protocols and types,
a selector of valid labels. ConfigMaps (``ValidateConfigMap``): keys of
``[-._a-zA-Z0-9]+``, no key in both ``data`` and ``binaryData``, at most 1 MiB. Core
Events keep the legacy rules only (``legacyValidateEvent``: the involved object's
namespace must be the Event's), which is why their names are not checked.
"""

from __future__ import annotations

import base64
from typing import Any

from .. import fielderrors as fe
from ..fielderrors import FieldError
from . import names
from .common import invalid_each, key, validate_labels, want_dict, want_int, want_list, want_str

_SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
_PROTOCOLS = ["SCTP", "TCP", "UDP"]
CONFIG_MAP_MAX = 1024 * 1024


def _service_port(port: dict[str, Any], where: str, require_name: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    name = want_str(port.get("name"), f"{where}.name")
    if require_name and not name:
        errors.append(fe.required(f"{where}.name"))
    elif name:
        errors += invalid_each(f"{where}.name", name, names.dns1123_label(name))
    number = want_int(port.get("port"), f"{where}.port")
    if number is None:
        errors.append(fe.required(f"{where}.port"))
    else:
        errors += invalid_each(f"{where}.port", number, names.port_number(number))
    protocol = want_str(port.get("protocol"), f"{where}.protocol")
    if protocol and protocol not in _PROTOCOLS:
        errors.append(fe.not_supported(f"{where}.protocol", protocol, _PROTOCOLS))
    target = port.get("targetPort")
    if isinstance(target, str):
        errors += invalid_each(f"{where}.targetPort", target, names.port_name(target))
    elif target is not None:
        number = want_int(target, f"{where}.targetPort")
        if number is not None:
            errors += invalid_each(f"{where}.targetPort", number, names.port_number(number))
    node_port = want_int(port.get("nodePort"), f"{where}.nodePort")
    if node_port:
        errors += invalid_each(f"{where}.nodePort", node_port, names.port_number(node_port))
    return errors


def service_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = want_dict(obj.get("spec"), "spec")
    errors: list[FieldError] = []
    kind = want_str(spec.get("type"), "spec.type") or "ClusterIP"
    if kind not in _SERVICE_TYPES:
        errors.append(fe.not_supported("spec.type", kind, _SERVICE_TYPES))
    ports = want_list(spec.get("ports"), "spec.ports")
    headless = spec.get("clusterIP") == "None"
    if not ports and kind != "ExternalName" and not headless:
        errors.append(fe.required("spec.ports"))
    seen_names: set[str] = set()
    seen_ports: set[tuple[Any, str]] = set()
    for index, raw in enumerate(ports):
        where = f"spec.ports[{index}]"
        port = want_dict(raw, where)
        errors += _service_port(port, where, require_name=len(ports) > 1)
        name = port.get("name")
        if isinstance(name, str) and name:
            if name in seen_names:
                errors.append(fe.duplicate(f"{where}.name", name))
            seen_names.add(name)
        identity = (port.get("port"), str(port.get("protocol") or "TCP"))
        if identity in seen_ports:
            errors.append(fe.duplicate(where, {"port": identity[0], "protocol": identity[1]}))
        seen_ports.add(identity)
    errors += validate_labels(spec.get("selector"), "spec.selector")
    return errors


def config_map_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errors: list[FieldError] = []
    total = 0
    data = want_dict(obj.get("data"), "data")
    binary = want_dict(obj.get("binaryData"), "binaryData")
    for name, value in data.items():
        errors += invalid_each(key("data", name), name, names.config_map_key(name))
        total += len(want_str(value, key("data", name)).encode())
    for name, value in binary.items():
        errors += invalid_each(key("binaryData", name), name, names.config_map_key(name))
        if name in data:
            errors.append(
                fe.invalid(key("binaryData", name), name, "duplicate of key present in data")
            )
        try:
            total += len(base64.b64decode(want_str(value, key("binaryData", name)), validate=True))
        except ValueError:
            errors.append(fe.invalid(key("binaryData", name), "<binary>", "must be base64"))
    if total > CONFIG_MAP_MAX:
        errors.append(fe.too_long("", "", CONFIG_MAP_MAX))
    return errors + immutable_rules(obj, old, ("data", "binaryData"))


def immutable_rules(
    obj: dict[str, Any], old: dict[str, Any] | None, fields: tuple[str, ...]
) -> list[FieldError]:
    """ValidateConfigMapUpdate/ValidateSecretUpdate: once ``immutable: true`` is stored,
    neither the flag nor the data may change."""
    if old is None or old.get("immutable") is not True:
        return []
    detail = "field is immutable when `immutable` is set"
    errors = [] if obj.get("immutable") is True else [fe.forbidden("immutable", detail)]
    return errors + [fe.forbidden(f, detail) for f in fields if obj.get(f) != old.get(f)]


def secret_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    return immutable_rules(obj, old, ("data",))


def lease_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """ValidateLeaseSpec: a positive duration, no negative transition count."""
    spec = want_dict(obj.get("spec"), "spec")
    errors: list[FieldError] = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        errors.append(fe.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        detail = "must be greater than or equal to 0"
        errors.append(fe.invalid("spec.leaseTransitions", transitions, detail))
    return errors


def event_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """legacyValidateEvent: the involved object's namespace must be the Event's own."""
    involved = want_dict(obj.get("involvedObject"), "involvedObject")
    metadata = want_dict(obj.get("metadata"), "metadata")
    namespace = want_str(metadata.get("namespace"), "metadata.namespace")
    theirs = want_str(involved.get("namespace"), "involvedObject.namespace")
    allowed = {"", "default"} if not obj.get("eventTime") else {"default", "kube-system"}
    if (theirs and theirs != namespace) or (not theirs and namespace not in allowed):
        return [fe.invalid("involvedObject.namespace", theirs, "does not match event.namespace")]
    return []
