"""Pure helpers on object bodies: metadata stamping, generation, schema defaults.

Kept apart from the request flow so each rule (what bumps ``generation``, which metadata a
client may not change, what a CRD schema defaults) is one small function with one test.
"""

from __future__ import annotations

import copy
import datetime
import random
from typing import Any

# Metadata owned by the server: clients cannot set it on create nor change it on update.
SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
)
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet


def timestamp(now: datetime.datetime) -> str:
    """RFC 3339 with second precision in UTC, the way the API server writes timestamps."""
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(value: str) -> datetime.datetime:
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def generated_name(prefix: str, rng: random.Random) -> str:
    """SimpleNameGenerator: the prefix cut to 58 characters, then 5 random ones, so the
    name fits 63 whatever the prefix."""
    return prefix[:58] + "".join(rng.choice(_NAME_CHARS) for _ in range(5))


def spec_part(obj: dict[str, Any]) -> Any:
    """What ``generation`` tracks: ``spec``, or for spec-less kinds everything but metadata
    and status (ConfigMap ``data``, Event fields, ...)."""
    if "spec" in obj:
        return obj["spec"]
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def next_generation(old: dict[str, Any], new: dict[str, Any]) -> int:
    generation = int(meta(old).get("generation") or 1)
    return generation + 1 if spec_part(old) != spec_part(new) else generation


def same_except_version(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """A write that changes nothing must not bump resourceVersion nor emit an event."""

    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        copied = dict(obj)
        copied["metadata"] = {k: v for k, v in meta(obj).items() if k != "resourceVersion"}
        return copied

    return strip(a) == strip(b)


def owner_uids(obj: dict[str, Any]) -> list[str]:
    refs = meta(obj).get("ownerReferences") or []
    return [str(ref.get("uid")) for ref in refs if isinstance(ref, dict) and ref.get("uid")]


def without_owner(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    refs = [r for r in meta(new).get("ownerReferences") or [] if r.get("uid") != uid]
    if refs:
        new["metadata"]["ownerReferences"] = refs
    else:
        new["metadata"].pop("ownerReferences", None)
    return new


def apply_defaults(schema: dict[str, Any] | None, value: Any) -> Any:
    """Fill structural-schema ``default`` values into ``value`` (in place; returns it).

    Defaults apply to absent properties of objects that exist, recursively, and to every
    item of arrays, as the API server does on create, update and read.
    """
    if not schema or not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and isinstance(sub, dict) and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                apply_defaults(sub, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                if key not in (schema.get("properties") or {}):
                    apply_defaults(extra, item)
    elif isinstance(value, list):
        for item in value:
            apply_defaults(schema.get("items"), item)
    return value


def prune(schema: dict[str, Any] | None, value: Any, *, root: bool = True) -> Any:
    """Drop fields a structural schema does not declare (in place; returns ``value``).

    A real API server prunes unknown fields of custom resources silently: a status field
    the CRD forgot is lost on a cluster, so it is lost here too. ``apiVersion``, ``kind``
    and ``metadata`` of the root are kept; ``x-kubernetes-preserve-unknown-fields`` and
    ``additionalProperties`` keep what they cover.
    """
    if not schema or not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or extra is True
        for key in list(value):
            if root and key in ("apiVersion", "kind", "metadata"):
                continue
            declared = properties.get(key, extra if isinstance(extra, dict) else None)
            if value[key] is None and isinstance(declared, dict):
                if not declared.get("nullable"):
                    del value[key]  # nulls of non-nullable fields are pruned, not rejected
                continue
            if key in properties:
                prune(properties[key], value[key], root=False)
            elif isinstance(extra, dict):
                prune(extra, value[key], root=False)
            elif not keep_unknown:
                del value[key]
    elif isinstance(value, list):
        for item in value:
            prune(schema.get("items"), item, root=False)
    return value
