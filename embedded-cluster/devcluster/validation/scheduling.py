"""Scheduling fields of a pod spec, by ``pkg/apis/core/validation/validation.go``.

The operator copies a user's tolerations, node selector and affinity into every pod
template; a real API server refuses a bad one and, with it, every Deployment the operator
writes. So they are checked here as the server checks them: ``validateTolerations`` (an
empty key only with ``Exists``, no value with ``Exists``, ``tolerationSeconds`` only for
``NoExecute``, supported operators and effects), ``ValidateAffinity`` (node selector
requirements and their operators, preferred weights 1..100, a topologyKey and a valid
label selector on every pod (anti-)affinity term), ``validateTopologySpreadConstraints``
and ``ValidatePodSecurityContext``'s id ranges.
"""

from __future__ import annotations

from typing import Any

from .. import fielderrors as fe
from ..fielderrors import FieldError
from . import names
from .common import (
    invalid_each,
    set_operator_problem,
    validate_selector,
    want_dict,
    want_int,
    want_list,
    want_str,
)

_EFFECTS = ["NoExecute", "NoSchedule", "PreferNoSchedule"]
_NODE_OPERATORS = ["DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"]
_UNSATISFIABLE = ["DoNotSchedule", "ScheduleAnyway"]
_MAX_ID = 2**31 - 1


