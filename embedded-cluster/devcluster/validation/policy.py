"""PodDisruptionBudgets and HorizontalPodAutoscalers, by ``pkg/apis/policy/validation``
and ``pkg/apis/autoscaling/validation``.

A PDB sets ``minAvailable`` or ``maxUnavailable``, never both, each a non-negative number
or a percentage up to 100%, over a valid label selector. An HPA names its target
(``scaleTargetRef.kind`` and ``name``), keeps ``minReplicas`` >= 1 and ``maxReplicas``
>= ``minReplicas``, and gives each metric its source and a positive target
(``validateMetricSpec``: a Pods metric is an ``AverageValue``). The rules are keyed by
kind and apply whenever the devcluster serves the kind.
"""

from __future__ import annotations

import re
from typing import Any

from .. import fielderrors as fe
from ..fielderrors import FieldError
from .common import DecodeError, validate_selector, want_dict, want_int, want_list, want_str
from .quantity import QuantityError, parse_quantity

_PERCENT = re.compile(r"^[0-9]+%$")


def _pdb_bound(value: Any, path: str) -> list[FieldError]:
    if value is None:
        return []
    if isinstance(value, str):
        if not _PERCENT.match(value):
            return [fe.invalid(path, value, "must be an integer or percentage (e.g '5%')")]
        if int(value[:-1]) > 100:
            return [fe.invalid(path, value, "must not be greater than 100%")]
        return []
    number = want_int(value, path)
    if number is not None and number < 0:
        return [fe.invalid(path, number, "must be greater than or equal to 0")]
    return []


def pdb_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = want_dict(obj.get("spec"), "spec")
    errors: list[FieldError] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errors.append(
            fe.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set")
        )
    errors += _pdb_bound(spec.get("minAvailable"), "spec.minAvailable")
    errors += _pdb_bound(spec.get("maxUnavailable"), "spec.maxUnavailable")
    errors += validate_selector(spec.get("selector"), "spec.selector")
    return errors


_METRIC_TYPES = ["ContainerResource", "External", "Object", "Pods", "Resource"]
_SOURCE = {
    "ContainerResource": "containerResource",
    "External": "external",
    "Object": "object",
    "Pods": "pods",
    "Resource": "resource",
}
_TARGET_TYPES = ["AverageValue", "Utilization", "Value"]


def _metric_target(raw: Any, path: str, kind: str) -> list[FieldError]:
    """validateMetricTarget: a supported type with its own field, positive quantities."""
    target = want_dict(raw, path)
    target_type = want_str(target.get("type"), f"{path}.type")
    if not target_type:
        return [fe.required(f"{path}.type", "must specify a metric target type")]
    if target_type not in _TARGET_TYPES:
        return [fe.not_supported(f"{path}.type", target_type, _TARGET_TYPES)]
    errors: list[FieldError] = []
    for field in ("value", "averageValue"):
        if target.get(field) is None:
            continue
        try:
            amount = parse_quantity(target[field])
        except QuantityError as exc:
            raise DecodeError(str(exc)) from exc
        if amount <= 0:
            errors.append(fe.invalid(f"{path}.{field}", str(target[field]), "must be positive"))
    if kind == "Pods" and target_type != "AverageValue":
        errors.append(
            fe.required(f"{path}.averageValue", "must specify a positive target averageValue")
        )
    if target_type == "AverageValue" and target.get("averageValue") is None:
        errors.append(
            fe.required(f"{path}.averageValue", "must set averageValue when type is AverageValue")
        )
    return errors


def _metrics(raw: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, item in enumerate(want_list(raw, path)):
        where = f"{path}[{index}]"
        metric = want_dict(item, where)
        kind = want_str(metric.get("type"), f"{where}.type")
        if kind not in _METRIC_TYPES:
            errors.append(fe.not_supported(f"{where}.type", kind, _METRIC_TYPES))
            continue
        source_path = f"{where}.{_SOURCE[kind]}"
        source = want_dict(metric.get(_SOURCE[kind]), source_path)
        if not source:
            errors.append(
                fe.required(source_path, "must populate information for the given metric source")
            )
            continue
        if kind in ("Pods", "Object", "External"):
            described = want_dict(source.get("metric"), f"{source_path}.metric")
            if not want_str(described.get("name"), f"{source_path}.metric.name"):
                errors.append(
                    fe.required(f"{source_path}.metric.name", "must specify a metric name")
                )
        errors += _metric_target(source.get("target"), f"{source_path}.target", kind)
    return errors


def hpa_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = want_dict(obj.get("spec"), "spec")
    errors: list[FieldError] = []
    target = want_dict(spec.get("scaleTargetRef"), "spec.scaleTargetRef")
    for field in ("kind", "name"):
        if not want_str(target.get(field), f"spec.scaleTargetRef.{field}"):
            errors.append(fe.required(f"spec.scaleTargetRef.{field}"))
    low = want_int(spec.get("minReplicas"), "spec.minReplicas")
    high = want_int(spec.get("maxReplicas"), "spec.maxReplicas")
    if low is not None and low < 1:
        errors.append(fe.invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
    if high is None:
        errors.append(fe.required("spec.maxReplicas"))
    elif high < 1:
        errors.append(fe.invalid("spec.maxReplicas", high, "must be greater than or equal to 1"))
    elif low is not None and high < low:
        errors.append(
            fe.invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`")
        )
    errors += _metrics(spec.get("metrics"), "spec.metrics")
    return errors
