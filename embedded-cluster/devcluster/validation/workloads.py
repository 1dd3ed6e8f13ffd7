"""Deployments, ReplicaSets and Jobs, by ``pkg/apis/apps/validation`` and
``pkg/apis/batch/validation``.

``replicas: -1`` ("must be greater than or equal to 0"), a Deployment whose template
says ``restartPolicy: Never`` (only ``Always``), a Job whose template restarts
``Always`` (only ``OnFailure`` and ``Never``; an empty policy defaults to ``Always`` and
is refused the same way), negative counts and deadlines, a RollingUpdate that can make
no progress (``maxSurge`` and ``maxUnavailable`` both 0). The pod template itself is
checked by ``pods.validate_template``.
"""

from __future__ import annotations

import re
from typing import Any

from .. import fielderrors as fe
from ..fielderrors import FieldError
from .common import non_negative, validate_selector, want_dict, want_int, want_str
from .pods import validate_template

_PERCENT = re.compile(r"^[0-9]+%$")


def _int_or_percent(value: Any, path: str) -> tuple[list[FieldError], int | None]:
    """An IntOrString surge/unavailability: its errors and whether it is zero."""
    if isinstance(value, str):
        if not _PERCENT.match(value):
            return [
                fe.invalid(
                    path,
                    value,
                    "a valid percent string must be a numeric string followed by an ending '%' "
                    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                )
            ], None
        percent = int(value[:-1])
        if percent > 100:
            return [fe.invalid(path, value, "must not be greater than 100%")], None
        return [], percent
    number = want_int(value, path)
    if number is not None and number < 0:
        return [fe.invalid(path, number, "must be greater than or equal to 0")], number
    return [], number


def _replica_spec(spec: dict[str, Any]) -> list[FieldError]:
    errors = non_negative(spec.get("replicas"), "spec.replicas")
    errors += non_negative(spec.get("minReadySeconds"), "spec.minReadySeconds")
    selector = want_dict(spec.get("selector"), "spec.selector")
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        errors.append(
            fe.invalid("spec.selector", selector, "empty selector is invalid for deployment")
        )
    errors += validate_selector(selector, "spec.selector")
    errors += validate_template(spec.get("template"), "spec.template", ["Always"])
    return errors


def deployment_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = want_dict(obj.get("spec"), "spec")
    errors = _replica_spec(spec)
    errors += non_negative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit")
    deadline = want_int(spec.get("progressDeadlineSeconds"), "spec.progressDeadlineSeconds")
    ready = want_int(spec.get("minReadySeconds"), "spec.minReadySeconds") or 0
    if deadline is not None:
        errors += non_negative(deadline, "spec.progressDeadlineSeconds")
        if deadline <= ready:
            errors.append(
                fe.invalid(
                    "spec.progressDeadlineSeconds",
                    deadline,
                    "must be greater than minReadySeconds",
                )
            )
    strategy = want_dict(spec.get("strategy"), "spec.strategy")
    kind = want_str(strategy.get("type"), "spec.strategy.type") or "RollingUpdate"
    rolling = want_dict(strategy.get("rollingUpdate"), "spec.strategy.rollingUpdate")
    if kind == "Recreate" and rolling:
        errors.append(
            fe.forbidden(
                "spec.strategy.rollingUpdate",
                "may not be specified when strategy `type` is 'Recreate'",
            )
        )
    elif kind == "RollingUpdate" and rolling:
        surge_errors, surge = _int_or_percent(
            rolling.get("maxSurge"), "spec.strategy.rollingUpdate.maxSurge"
        )
        down_errors, down = _int_or_percent(
            rolling.get("maxUnavailable"), "spec.strategy.rollingUpdate.maxUnavailable"
        )
        errors += surge_errors + down_errors
        if surge == 0 and down == 0:
            errors.append(
                fe.invalid(
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    rolling.get("maxUnavailable"),
                    "may not be 0 when `maxSurge` is 0",
                )
            )
    elif kind not in ("Recreate", "RollingUpdate"):
        errors.append(fe.not_supported("spec.strategy.type", kind, ["Recreate", "RollingUpdate"]))
    return errors


def replicaset_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    return _replica_spec(want_dict(obj.get("spec"), "spec"))


def job_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = want_dict(obj.get("spec"), "spec")
    errors: list[FieldError] = []
    for field in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        errors += non_negative(spec.get(field), f"spec.{field}")
    deadline = want_int(spec.get("activeDeadlineSeconds"), "spec.activeDeadlineSeconds", 64)
    if deadline is not None and deadline <= 0:
        errors.append(fe.invalid("spec.activeDeadlineSeconds", deadline, "must be greater than 0"))
    errors += validate_selector(spec.get("selector"), "spec.selector")
    errors += validate_template(spec.get("template"), "spec.template", ["OnFailure", "Never"])
    return errors
