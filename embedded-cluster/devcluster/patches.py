"""Patch documents: JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

Strategic-merge patches of built-in kinds live in ``strategic.py``; custom resources and
server-side apply are refused (415) in ``semantics.py``. A failing ``test`` op is a
``PatchFailed`` (the server answers 422, which kopf relies on).
"""

from __future__ import annotations

import copy
from typing import Any


class PatchFailed(Exception):
    """The patch is well-formed but cannot be applied (failed ``test``, missing path)."""


class PatchMalformed(Exception):
    """The patch document itself is not a valid patch of its declared type."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: dicts merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if isinstance(key, str) and key.startswith("$"):
            continue  # strategic-merge directives mean nothing in a merge patch: dropped
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchMalformed(f"JSON pointer must start with '/': {pointer!r}")
    return [_unescape(token) for token in pointer[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool) -> int:
    if for_add and token == "-":
        return len(container)
    if not token.isdigit():
        raise PatchFailed(f"invalid array index: {token!r}")
    index = int(token)
    limit = len(container) if for_add else len(container) - 1
    if index > limit:
        raise PatchFailed(f"array index out of range: {index}")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    current = doc
    for token in tokens[:-1]:
        if isinstance(current, dict):
            if token not in current:
                raise PatchFailed(f"path not found: /{'/'.join(tokens)}")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, for_add=False)]
        else:
            raise PatchFailed(f"path not found: /{'/'.join(tokens)}")
    return current


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchFailed(f"path not found: /{'/'.join(tokens)}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False)]
    raise PatchFailed(f"path not found: /{'/'.join(tokens)}")


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchFailed("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchFailed(f"path not found: /{'/'.join(tokens)}")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, for_add=False))
    raise PatchFailed(f"path not found: /{'/'.join(tokens)}")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise PatchFailed(f"path not found: /{'/'.join(tokens)}")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 on a copy of ``target``; all ops apply or none (the copy is discarded)."""
    if not isinstance(ops, list):
        raise PatchMalformed("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchMalformed(f"malformed JSON patch operation: {op!r}")
        kind, tokens = op["op"], _tokens(op["path"])
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchMalformed(f"operation {kind!r} needs a value")
        if kind == "add":
            doc = _add(doc, tokens, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, tokens)
        elif kind == "replace":
            _get(doc, tokens)  # must exist
            if tokens:
                _remove(doc, tokens)
            doc = _add(doc, tokens, copy.deepcopy(op["value"]))
        elif kind == "move":
            value = _remove(doc, _tokens(op["from"]))
            doc = _add(doc, tokens, value)
        elif kind == "copy":
            doc = _add(doc, tokens, copy.deepcopy(_get(doc, _tokens(op["from"]))))
        elif kind == "test":
            try:
                actual = _get(doc, tokens)
            except PatchFailed as exc:
                raise PatchFailed(f"testing value {op['path']} failed: {exc}") from exc
            if actual != op["value"]:
                wanted = op["value"]
                raise PatchFailed(f"testing value {op['path']} failed: {actual!r} != {wanted!r}")
        else:
            raise PatchMalformed(f"unknown JSON patch operation: {kind!r}")
    return doc
