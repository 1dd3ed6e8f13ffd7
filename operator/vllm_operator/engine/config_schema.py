"""Checking a JSON config value against the schema of vLLM's config dataclass, as pydantic would.

vLLM's JSON-valued options (``-cc``, ``--kv-transfer-config``, ...) are read by
``TypeAdapter(ConfigClass).validate_json`` at argparse time: a key the class lacks, or a
value of the wrong type, stops ``vllm serve`` with exit 2. The extractor records each
class's pydantic JSON schema per release (``flagdata.Option.config_schema``), and the
fields vLLM's own validators convert first (``config_custom``: skipped here but for a JSON
object given to an object-typed field; the compilation mode's conversion is
``config_time``). This module walks a value over that schema with
pydantic's lax rules for JSON input, and refuses only what pydantic surely refuses: a
schema construct it does not model passes, so a valid config is never refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from vllm_operator.errors import VLLMOperatorError

_INT: TypeAdapter[int] = TypeAdapter(int)
_FLOAT: TypeAdapter[float] = TypeAdapter(float)
_MAX_TEXT = 4300  # Python's own limit on int digits; longer is no level or mode anyway
_BOOL_STRINGS = {"0", "1", "true", "false", "yes", "no", "on", "off", "t", "f", "y", "n"}
_MAX_DEPTH = 32
_MAX_STEPS = 20_000


class SchemaMismatch(VLLMOperatorError):
    """pydantic would refuse the value: ``path`` (dotted) and its reason."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


def lax_int(value: Any) -> int | None:
    """pydantic's lax reading of a value as an integer, or None where it refuses.

    vLLM's config classes are pydantic dataclasses, so this asks pydantic itself: a string
    as ``VllmConfig`` gets it (surrounding whitespace, a sign, leading zeros, underscores,
    a zero fraction pass: ``" +0_0.00 "`` is 0, and quirks such as ``"0-1"`` being -1), any
    other value as JSON, the way ``-cc`` reaches ``CompilationConfig``. Held to vLLM's
    recorded conversions of every recorded release by tests/unit/engine/test_config_time.py.
    """
    if isinstance(value, str):
        if len(value) > _MAX_TEXT:
            return None
        try:
            return _INT.validate_python(value)
        except (ValidationError, ValueError):
            return None
    if isinstance(value, (list, dict)) or value is None:
        return None
    try:
        return _INT.validate_json(json.dumps(value))
    except (ValidationError, ValueError):
        return None


