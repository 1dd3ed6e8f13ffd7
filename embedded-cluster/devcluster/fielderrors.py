"""Field-level validation errors, worded and typed as the API server words them.

A real API server answers an invalid object with 422 ``Invalid`` and a ``Status`` whose
``details.causes`` lists every offending field (``reason`` ``FieldValueInvalid``,
``FieldValueRequired``, ...; ``message``; ``field``); kubectl prints them one per line and
clients branch on them. This module is the Python twin of apimachinery's
``pkg/util/validation/field/errors.go``: the same error types, the same ``ErrorBody``
rendering of the bad value (strings quoted, numbers bare, ``null``), and the same
aggregate message (one error, or ``[a, b]``) after ``<Kind>.<group> "<name>" is invalid:``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .apierrors import ApiError

# ErrorType -> the canonical text ErrorBody starts with (field/errors.go, ErrorType.String).
_TEXT = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
}
# Types whose body never shows the value (ErrorBody's first cases).
_NO_VALUE = {"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong", "InternalError"}
_OMIT = object()


class GoLiteral:
    """A bad value ErrorBody prints verbatim (Go's ``%#v`` of a struct, a slice, a uint)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def go_value(value: Any) -> str:
    """A bad value as ErrorBody prints it: ``%q`` strings, ``%v`` numbers, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        # Go prints a map[string]interface{} with %#v; keep the shape readable and stable.
        inner = ", ".join(f"{json.dumps(str(k))}:{go_value(v)}" for k, v in sorted(value.items()))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_value(v) for v in value) + "}"
    return str(value)


@dataclass(frozen=True)
class FieldError:
    """One field's violation: ``type`` is the Status cause ``reason``."""

    type: str
    field: str
    value: Any = _OMIT
    detail: str = ""

    def body(self) -> str:
        """ErrorBody: the message without the field path (the cause's ``message``)."""
        text = _TEXT[self.type]
        if self.type not in _NO_VALUE and self.value is not _OMIT:
            text = f"{text}: {go_value(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        return {"reason": self.type, "message": self.body(), "field": self.field}


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", field, value, detail)


def invalid_omitted(field: str, detail: str) -> FieldError:
    """``field.Invalid`` with ``OmitValueType``: ``Invalid value: <detail>``, no value."""
    return FieldError("FieldValueInvalid", field, _OMIT, detail)


def duplicate_omitted(field: str) -> FieldError:
    return FieldError("FieldValueDuplicate", field, _OMIT)


def type_invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueTypeInvalid", field, value, detail)


def required(field: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", field, "", detail)


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError("FieldValueDuplicate", field, value)


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", field, "", detail)


def not_supported(field: str, value: Any, supported: list[str]) -> FieldError:
    detail = "supported values: " + ", ".join(json.dumps(v) for v in supported) if supported else ""
    return FieldError("FieldValueNotSupported", field, value, detail)


def too_long(field: str, value: Any, max_length: int) -> FieldError:
    return FieldError("FieldValueTooLong", field, value, f"may not be more than {max_length} bytes")


def too_many(field: str, actual: int, maximum: int) -> FieldError:
    return FieldError("FieldValueTooMany", field, actual, f"must have at most {maximum} items")


def from_text(message: str) -> FieldError:
    """A field error from its rendered form ``<field>: <Type text>[: <detail>]``.

    For rules that word their message directly (``kinds.py``); the cause then carries the
    field and the reason the text names (``Invalid value`` is ``FieldValueInvalid``)."""
    field, _, body = message.partition(": ")
    text, _, detail = body.partition(": ")
    for error_type, known in _TEXT.items():
        if known == text and error_type != "FieldValueTypeInvalid":
            return FieldError(error_type, field, _OMIT, detail)
    return FieldError("FieldValueInvalid", field, _OMIT, body)


def aggregate(errors: list[FieldError]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message, or ``[a, b, ...]``; no repeats."""
    seen: list[str] = []
    for error in errors:
        text = str(error)
        if text not in seen:
            seen.append(text)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def qualified_kind(kind: str, group: str) -> str:
    return f"{kind}.{group}" if group else kind


def invalid_error(kind: str, group: str, name: str, errors: list[FieldError]) -> ApiError:
    """apierrors.NewInvalid: 422 ``Invalid`` with one cause per field error."""
    unique: list[FieldError] = []
    for error in errors:
        if str(error) not in {str(u) for u in unique}:
            unique.append(error)
    details: dict[str, Any] = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    details["causes"] = [error.cause() for error in unique]
    message = f'{qualified_kind(kind, group)} "{name}" is invalid: {aggregate(unique)}'
    return ApiError(422, "Invalid", message, details)
