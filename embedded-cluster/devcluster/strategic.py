"""Strategic-merge patch for the built-in kinds, on the lists that carry a merge key.

kubectl's client-side ``apply`` of a Deployment sends a strategic-merge patch: the
containers it names are merged *by name* into the stored ones, so a changed image keeps
the container's args and env. Applied as a plain merge patch, the list is replaced and
every field the patch does not repeat is lost. This module implements the semantics of
``k8s.io/apimachinery/pkg/util/strategicpatch`` for the lists whose Go types declare
``patchStrategy:"merge"`` (``MERGE_KEYS``: containers and volumes by ``name``, ports by
``containerPort``, env by ``name``, volume mounts by ``mountPath``, Service ports by
``port``, conditions by ``type``, owner references by ``uid``; finalizers as a set of
primitives) plus the directives kubectl sends: ``$patch: replace|delete`` (on a map or
a list item), ``$retainKeys``, ``$setElementOrder/<list>`` and
``$deleteFromPrimitiveList/<list>``. Every other list is replaced, as on a real server.
Custom resources have no Go types and a real server answers 415 for them (see
``semantics.py``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from .patches import PatchMalformed

Path = tuple[str, ...]
PRIMITIVE = ""  # a merge list of primitives (a set, e.g. finalizers)

_POD_SPEC: dict[Path, str] = {
    ("containers",): "name",
    ("initContainers",): "name",
    ("ephemeralContainers",): "name",
    ("volumes",): "name",
    ("imagePullSecrets",): "name",
    ("hostAliases",): "ip",
    ("resourceClaims",): "name",
}
for _containers in ("containers", "initContainers", "ephemeralContainers"):
    _POD_SPEC[(_containers, "*", "ports")] = "containerPort"
    _POD_SPEC[(_containers, "*", "env")] = "name"
    _POD_SPEC[(_containers, "*", "volumeMounts")] = "mountPath"
    _POD_SPEC[(_containers, "*", "volumeDevices")] = "devicePath"

_METADATA: dict[Path, str] = {
    ("metadata", "finalizers"): PRIMITIVE,
    ("metadata", "ownerReferences"): "uid",
}


def _under(prefix: Path, table: dict[Path, str]) -> dict[Path, str]:
    return {prefix + path: key for path, key in table.items()}


_CONDITIONS: dict[Path, str] = {("status", "conditions"): "type"}
_TEMPLATE = ("spec", "template", "spec")

# (group, plural) -> list path (``*`` for any item) -> merge key.
MERGE_KEYS: dict[tuple[str, str], dict[Path, str]] = {
    ("", "pods"): {**_under(("spec",), _POD_SPEC), **_CONDITIONS},
    ("apps", "deployments"): {**_under(_TEMPLATE, _POD_SPEC), **_CONDITIONS},
    ("apps", "replicasets"): {**_under(_TEMPLATE, _POD_SPEC), **_CONDITIONS},
    ("batch", "jobs"): {**_under(_TEMPLATE, _POD_SPEC), **_CONDITIONS},
    ("", "services"): {**_CONDITIONS, ("spec", "ports"): "port"},
    ("", "namespaces"): dict(_CONDITIONS),
    ("", "nodes"): {**_CONDITIONS, ("status", "addresses"): "type"},
}

_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVES = "$deleteFromPrimitiveList/"


def keys_for(store_key: tuple[str, str]) -> dict[Path, str]:
    """The merge keys of one kind (metadata lists for every kind)."""
    return {**_METADATA, **MERGE_KEYS.get(store_key, {})}


def strategic_merge_patch(target: Any, patch: Any, keys: dict[Path, str]) -> Any:
    """Apply a strategic-merge ``patch`` to a copy of ``target`` (a dict)."""
    if not isinstance(patch, dict):
        raise PatchMalformed("a strategic merge patch must be a JSON object")
    base = copy.deepcopy(target) if isinstance(target, dict) else {}
    return _merge_map(base, patch, (), keys)


def _merge_map(
    base: dict[str, Any], patch: dict[str, Any], path: Path, keys: dict[Path, str]
) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    if directive is not None:
        raise PatchMalformed(f"unknown patch directive: {directive!r}")
    retain = patch.get("$retainKeys")
    result = base
    for name, value in patch.items():
        if not name.startswith("$"):
            _merge_field(result, name, value, (*path, name), keys)
    _apply_list_directives(result, patch, path, keys)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_field(
    result: dict[str, Any], name: str, value: Any, child: Path, keys: dict[Path, str]
) -> None:
    """Merge one field of a patch into ``result``: null deletes, a map merges, a list with
    a merge key merges by it, anything else replaces."""
    if value is None:
        result.pop(name, None)
        return
    current = result.get(name)
    if isinstance(value, dict):
        merged = _merge_map(current if isinstance(current, dict) else {}, value, child, keys)
        if merged is None:
            result.pop(name, None)
        else:
            result[name] = merged
    elif isinstance(value, list) and _match(child, keys) is not None:
        result[name] = _merge_list(current if isinstance(current, list) else [], value, child, keys)
    else:
        result[name] = copy.deepcopy(value)


def _apply_list_directives(
    result: dict[str, Any], patch: dict[str, Any], path: Path, keys: dict[Path, str]
) -> None:
    """``$deleteFromPrimitiveList/<field>`` first, then ``$setElementOrder/<field>``."""
    for name, value in patch.items():
        if name.startswith(_DELETE_PRIMITIVES) and isinstance(value, list):
            field = name.removeprefix(_DELETE_PRIMITIVES)
            if isinstance(result.get(field), list):
                result[field] = [item for item in result[field] if item not in value]
    for name, value in patch.items():
        if name.startswith(_ORDER) and isinstance(value, list):
            field = name.removeprefix(_ORDER)
            key = _match((*path, field), keys)
            if isinstance(result.get(field), list) and key is not None:
                result[field] = _reorder(result[field], value, key)


def _match(path: Path, keys: dict[Path, str]) -> str | None:
    return keys.get(path)


def _item_path(path: Path) -> Path:
    return (*path, "*")


def _merge_list(base: list[Any], patch: list[Any], path: Path, keys: dict[Path, str]) -> list[Any]:
    key = keys[path]
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [
            copy.deepcopy(item)
            for item in patch
            if not (isinstance(item, dict) and item.get("$patch") == "replace")
        ]
    if key == PRIMITIVE:
        result = list(base)
        seen = {json.dumps(item, sort_keys=True) for item in result}
        for item in patch:
            token = json.dumps(item, sort_keys=True)
            if token not in seen:
                seen.add(token)
                result.append(copy.deepcopy(item))
        return result
    merged: list[Any] = copy.deepcopy(base)
    where: dict[str, int] = {}  # merge-key value -> index: linear in the list sizes
    for position, old in enumerate(merged):
        if isinstance(old, dict) and key in old:
            where.setdefault(json.dumps(old[key], sort_keys=True), position)
    deleted: set[int] = set()
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchMalformed(f"map: {item!r} does not contain declared merge key: {key}")
        token = json.dumps(item[key], sort_keys=True)
        index = where.get(token)
        if item.get("$patch") == "delete":
            if index is not None:
                deleted.add(index)
                del where[token]
            continue
        if index is None:
            where[token] = len(merged)
            merged.append(_merge_map({}, item, _item_path(path), keys))
        else:
            merged[index] = _merge_map(merged[index], item, _item_path(path), keys)
    return [item for position, item in enumerate(merged) if position not in deleted]


def _reorder(items: list[Any], order: list[Any], key: str) -> list[Any]:
    """``$setElementOrder``: the listed items first, in that order; the rest after."""
    rank_of: dict[str, int] = {}
    for position, entry in enumerate(order):
        value = entry.get(key) if isinstance(entry, dict) and key else entry
        rank_of.setdefault(json.dumps(value, sort_keys=True), position)

    def rank(item: Any) -> int:
        value = item.get(key) if isinstance(item, dict) and key else item
        return rank_of.get(json.dumps(value, sort_keys=True), len(order))

    return sorted(items, key=rank)