def _tolerations(raw: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, item in enumerate(want_list(raw, path)):
        where = f"{path}[{index}]"
        toleration = want_dict(item, where)
        key = want_str(toleration.get("key"), f"{where}.key")
        operator = want_str(toleration.get("operator"), f"{where}.operator") or "Equal"
        value = want_str(toleration.get("value"), f"{where}.value")
        effect = want_str(toleration.get("effect"), f"{where}.effect")
        if key:
            errors += invalid_each(f"{where}.key", key, names.label_key(key))
        elif operator != "Exists":
            errors.append(
                fe.invalid(
                    f"{where}.operator",
                    operator,
                    'operator must be Exists when `key` is empty, which means "match all values'
                    ' and all keys"',
                )
            )
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errors.append(
                fe.invalid(
                    f"{where}.effect",
                    effect,
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
        if operator == "Equal":
            errors += invalid_each(f"{where}.operator", value, names.label_value(value))
        elif operator == "Exists":
            if value:
                errors.append(
                    fe.invalid(
                        f"{where}.operator",
                        value,
                        "value must be empty when `operator` is 'Exists'",
                    )
                )
        else:
            errors.append(fe.not_supported(f"{where}.operator", operator, ["Equal", "Exists"]))
        if effect and effect not in _EFFECTS:
            errors.append(fe.not_supported(f"{where}.effect", effect, _EFFECTS))
    return errors


def _node_requirements(raw: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, item in enumerate(want_list(raw, path)):
        where = f"{path}[{index}]"
        requirement = want_dict(item, where)
        key = want_str(requirement.get("key"), f"{where}.key")
        errors += invalid_each(f"{where}.key", key, names.label_key(key))
        operator = want_str(requirement.get("operator"), f"{where}.operator")
        values = want_list(requirement.get("values"), f"{where}.values")
        problem = set_operator_problem(operator, values, where)
        if problem is not None:
            errors.append(problem)
        elif operator in ("Gt", "Lt"):
            if len(values) != 1 or not str(values[0]).lstrip("-").isdigit():
                errors.append(
                    fe.required(
                        f"{where}.values",
                        "must be specified single value when `operator` is 'Lt' or 'Gt'",
                    )
                )
        elif operator not in _NODE_OPERATORS:
            errors.append(fe.not_supported(f"{where}.operator", operator, _NODE_OPERATORS))
    return errors


def _node_selector_term(raw: Any, path: str) -> list[FieldError]:
    term = want_dict(raw, path)
    return _node_requirements(term.get("matchExpressions"), f"{path}.matchExpressions") + (
        _node_requirements(term.get("matchFields"), f"{path}.matchFields")
    )


def _weight(raw: Any, path: str) -> list[FieldError]:
    weight = want_int(raw, path)
    if weight is None or not 1 <= weight <= 100:
        return [fe.invalid(path, weight, "must be in the range 1-100")]
    return []


def _pod_term(raw: Any, path: str) -> list[FieldError]:
    term = want_dict(raw, path)
    errors = validate_selector(term.get("labelSelector"), f"{path}.labelSelector")
    errors += validate_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector")
    topology = want_str(term.get("topologyKey"), f"{path}.topologyKey")
    if not topology:
        errors.append(fe.required(f"{path}.topologyKey", "can not be empty"))
    else:
        errors += invalid_each(f"{path}.topologyKey", topology, names.label_key(topology))
    return errors


def _affinity(raw: Any, path: str) -> list[FieldError]:
    affinity = want_dict(raw, path)
    errors: list[FieldError] = []
    node = want_dict(affinity.get("nodeAffinity"), f"{path}.nodeAffinity")
    if node.get("requiredDuringSchedulingIgnoredDuringExecution") is not None:
        where = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        required = want_dict(node["requiredDuringSchedulingIgnoredDuringExecution"], where)
        terms = want_list(required.get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")
        if not terms:
            errors.append(
                fe.required(
                    f"{where}.nodeSelectorTerms", "must have at least one node selector term"
                )
            )
        for index, term in enumerate(terms):
            errors += _node_selector_term(term, f"{where}.nodeSelectorTerms[{index}]")
    preferred_path = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    for index, item in enumerate(
        want_list(node.get("preferredDuringSchedulingIgnoredDuringExecution"), preferred_path)
    ):
        where = f"{preferred_path}[{index}]"
        preference = want_dict(item, where)
        errors += _weight(preference.get("weight"), f"{where}.weight")
        errors += _node_selector_term(preference.get("preference"), f"{where}.preference")
    for kind in ("podAffinity", "podAntiAffinity"):
        pod = want_dict(affinity.get(kind), f"{path}.{kind}")
        hard = f"{path}.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
        for index, term in enumerate(
            want_list(pod.get("requiredDuringSchedulingIgnoredDuringExecution"), hard)
        ):
            errors += _pod_term(term, f"{hard}[{index}]")
        soft = f"{path}.{kind}.preferredDuringSchedulingIgnoredDuringExecution"
        for index, item in enumerate(
            want_list(pod.get("preferredDuringSchedulingIgnoredDuringExecution"), soft)
        ):
            where = f"{soft}[{index}]"
            weighted = want_dict(item, where)
            errors += _weight(weighted.get("weight"), f"{where}.weight")
            errors += _pod_term(weighted.get("podAffinityTerm"), f"{where}.podAffinityTerm")
    return errors


def _spread(raw: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, item in enumerate(want_list(raw, path)):
        where = f"{path}[{index}]"
        constraint = want_dict(item, where)
        skew = want_int(constraint.get("maxSkew"), f"{where}.maxSkew")
        if skew is None or skew <= 0:
            errors.append(fe.invalid(f"{where}.maxSkew", skew, "must be greater than zero"))
        if not want_str(constraint.get("topologyKey"), f"{where}.topologyKey"):
            errors.append(fe.required(f"{where}.topologyKey", "can not be empty"))
        action = want_str(constraint.get("whenUnsatisfiable"), f"{where}.whenUnsatisfiable")
        if action not in _UNSATISFIABLE:
            errors.append(fe.not_supported(f"{where}.whenUnsatisfiable", action, _UNSATISFIABLE))
        errors += validate_selector(constraint.get("labelSelector"), f"{where}.labelSelector")
    return errors


def _ids(raw: Any, path: str) -> list[FieldError]:
    context = want_dict(raw, path)
    errors: list[FieldError] = []
    for field in ("runAsUser", "runAsGroup", "fsGroup"):
        value = want_int(context.get(field), f"{path}.{field}", 64)
        if value is not None and not 0 <= value <= _MAX_ID:
            errors.append(
                fe.invalid(f"{path}.{field}", value, f"must be between 0 and {_MAX_ID}, inclusive")
            )
    return errors


def validate_scheduling(spec: dict[str, Any], path: str) -> list[FieldError]:
    """The scheduling and identity fields of one pod spec."""
    errors = _tolerations(spec.get("tolerations"), f"{path}.tolerations")
    errors += _affinity(spec.get("affinity"), f"{path}.affinity")
    errors += _spread(spec.get("topologySpreadConstraints"), f"{path}.topologySpreadConstraints")
    errors += _ids(spec.get("securityContext"), f"{path}.securityContext")
    for index, container in enumerate(want_list(spec.get("containers"), f"{path}.containers")):
        where = f"{path}.containers[{index}]"
        errors += _ids(
            want_dict(container, where).get("securityContext"), f"{where}.securityContext"
        )
    priority = want_str(spec.get("priorityClassName"), f"{path}.priorityClassName")
    if priority:
        errors += invalid_each(
            f"{path}.priorityClassName", priority, names.dns1123_subdomain(priority)
        )
    return errors
