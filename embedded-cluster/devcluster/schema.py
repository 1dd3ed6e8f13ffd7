"""Validation of custom resources against their CRD's structural OpenAPI v3 schema.

The API server rejects (422) a custom resource, or a status write, whose fields have the
wrong type, miss a required field, leave an enum, or break a bound. An operator that
writes ``observedGeneration: "3"`` or a phase outside the enum works against a naive
emulator and fails on every real cluster; here it fails the same way. CEL rules
(``x-kubernetes-validations``) and ``format`` are not checked.
"""

from __future__ import annotations

import re
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


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


def _bounds(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in schema["enum"])
        errors.append(f"{path}: Unsupported value: {value!r}: supported values: {allowed}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: Invalid value: {value}: should be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: Invalid value: {value}: should be <= {schema['maximum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                f"{path}: Invalid value: {value!r}: should be at least "
                f"{schema['minLength']} chars long"
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: Too long: may not be more than {schema['maxLength']} bytes")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: Invalid value: {value!r}: should match '{schema['pattern']}'")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: Invalid value: should have at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(
                f"{path}: Too many: {len(value)}: must have at most {schema['maxItems']} items"
            )
    return errors


def validate(schema: dict[str, Any] | None, value: Any, path: str = "") -> list[str]:
    """Every violation of ``schema`` in ``value``, as the API server words them."""
    if not schema or not isinstance(schema, dict):
        return []
    where = path or "<root>"
    if value is None:
        return (
            []
            if schema.get("nullable")
            else [
                f'{where}: Invalid value: "null": '
                f"{where} in body must be of type "
                f"{schema.get('type', 'object')}"
            ]
        )
    if not _type_ok(schema, value):
        return [
            f"{where}: Invalid value: {type(value).__name__}: {where} in body must be of "
            f"type {schema.get('type')}"
        ]
    errors = _bounds(schema, value, where)
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for required in schema.get("required") or []:
            if required not in value:
                errors.append(f"{path + '.' if path else ''}{required}: Required value")
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
