"""Bounds on a raw VLLMDeployment before it is validated: depth, size, numbers, types.

A resource can come from anyone who may write YAML or call the API, and part of it
(``spec.scheduling.affinity``) is free-form. pydantic checks what each typed field allows,
but a free-form value can be nested 1,000 levels deep (pydantic then refuses to serialise
it, so the revision hash fails), hold an integer no Kubernetes object can store, a NaN, or
a YAML date. ``check_raw`` walks the value once, iteratively (no recursion, so no
RecursionError however deep the input), and turns every such value into a ``SpecError``
naming the field and the fix, before anything else looks at it.

The limits are far above anything a real resource needs (the deepest core/v1 Affinity is
about 11 levels below the resource's root) and small enough that everything after this
check runs in bounded time and memory.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from vllm_operator.errors import SpecError

MAX_DEPTH = 32
"""Deepest map or list: the resource itself is at depth 1, its ``spec`` at 2."""

MAX_VALUES = 100_000
"""Most values (maps, lists and scalars together) in one walked subtree."""

MAX_STRING = 65_536
"""Longest string (or map key), in characters."""

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
"""Integers Kubernetes stores: JSON numbers decoded as int64."""

MAX_ERRORS = 10
"""Errors reported per walk; the rest would only repeat the same mistake."""


def describe(value: object, limit: int = 64) -> str:
    """A short, safe rendering of an untrusted value for a message (never raises)."""
    if isinstance(value, str):
        return repr(value[:limit]) + ("..." if len(value) > limit else "")
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return repr(value) if INT_MIN <= value <= INT_MAX else "an integer beyond 64 bits"
    if isinstance(value, float):
        return repr(value)
    return f"a {type(value).__name__}"


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_/-][A-Za-z0-9_./-]{0,127}$")


def child_path(parent: str, key: str) -> str:
    """``parent.key``; a key with spaces, quotes or control characters is written quoted
    (``parent["a b"]``), so a field path is always one printable line."""
    if _PLAIN_KEY.match(key):
        return f"{parent}.{key}" if parent else key
    quoted = json.dumps(key[:64] + ("..." if len(key) > 64 else ""))
    return f"{parent}[{quoted}]"


def _show(path: str) -> str:
    return path if len(path) <= 200 else path[:200] + "..."


def _scalar_problem(value: object, path: str) -> SpecError | None:
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            return SpecError(
                _show(path),
                f"is {len(value)} characters long, more than {MAX_STRING}",
                "shorten it",
            )
    elif isinstance(value, bool) or value is None:
        return None
    elif isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            return SpecError(
                _show(path),
                "is an integer outside the 64-bit range Kubernetes stores",
                f"use a value between {INT_MIN} and {INT_MAX}",
            )
    elif isinstance(value, float):
        if not math.isfinite(value):
            return SpecError(
                _show(path), f"is {value}, not a finite number", "write a finite number"
            )
    else:
        return SpecError(
            _show(path),
            f"is a {type(value).__name__}, not a JSON value (string, number, boolean, "
            "null, map or list)",
            "quote it so it is a string, or write a number, map or list",
        )
    return None


def check_raw(value: Any, path: str, depth: int = 2) -> list[SpecError]:
    """Problems of ``value``, found at ``path``.

    ``depth`` is the value's own depth: the resource is 1, its ``spec`` 2. A map or list
    deeper than ``MAX_DEPTH`` is refused (the same rule the YAML reader applies). An empty
    list means the value is a plain JSON tree inside every limit, so validating, hashing
    and serialising it cannot fail or take long for its shape alone.
    """
    errors: list[SpecError] = []
    stack: list[tuple[Any, str, int]] = [(value, path, depth)]
    seen = 0
    while stack and len(errors) < MAX_ERRORS:
        node, where, level = stack.pop()
        seen += 1
        if isinstance(node, dict | list):
            if level > MAX_DEPTH:
                errors.append(_too_deep(where))
                continue
            if seen + len(stack) + len(node) > MAX_VALUES:
                errors.append(
                    SpecError(
                        _show(path),
                        f"holds more than {MAX_VALUES} values",
                        "remove repeated or generated entries",
                    )
                )
                break
        if isinstance(node, dict):
            children: list[tuple[Any, str, int]] = []
            for key, child in node.items():
                if not isinstance(key, str):
                    errors.append(
                        SpecError(
                            _show(f"{where}[{key!r}]"),
                            f"has a {type(key).__name__} key; map keys must be strings",
                            "quote the key",
                        )
                    )
                elif len(key) > MAX_STRING:
                    errors.append(
                        SpecError(_show(where), "has a key longer than allowed", "shorten it")
                    )
                else:
                    children.append((child, child_path(where, key), level + 1))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            items = [(child, f"{where}[{i}]", level + 1) for i, child in enumerate(node)]
            stack.extend(reversed(items))
        else:
            problem = _scalar_problem(node, where)
            if problem is not None:
                errors.append(problem)
    return errors


def _too_deep(where: str) -> SpecError:
    return SpecError(
        _show(where),
        f"is nested deeper than {MAX_DEPTH} levels (counted from the resource)",
        "flatten it; a Kubernetes affinity needs about 11 levels",
    )
