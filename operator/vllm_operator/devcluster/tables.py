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


def _cell(obj: dict[str, Any], column: dict[str, Any], now: datetime.datetime) -> Any:
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
