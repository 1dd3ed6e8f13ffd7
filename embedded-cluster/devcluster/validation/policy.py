"""PodDisruptionBudgets and HorizontalPodAutoscalers, by ``pkg/apis/policy/validation``
and ``pkg/apis/autoscaling/validation``.

A PDB sets ``minAvailable`` or ``maxUnavailable``, never both, each a non-negative number
or a percentage up to 100%, over a valid label selector. An HPA names its target
(``scaleTargetRef.kind`` and ``name``), keeps ``minReplicas`` >= 1 and ``maxReplicas``
>= ``minReplicas``. The rules are keyed by kind and apply whenever the devcluster serves
the kind.
"""

from __future__ import annotations

import re
from typing import Any

from .. import fielderrors as fe
from ..fielderrors import FieldError
from .common import validate_selector, want_dict, want_int, want_str

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
    return errors