def lax_float(text: str) -> float | None:
    """pydantic's lax reading of a string as a float (``" 1e3 "``, ``"inf"``), or None
    where it refuses; asked of pydantic itself, as ``lax_int`` is."""
    if len(text) > _MAX_TEXT:
        return None
    try:
        return _FLOAT.validate_python(text)
    except (ValidationError, ValueError):
        return None


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
        if isinstance(found, dict):
            return {**found, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _type_ok(kind: str, value: Any) -> bool | None:
    """Whether pydantic (lax, JSON input) takes ``value`` as ``kind``; None: not modelled."""
    if kind == "null":
        return value is None
    if kind == "integer":
        return lax_int(value) is not None
    if kind == "number":
        if isinstance(value, (bool, int, float)):
            return True
        return lax_float(value) is not None if isinstance(value, str) else False
    if kind == "boolean":
        if isinstance(value, bool):
            return True
        if isinstance(value, int):
            return value in (0, 1)
        if isinstance(value, str):
            return value.strip().lower() in _BOOL_STRINGS
        return None if isinstance(value, float) else False
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "callable":  # recorded for Callable fields: no command-line value is one
        return False
    return None


class _Walk:
    """One check: the schema's root (for ``$ref``) and a step budget (alternatives, as
    ``anyOf``, over nested values could multiply the work)."""

    def __init__(self, root: dict[str, Any], steps: int) -> None:
        self.root = root
        self.left = steps

    def spend(self) -> bool:
        self.left -= 1
        return self.left >= 0


def _check(walk: _Walk, schema: Any, value: Any, path: str, depth: int) -> None:
    if not isinstance(schema, dict) or depth > _MAX_DEPTH or not walk.spend():
        return
    schema = _resolve(schema, walk.root)
    _check_alternatives(walk, schema, value, path, depth)
    if "enum" in schema:
        _check_enum(schema["enum"], value, path)
        return
    if "const" in schema:  # a Literal of one member
        _check_enum([schema["const"]], value, path)
        return
    kind = schema.get("type")
    if isinstance(kind, str):
        ok = _type_ok(kind, value)
        if ok is False:
            raise SchemaMismatch(path, f"Input should be {_NAMES.get(kind, 'a valid ' + kind)}")
        if ok is None:
            return
    _check_bounds(schema, value, path)
    _check_items(walk, schema, value, path, depth)


def _check_alternatives(walk: _Walk, schema: dict[str, Any], value: Any, path: str,
                        depth: int) -> None:  # fmt: skip
    """``anyOf``/``oneOf``: the first branch that takes the value wins; none: the first
    branch's reason."""
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if not isinstance(branches, list) or not branches:
            continue
        errors = []
        for branch in branches:
            try:
                _check(walk, branch, value, path, depth + 1)
                break
            except SchemaMismatch as e:
                errors.append(e)
        else:
            raise errors[0]


def _check_enum(members: list[Any], value: Any, path: str) -> None:
    if all(isinstance(m, str) for m in members):
        if not (isinstance(value, str) and value in members):
            raise SchemaMismatch(path, f"Input should be {_one_of(members)}")
    elif all(isinstance(m, int) and not isinstance(m, bool) for m in members) and (
        lax_int(value) not in members
    ):
        raise SchemaMismatch(path, f"Input should be {_one_of(members)}")


_BOUNDS: tuple[tuple[str, Callable[[float, float], bool], str], ...] = (
    ("minimum", lambda v, b: v >= b, "greater than or equal to"),
    ("exclusiveMinimum", lambda v, b: v > b, "greater than"),
    ("maximum", lambda v, b: v <= b, "less than or equal to"),
    ("exclusiveMaximum", lambda v, b: v < b, "less than"),
)


def _check_bounds(schema: dict[str, Any], value: Any, path: str) -> None:
    """pydantic's ``ge``/``gt``/``le``/``lt`` on a number (a bool or text is not compared:
    what lax reading makes of it is not modelled here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    for key, holds, words in _BOUNDS:
        bound = schema.get(key)
        if isinstance(bound, bool) or not isinstance(bound, (int, float)):
            continue
        if not holds(value, bound):
            raise SchemaMismatch(path, f"Input should be {words} {bound}")


def _check_items(walk: _Walk, schema: dict[str, Any], value: Any, path: str, depth: int) -> None:
    """The members of a list, the keys of an object."""
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check(walk, schema["items"], item, f"{path}.{i}" if path else str(i), depth + 1)
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            where = f"{path}.{k}" if path else str(k)
            if isinstance(props, dict) and k in props:
                _check(walk, props[k], v, where, depth + 1)
            elif extra is False and isinstance(props, dict):
                raise SchemaMismatch(where, "Unexpected keyword argument")
            elif isinstance(extra, dict):
                _check(walk, extra, v, where, depth + 1)


_NAMES = {"integer": "a valid integer", "number": "a valid number", "boolean": "a valid boolean",
          "string": "a valid string", "array": "a valid list", "object": "a valid dictionary",
          "null": "None", "callable": "callable"}  # fmt: skip


def _one_of(members: list[Any]) -> str:
    shown = [repr(m) if isinstance(m, str) else str(m) for m in members]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def check(schema: dict[str, Any], value: dict[str, Any], skip: frozenset[str]) -> None:
    """Raise ``SchemaMismatch`` where pydantic surely refuses ``value``; ``skip``: fields
    vLLM's own validators convert first (checked elsewhere or not at all)."""
    if "*" in skip:
        return
    walk = _Walk(schema, _MAX_STEPS)  # past the budget the rest passes (never a refusal)
    props = schema.get("properties")
    if not isinstance(props, dict):
        return
    for key, item in value.items():
        if key in skip:
            # vLLM's validator converts it first; a JSON object for an object-typed field
            # is built into that class (``PassConfig(**value)``) and checked as one
            target = _resolve(props.get(key, {}), schema)
            if isinstance(item, dict) and target.get("type") == "object":
                _check(walk, target, item, key, 1)
            continue
        if key in props:
            _check(walk, props[key], item, key, 1)
        elif schema.get("additionalProperties") is False:
            raise SchemaMismatch(key, "Unexpected keyword argument")


def check_value(schema: dict[str, Any], value: Any, path: str) -> None:
    """Raise ``SchemaMismatch`` where pydantic surely refuses ``value`` for a field of
    ``schema`` (one field's schema, with the ``$defs`` it refers to)."""
    _check(_Walk(schema, _MAX_STEPS), schema, value, path, 1)


def check_bounds(schema: dict[str, Any], value: Any, path: str) -> None:
    """Only the numeric bounds of a field's schema (``minimum``, ``exclusiveMinimum``, ...)."""
    _check_bounds(schema, value, path)
