"""Server-side ``Table`` output: what ``kubectl get`` prints.

kubectl asks for ``application/json;as=Table;v=v1;g=meta.k8s.io`` and prints the columns the
server chooses. For a CRD those are Name plus its ``additionalPrinterColumns`` (the API
server does not add Age when columns are declared; a CRD declares its own Age column of
type ``date``), or Name and Age when it declares none. Date cells are rendered as ages
("5m"), exactly as the API server does before kubectl sees them.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

from .jsonpath import JsonPathError, find
from .objects import parse_timestamp
from .resources import ResourceType

_NAME_COLUMN = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace.",
    "priority": 0,
}
_DEFAULT_COLUMNS = (
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "priority": 0},
)


def wants_table(accept: str) -> bool:
    return any("as=Table" in part for part in accept.split(","))


def human_duration(seconds: float) -> str:
    """kubectl's HumanDuration ("45s", "3m20s", "5h", "2d3h", "1y20d")."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{hours // (24 * 365)}y"


def columns_of(rtype: ResourceType) -> list[dict[str, Any]]:
    return [dict(c) for c in (rtype.columns or _DEFAULT_COLUMNS)]


def _section(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _pod_status(pod: dict[str, Any]) -> str:
    """kubectl's STATUS: a waiting/terminated reason (CrashLoopBackOff, ...) over the phase."""
    status = _section(pod, "status")
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        reason = (state.get("waiting") or {}).get("reason") or (state.get("terminated") or {}).get(
            "reason"
        )
        if reason and reason != "Completed":
            return str(reason)
    return str(status.get("phase") or "Unknown")


def _job_status(job: dict[str, Any]) -> str:
    for condition in _section(job, "status").get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return str(condition["type"])
    return "Running"


COMPUTED: dict[str, Callable[[dict[str, Any]], Any]] = {
    "pod-ready": lambda p: "{}/{}".format(
        sum(1 for c in _section(p, "status").get("containerStatuses") or [] if c.get("ready")),
        len(_section(p, "spec").get("containers") or []),
    ),
    "pod-status": _pod_status,
    "pod-restarts": lambda p: sum(
        int(c.get("restartCount") or 0)
        for c in _section(p, "status").get("containerStatuses") or []
    ),
    "deployment-ready": lambda d: "{}/{}".format(
        _section(d, "status").get("readyReplicas") or 0, _section(d, "spec").get("replicas", 1)
    ),
    "deployment-updated": lambda d: _section(d, "status").get("updatedReplicas") or 0,
    "deployment-available": lambda d: _section(d, "status").get("availableReplicas") or 0,
    "job-status": _job_status,
    "job-completions": lambda j: "{}/{}".format(
        _section(j, "status").get("succeeded") or 0, _section(j, "spec").get("completions", 1)
    ),
    "service-ports": lambda s: (
        ",".join(
            f"{p.get('port')}/{p.get('protocol', 'TCP')}"
            for p in _section(s, "spec").get("ports") or []
        )
        or "<none>"
    ),
    "service-selector": lambda s: (
        ",".join(f"{k}={v}" for k, v in sorted((_section(s, "spec").get("selector") or {}).items()))
        or "<none>"
    ),
}


def _cell(obj: dict[str, Any], column: dict[str, Any], now: datetime.datetime) -> Any:
    if column.get("compute") in COMPUTED:
        return COMPUTED[column["compute"]](obj)
    try:
        values = find(obj, str(column.get("jsonPath", "")))
    except JsonPathError:
        return None
    if not values:
        return None
    value = values[0] if len(values) == 1 else ",".join(str(v) for v in values)
    kind = column.get("type", "string")
    if kind == "date" and isinstance(value, str):
        try:
            return human_duration((now - parse_timestamp(value)).total_seconds())
        except ValueError:
            return value
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "string" and isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return value


def table(
    rtype: ResourceType,
    objects: list[dict[str, Any]],
    resource_version: str,
    now: datetime.datetime,
    include_object: str = "Metadata",
) -> dict[str, Any]:
    columns = columns_of(rtype)
    definitions = [_NAME_COLUMN] + [
        {
            "name": c.get("name", ""),
            "type": "string" if c.get("type") == "date" else c.get("type", "string"),
            "format": c.get("format", ""),
            "description": c.get("description", ""),
            "priority": int(c.get("priority", 0)),
        }
        for c in columns
    ]
    rows = []
    for obj in objects:
        row: dict[str, Any] = {
            "cells": [obj.get("metadata", {}).get("name")] + [_cell(obj, c, now) for c in columns]
        }
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": definitions,
        "rows": rows,
    }
