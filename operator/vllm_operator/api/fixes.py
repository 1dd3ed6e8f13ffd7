"""A fix for every validation error pydantic can raise on a VLLMDeployment.

``render --help`` and the InvalidSpec condition promise ``field: message (fix: ...)`` for
every problem. pydantic's own wording says what is wrong but not what to write, so each
error kind gets a fix built from the error's context (the bound, the allowed values, the
expected type); a kind not listed here still gets one: the ``kubectl explain`` command that
documents the field. One function, so no error reaches a user without a fix.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from vllm_operator.api.text import did_you_mean
from vllm_operator.errors import SpecError

# The type errors: what to write instead, in a user's words.
_EXPECTED: dict[str, str] = {
    "int_type": "a whole number, e.g. 1",
    "int_parsing": "a whole number, e.g. 1",
    "int_from_float": "a whole number, e.g. 1",
    "float_type": "a number, e.g. 0.5",
    "float_parsing": "a number, e.g. 0.5",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": 'a string (quote it: "...")',
    "dict_type": "a mapping (key: value lines)",
    "model_type": "a mapping (key: value lines)",
    "model_attributes_type": "a mapping (key: value lines)",
    "list_type": "a list ([a, b] or '- ' lines)",
    "finite_number": "a finite number",
}

_BOUNDS: dict[str, str] = {
    "greater_than": "use a value greater than {gt}",
    "greater_than_equal": "use a value of at least {ge}",
    "less_than": "use a value below {lt}",
    "less_than_equal": "use a value of at most {le}",
    "string_too_short": "use at least {min_length} character(s)",
    "string_too_long": "use at most {max_length} characters",
    "too_short": "give at least {min_length} item(s)",
    "too_long": "give at most {max_length} item(s)",
    "multiple_of": "use a multiple of {multiple_of}",
}

_INDEX = re.compile(r"\[[^\]]*\]")


def explain_path(path: str) -> str:
    """The ``kubectl explain`` argument for a field path (list indices dropped)."""
    plain = _INDEX.sub("", path)
    return f"vllmd.{plain}" if plain else "vllmd"


def fix_for(
    error: Mapping[str, Any],
    path: str,
    docs: str | None = None,
    model: type[BaseModel] | None = None,
) -> str:
    """The fix to show for one pydantic error at ``path`` (never empty). ``docs`` names
    where the field is documented: by default the ``kubectl explain`` command of a
    VLLMDeployment field (a CLI passes its ``--help``). ``model``: the model validated, so
    an unknown field gets "did you mean" from the fields of the model it was found in."""
    kind = str(error.get("type", ""))
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    here = docs or f"`kubectl explain {explain_path(path)}`"
    if kind == "extra_forbidden":
        parent = docs or f"`kubectl explain {explain_path(path.rpartition('.')[0])}`"
        loc = tuple(error.get("loc") or ())
        known = fields_at(model, loc[:-1]) if model is not None and loc else []
        close = did_you_mean(str(loc[-1]), known) if loc else ""
        if close:
            return f"{close} (fields here: {', '.join(known)})"
        if known:
            return f"remove it; the fields here are {', '.join(known)} ({parent})"
        return f"remove it or check its spelling against {parent}"
    if kind == "missing":
        return f"add it ({here})"
    if kind in ("literal_error", "enum") and ctx.get("expected"):
        return f"use one of: {ctx['expected']}"
    if kind == "string_pattern_mismatch" and ctx.get("pattern"):
        return f"write a value matching {ctx['pattern']} ({here})"
    if kind in _EXPECTED:
        return f"write {_EXPECTED[kind]}"
    template = _BOUNDS.get(kind)
    if template is not None:
        try:
            shown = {k: f"{v:g}" if isinstance(v, float) else v for k, v in ctx.items()}
            return template.format(**shown)
        except (KeyError, IndexError):
            pass
    return f"see {here}"


def field_location(loc: Sequence[int | str]) -> tuple[int | str, ...]:
    """A pydantic error's location without the ``function-...`` steps its validators add."""
    return tuple(x for x in loc if not (isinstance(x, str) and x.startswith("function-")))


def first_error(
    exc: ValidationError,
    where: str = "",
    *,
    dotted: bool = True,
    docs: str | None = None,
    fix: str | None = None,
    hint: str = "",
    model: type[BaseModel] | None = None,
) -> SpecError:
    """pydantic's first error as one ``SpecError``: the one formatter of inputs read by a CLI.

    The field is ``where: a.b.0`` (the error's dotted location, ``(top level)`` when it has
    none) or just ``where`` when ``dotted`` is false (an option that is one value). The
    message is pydantic's, without its ``Value error, `` prefix, then ``hint``. The fix is
    ``fix`` when given ('' for none), else ``fix_for`` with ``docs`` (a CLI's ``--help``) and
    ``model`` (the model validated: "did you mean" for a misspelt field).
    """
    first = exc.errors()[0]
    loc = field_location(first["loc"])
    err: dict[str, Any] = {**first, "loc": loc}
    path = ".".join(str(p) for p in loc) or "(top level)"
    field = (f"{where}: {path}" if where else path) if dotted else where
    message = str(err["msg"]).removeprefix("Value error, ")
    if hint:
        message = f"{message} {hint}"
    return SpecError(field, message, fix_for(err, path, docs, model) if fix is None else fix)


def fields_at(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The field names (camelCase, as written) of the model found at ``loc`` inside ``model``;
    empty when ``loc`` leads to no model (a list index is stepped over)."""
    here: type[BaseModel] | None = model
    for step in loc:
        if here is None:
            return []
        if isinstance(step, int):
            continue
        field = next(
            (f for n, f in here.model_fields.items() if step in (n, f.alias)),
            None,
        )
        here = model_in(field.annotation) if field is not None else None
    if here is None:
        return []
    return [f.alias or n for n, f in here.model_fields.items()]


def model_in(annotation: object) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (``X | None``, ``list[X]``, ``Annotated``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is None and not isinstance(annotation, types.UnionType):
        return None
    for arg in typing.get_args(annotation):
        found = model_in(arg)
        if found is not None:
            return found
    return None
