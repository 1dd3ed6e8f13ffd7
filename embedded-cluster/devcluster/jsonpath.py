"""The JSONPath subset that CRD ``additionalPrinterColumns`` use.

Supported: ``.a.b``, ``.a[0].b``, ``.a[*].b``, ``['key.with.dots']``,
``.a[?(@.type=="Ready")].status`` (``==``/``!=``, dotted ``@`` paths), optional ``{}``.
Enough for printer columns; not a general JSONPath engine.
"""

from __future__ import annotations

import re
from typing import Any

_FILTER = re.compile(r"""^\?\(@((?:\.[^=!]+?)*)\s*(==|!=)\s*(['"]?)(.*?)\3\)$""")


class JsonPathError(ValueError):
    """The expression is outside the supported subset."""


def _tokens(expr: str) -> list[tuple[str, str]]:
    expr = expr.strip()
    if expr.startswith("{") and expr.endswith("}"):
        expr = expr[1:-1].strip()
    if expr.startswith("$"):
        expr = expr[1:]
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(expr):
        char = expr[i]
        if char == ".":
            match = re.match(r"\.([^.\[]*)", expr[i:])
            assert match is not None
            if match[1]:
                tokens.append(("key", match[1]))
            i += match.end()
        elif char == "[":
            depth, j = 0, i
            while j < len(expr):
                if expr[j] == "[":
                    depth += 1
                elif expr[j] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= len(expr):
                raise JsonPathError(f"unclosed bracket in {expr!r}")
            inner = expr[i + 1 : j].strip()
            if inner == "*":
                tokens.append(("all", ""))
            elif inner.lstrip("-").isdigit():
                tokens.append(("index", inner))
            elif inner[:1] in "'\"" and inner[-1:] == inner[:1]:
                tokens.append(("key", inner[1:-1]))
            elif inner.startswith("?"):
                if not _FILTER.match(inner):
                    raise JsonPathError(f"unsupported filter {inner!r}")
                tokens.append(("filter", inner))
            else:
                raise JsonPathError(f"unsupported bracket expression [{inner}]")
            i = j + 1
        else:
            raise JsonPathError(f"unexpected {char!r} in {expr!r}")
    return tokens


def _lookup(value: Any, dotted: str) -> Any:
    for part in [p for p in dotted.split(".") if p]:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def find(obj: Any, expr: str) -> list[Any]:
    """All values ``expr`` selects in ``obj`` (empty when the path is absent)."""
    current = [obj]
    for kind, arg in _tokens(expr):
        selected: list[Any] = []
        for value in current:
            if kind == "key" and isinstance(value, dict) and arg in value:
                selected.append(value[arg])
            elif kind == "index" and isinstance(value, list):
                index = int(arg)
                if -len(value) <= index < len(value):
                    selected.append(value[index])
            elif kind == "all" and isinstance(value, list):
                selected.extend(value)
            elif kind == "all" and isinstance(value, dict):
                selected.extend(value.values())
            elif kind == "filter" and isinstance(value, list):
                match = _FILTER.match(arg)
                assert match is not None  # checked when tokenizing
                path, op, _, wanted = match[1], match[2], match[3], match[4]
                for item in value:
                    found = _lookup(item, path)
                    text = "true" if found is True else "false" if found is False else found
                    equal = found is not None and str(text) == wanted
                    if equal == (op == "=="):
                        selected.append(item)
        current = selected
    return current
