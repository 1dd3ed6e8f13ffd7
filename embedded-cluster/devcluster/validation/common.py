"""Shared pieces of built-in validation: typed access to JSON, metadata, label maps.

Built-in objects arrive as JSON; a real API server first decodes them into Go structs
(a string where an int32 belongs, or a malformed quantity, is a 400 ``BadRequest``
before any validation) and then validates field by field (422 with causes). ``Decode``
helpers raise ``DecodeError`` for the first case; everything else returns field errors.
Metadata rules follow ``apimachinery/pkg/api/validation/objectmeta.go``
(``ValidateObjectMeta``: name format per kind, label and annotation keys and values,
the 256 KiB annotation budget, owner references).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .. import fielderrors as fe
from ..fielderrors import FieldError
from . import names

NameRule = Callable[[str], list[str]]
TOTAL_ANNOTATION_SIZE = 256 * 1024


class DecodeError(Exception):
    """The body cannot be decoded into the kind's Go type: the server answers 400."""


_GO_TYPES = {bool: "bool", int: "number", float: "number", str: "string", list: "array"}


def _json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    for python_type, name in _GO_TYPES.items():
        if isinstance(value, python_type):
            return name
    return "null"


def want_int(value: Any, path: str, bits: int = 32) -> int | None:
    """An integer field (int32 unless ``bits=64``): None when absent, DecodeError when of
    the wrong JSON type or out of the Go type's range."""
    if value is None:
        return None
    wrong = isinstance(value, bool) or not isinstance(value, int | float)
    if wrong or not math.isfinite(value) or value != int(value):
        raise DecodeError(
            f"json: cannot unmarshal {_json_kind(value)} into Go struct field {path} of type"
            f" int{bits}"
        )
    if not -(2 ** (bits - 1)) <= int(value) < 2 ** (bits - 1):
        raise DecodeError(
            f"json: cannot unmarshal number {int(value)} into Go struct field {path} of type"
            f" int{bits}"
        )
    return int(value)


def want_str(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DecodeError(
            f"json: cannot unmarshal {_json_kind(value)} into Go struct field {path} of type string"
        )
    return value


def want_list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError(
            f"json: cannot unmarshal {_json_kind(value)} into Go struct field {path} of type "
            "[]interface {}"
        )
    return value


def want_dict(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DecodeError(
            f"json: cannot unmarshal {_json_kind(value)} into Go struct field {path} of type "
            "map[string]interface {}"
        )
    return value


def reject_non_json_numbers(value: Any) -> None:
    """NaN and ±Infinity: Python's JSON parser accepts them, Go's does not (400)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            first = "N" if math.isnan(item) else ("-" if item < 0 else "I")
            raise DecodeError(f"invalid character '{first}' looking for beginning of value")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def key(path: str, name: str) -> str:
    """field.Path.Key: ``path[name]``."""
    return f"{path}[{name}]"


def invalid_each(path: str, value: Any, messages: list[str]) -> list[FieldError]:
    return [fe.invalid(path, value, message) for message in messages]


def non_negative(value: Any, path: str) -> list[FieldError]:
    number = want_int(value, path)
    if number is not None and number < 0:
        return [fe.invalid(path, number, "must be greater than or equal to 0")]
    return []


def validate_labels(labels: Any, path: str) -> list[FieldError]:
    """ValidateLabels: qualified-name keys, label values (63 characters, charset)."""
    errors: list[FieldError] = []
    for label, value in want_dict(labels, path).items():
        errors += invalid_each(path, label, names.label_key(str(label)))
        errors += invalid_each(path, value, names.label_value(want_str(value, key(path, label))))
    return errors


def validate_annotations(annotations: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    total = 0
    for name, value in want_dict(annotations, path).items():
        errors += invalid_each(path, name, names.label_key(str(name).lower()))
        total += len(str(name)) + len(want_str(value, key(path, name)))
    if total > TOTAL_ANNOTATION_SIZE:
        errors.append(fe.too_long(path, "", TOTAL_ANNOTATION_SIZE))
    return errors


SET_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def set_operator_problem(operator: str, values: list[Any], where: str) -> FieldError | None:
    """The values rule label and node selector requirements share: In and NotIn need
    values, Exists and DoesNotExist take none (ValidateLabelSelectorRequirement,
    validateNodeSelectorRequirement)."""
    if operator in ("In", "NotIn") and not values:
        return fe.required(
            f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'"
        )
    if operator in ("Exists", "DoesNotExist") and values:
        return fe.forbidden(
            f"{where}.values",
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )
    return None


def validate_selector(selector: Any, path: str) -> list[FieldError]:
    """ValidateLabelSelector: matchLabels as labels, matchExpressions operators and values."""
    errors: list[FieldError] = []
    body = want_dict(selector, path)
    errors += validate_labels(body.get("matchLabels"), f"{path}.matchLabels")
    for index, raw_expr in enumerate(
        want_list(body.get("matchExpressions"), f"{path}.matchExpressions")
    ):
        where = f"{path}.matchExpressions[{index}]"
        expr = want_dict(raw_expr, where)
        operator = want_str(expr.get("operator"), f"{where}.operator")
        values = want_list(expr.get("values"), f"{where}.values")
        problem = set_operator_problem(operator, values, where)
        if problem is not None:
            errors.append(problem)
        elif operator not in SET_OPERATORS:
            errors.append(fe.not_supported(f"{where}.operator", operator, list(SET_OPERATORS)))
        errors += invalid_each(
            f"{where}.key", expr.get("key"), names.label_key(str(expr.get("key") or ""))
        )
    return errors


def validate_object_meta(obj: dict[str, Any], name_rule: NameRule | None) -> list[FieldError]:
    metadata = want_dict(obj.get("metadata"), "metadata")
    errors: list[FieldError] = []
    name = want_str(metadata.get("name"), "metadata.name")
    if name_rule is not None and name:
        errors += invalid_each("metadata.name", name, name_rule(name))
    namespace = want_str(metadata.get("namespace"), "metadata.namespace")
    if namespace:
        errors += invalid_each("metadata.namespace", namespace, names.dns1123_label(namespace))
    errors += validate_labels(metadata.get("labels"), "metadata.labels")
    errors += validate_annotations(metadata.get("annotations"), "metadata.annotations")
    controllers = 0
    refs = want_list(metadata.get("ownerReferences"), "metadata.ownerReferences")
    for index, raw_ref in enumerate(refs):
        where = f"metadata.ownerReferences[{index}]"
        ref = want_dict(raw_ref, where)
        for field in ("apiVersion", "kind", "name", "uid"):
            if not want_str(ref.get(field), f"{where}.{field}"):
                errors.append(
                    fe.invalid(
                        f"metadata.ownerReferences.{field}", "", f"{field} must not be empty"
                    )
                )
        controllers += 1 if ref.get("controller") is True else 0
    if controllers > 1:
        errors.append(
            fe.invalid(
                "metadata.ownerReferences",
                refs,
                "Only one reference can have Controller set to true.",
            )
        )
    return errors
