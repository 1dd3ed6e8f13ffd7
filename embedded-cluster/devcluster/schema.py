"""Validation of custom resources against their CRD's structural OpenAPI v3 schema.

The API server rejects (422) a custom resource, or a status write, whose fields have the
wrong type, miss a required field, leave an enum, or break a bound. An operator that
writes ``observedGeneration: "3"`` or a phase outside the enum works against a naive
emulator and fails on every real cluster; here it fails the same way, with one field
error per violation worded as apiextensions-apiserver words them
(``validation.ConvertToFieldErrors`` over kube-openapi's messages: ``spec.size in body
must be of type integer: "string"``). Lists declared ``x-kubernetes-list-type: map``
(keyed by ``x-kubernetes-list-map-keys``, e.g. status conditions keyed by ``type``) or
``set`` reject duplicates (``FieldValueDuplicate``), as ``structural/listtype`` does: a
status with two ``Ready`` conditions is refused, not stored. CEL rules
(``x-kubernetes-validations``) are ``cel.py``'s; ``format`` is not checked.
"""

from __future__ import annotations

import json
import re
from typing import Any

from . import fielderrors as fe
from .fielderrors import FieldError

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
# JSON type names, as kube-openapi reports the type it found.
_JSON_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def _json_type(value: Any) -> str:
    for python_type, name in _JSON_NAMES:
        if isinstance(value, python_type):
            return name
    return "null"


def _type_ok(schema: dict[str, Any], value: Any) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, int | str) and not isinstance(value, bool)
    wanted = schema.get("type")
    if not wanted:
        return True
    if isinstance(value, bool) and wanted != "boolean":
        return False
    if wanted == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(wanted, (object,)))


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _bounds(schema: dict[str, Any], value: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if "enum" in schema and value not in schema["enum"]:
        allowed = [v if isinstance(v, str) else json.dumps(v) for v in schema["enum"]]
        errors.append(fe.not_supported(path, value, allowed))
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            detail = (
                f"{path} in body should be greater than or equal to {_number(schema['minimum'])}"
            )
            errors.append(fe.invalid(path, value, detail))
        if "maximum" in schema and value > schema["maximum"]:
            detail = f"{path} in body should be less than or equal to {_number(schema['maximum'])}"
            errors.append(fe.invalid(path, value, detail))
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            detail = f"{path} in body should be at least {schema['minLength']} chars long"
            errors.append(fe.invalid(path, value, detail))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(fe.too_long(path, value, int(schema["maxLength"])))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            detail = f"{path} in body should match '{schema['pattern']}'"
            errors.append(fe.invalid(path, value, detail))
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            detail = f"{path} in body should have at least {schema['minItems']} items"
            errors.append(fe.invalid(path, value, detail))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(fe.too_many(path, len(value), int(schema["maxItems"])))
        errors += _list_type(schema, value, path)
    return errors


def _list_type(schema: dict[str, Any], items: list[Any], path: str) -> list[FieldError]:
    """``x-kubernetes-list-type`` ``map`` (unique keys) and ``set`` (unique items)."""
    list_type = schema.get("x-kubernetes-list-type")
    errors: list[FieldError] = []
    if list_type == "map":
        keys = [str(k) for k in schema.get("x-kubernetes-list-map-keys") or []]
        seen: set[str] = set()
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            key = {k: item[k] for k in keys if k in item}
            token = json.dumps(key, sort_keys=True)
            if token in seen:
                errors.append(fe.duplicate(f"{path}[{index}]", key))
            seen.add(token)
    elif list_type == "set":
        seen_items: set[str] = set()
        for index, item in enumerate(items):
            token = json.dumps(item, sort_keys=True)
            if token in seen_items:
                errors.append(fe.duplicate(f"{path}[{index}]", item))
            seen_items.add(token)
    return errors


def validate(schema: dict[str, Any] | None, value: Any, path: str = "") -> list[FieldError]:
    """Every violation of ``schema`` in ``value``, as the API server reports them."""
    if not schema or not isinstance(schema, dict):
        return []
    where = path or "<root>"
    if value is None:
        if schema.get("nullable"):
            return []
        wanted = schema.get("type", "object")
        return [fe.type_invalid(where, "null", f'{where} in body must be of type {wanted}: "null"')]
    if not _type_ok(schema, value):
        found = _json_type(value)
        wanted = "integer or string" if schema.get("x-kubernetes-int-or-string") else schema["type"]
        detail = f'{where} in body must be of type {wanted}: "{found}"'
        return [fe.type_invalid(where, found, detail)]
    errors = _bounds(schema, value, where)
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for required in schema.get("required") or []:
            if required not in value:
                errors.append(fe.required(f"{path}.{required}" if path else str(required)))
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if not path and key in ("apiVersion", "kind", "metadata"):
                continue
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            errors += validate(sub, item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            errors += validate(schema.get("items"), item, f"{where}[{index}]")
    return errors


def unknown_fields(schema: dict[str, Any] | None, value: Any, path: str = "") -> list[str]:
    """The fields a structural schema does not declare (what ``prune`` would drop), as
    ``fieldValidation=Strict`` reports them: ``spec.noSuchField``, ``spec.list[0].x``."""
    if not schema or not isinstance(schema, dict):
        return []
    found: list[str] = []
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or extra is True
        for key, item in value.items():
            if not path and key in ("apiVersion", "kind", "metadata"):
                continue
            where = f"{path}.{key}" if path else str(key)
            if key in properties:
                found += unknown_fields(properties[key], item, where)
            elif isinstance(extra, dict):
                found += unknown_fields(extra, item, where)
            elif not keep_unknown:
                found.append(where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += unknown_fields(schema.get("items"), item, f"{path}[{index}]")
    return found
