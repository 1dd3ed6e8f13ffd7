"""The part of JSON Schema a quality suite needs, with no dependency.

Suites check that a model's JSON has the right shape and values: types, required keys,
enums and constants, string patterns and lengths, number ranges, arrays of a given item
shape. That subset (listed in ``KEYWORDS``) is small enough to implement and test here;
a keyword outside it is rejected when the suite is loaded, never silently ignored, so a
schema never passes because a check it relies on was skipped.
"""

from __future__ import annotations

import re
from typing import Any

from vllm_operator.errors import VLLMOperatorError

KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "allOf",
        "anyOf",
        "not",
        "title",
        "description",
        "$schema",
    }
)

_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}


class SchemaUnsupported(VLLMOperatorError, ValueError):
    """The schema uses something outside the supported subset."""


def check_schema(schema: Any, path: str = "$") -> None:
    """Raise ``SchemaUnsupported`` naming the first unsupported or malformed part."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise SchemaUnsupported(f"{path}: a schema must be an object or a boolean")
    unknown = sorted(set(schema) - KEYWORDS)
    if unknown:
        raise SchemaUnsupported(f"{path}: unsupported keyword(s) {', '.join(unknown)}")
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []:
        if kind not in _TYPES:
            raise SchemaUnsupported(f"{path}.type: unknown type {kind!r}")
    if "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except (re.error, TypeError) as exc:
            raise SchemaUnsupported(f"{path}.pattern: {exc}") from exc
    for name, sub in (schema.get("properties") or {}).items():
        check_schema(sub, f"{path}.properties.{name}")
    for key in ("items", "not"):
        if key in schema:
            check_schema(schema[key], f"{path}.{key}")
    extra = schema.get("additionalProperties")
    if extra is not None and not isinstance(extra, bool):
        check_schema(extra, f"{path}.additionalProperties")
    for key in ("allOf", "anyOf"):
        for i, sub in enumerate(schema.get(key) or []):
            check_schema(sub, f"{path}.{key}[{i}]")


def errors(instance: Any, schema: Any, path: str = "$") -> list[str]:
    """Every way ``instance`` breaks ``schema`` (empty list: valid)."""
    if schema is True:
        return []
    if schema is False:
        return [f"{path}: no value is allowed here"]
    found: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        allowed = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is_type(instance, k) for k in allowed):
            return [f"{path}: expected {'/'.join(allowed)}, got {_type_name(instance)}"]
    if "const" in schema and not _equal(instance, schema["const"]):
        found.append(f"{path}: expected {schema['const']!r}, got {instance!r}")
    if "enum" in schema and not any(_equal(instance, e) for e in schema["enum"]):
        found.append(f"{path}: {instance!r} is not one of {schema['enum']!r}")
    if isinstance(instance, str):
        found += _string(instance, schema, path)
    if _is_type(instance, "number"):
        found += _number(instance, schema, path)
    if isinstance(instance, list):
        found += _array(instance, schema, path)
    if isinstance(instance, dict):
        found += _object(instance, schema, path)
    for sub in schema.get("allOf") or []:
        found += errors(instance, sub, path)
    if "anyOf" in schema and all(errors(instance, s, path) for s in schema["anyOf"]):
        found.append(f"{path}: matches none of anyOf")
    if "not" in schema and not errors(instance, schema["not"], path):
        found.append(f"{path}: must not match the 'not' schema")
    return found


def _string(value: str, schema: dict[str, Any], path: str) -> list[str]:
    found = []
    if "minLength" in schema and len(value) < schema["minLength"]:
        found.append(f"{path}: shorter than {schema['minLength']}")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        found.append(f"{path}: longer than {schema['maxLength']}")
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        found.append(f"{path}: {value!r} does not match {schema['pattern']!r}")
    return found


def _number(value: float, schema: dict[str, Any], path: str) -> list[str]:
    found = []
    if "minimum" in schema and value < schema["minimum"]:
        found.append(f"{path}: {value} < minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        found.append(f"{path}: {value} > maximum {schema['maximum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        found.append(f"{path}: {value} <= exclusiveMinimum {schema['exclusiveMinimum']}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        found.append(f"{path}: {value} >= exclusiveMaximum {schema['exclusiveMaximum']}")
    return found


def _array(value: list[Any], schema: dict[str, Any], path: str) -> list[str]:
    found = []
    if "minItems" in schema and len(value) < schema["minItems"]:
        found.append(f"{path}: fewer than {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        found.append(f"{path}: more than {schema['maxItems']} items")
    if "items" in schema:
        for i, item in enumerate(value):
            found += errors(item, schema["items"], f"{path}[{i}]")
    return found


def _object(value: dict[str, Any], schema: dict[str, Any], path: str) -> list[str]:
    found = [f"{path}: missing {key!r}" for key in schema.get("required", []) if key not in value]
    props: dict[str, Any] = schema.get("properties") or {}
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in props:
            found += errors(item, props[key], f"{path}.{key}")
        elif extra is False:
            found.append(f"{path}: unexpected key {key!r}")
        elif isinstance(extra, dict):
            found += errors(item, extra, f"{path}.{key}")
    return found


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, int | float)
    return {"string": str, "array": list, "object": dict}[kind] is type(value)


def _type_name(value: Any) -> str:
    for kind in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, kind):
            return kind
    return type(value).__name__


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, str) or isinstance(b, str) or a is None or b is None:
        return type(a) is type(b) and a == b
    return isinstance(a, int | float) and isinstance(b, int | float) and a == b
