"""Label and field selectors, as the API server parses them.

Plain kmock ignores ``labelSelector``/``fieldSelector``: an operator listing "the Jobs of
this revision" would see every Job and look correct in tests. Supported here: label
``=``, ``==``, ``!=``, ``in``, ``notin``, ``key`` (exists), ``!key``, ``>``/``<``; field
``=``, ``==``, ``!=`` on the field labels the API server indexes for the kind
(``FIELD_LABELS``: ``metadata.name`` and ``metadata.namespace`` everywhere, pod
``spec.nodeName`` and ``status.phase``, Event ``involvedObject.uid``, a CRD's
``selectableFields``, ...). Any other field answers 400 ``BadRequest`` "field label not
supported: <field>", as a real server does, instead of a silently empty list.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .apierrors import bad_request

Matcher = Callable[[dict[str, Any]], bool]

_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")
_CMP = re.compile(rf"^\s*({_KEY})\s*(==|!=|=|>|<)\s*(.*?)\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # in, notin, exists, !exists, gt, lt (=, == become "in"; != becomes "notin")
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        try:
            number = int(value) if value is not None else None
        except ValueError:
            return False
        if number is None:
            return False
        bound = int(self.values[0])
        return number > bound if self.op == "gt" else number < bound


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses (set values) nor escaped."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    escaped = False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
            continue
        if char == "\\":
            current.append(char)
            escaped = True
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in (part.strip() for part in parts) if p]


def parse_label_selector(text: str) -> list[Requirement]:
    """Parse a label selector string; raise a 400 ApiError on bad syntax."""
    requirements: list[Requirement] = []
    for part in _split_top_level(text):
        if match := _SET.match(part):
            values = tuple(v.strip() for v in match[3].split(",") if v.strip())
            requirements.append(Requirement(match[1], match[2], values))
        elif match := _CMP.match(part):
            key, op, value = match[1], match[2], match[3]
            if op in ("=", "=="):
                requirements.append(Requirement(key, "in", (value,)))
            elif op == "!=":
                requirements.append(Requirement(key, "notin", (value,)))
            else:
                if not value.lstrip("-").isdigit():
                    raise bad_request(f"unable to parse requirement: {part!r}: not an integer")
                requirements.append(Requirement(key, "gt" if op == ">" else "lt", (value,)))
        elif match := _EXISTS.match(part):
            requirements.append(Requirement(match[2], "!exists" if match[1] else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: {part!r}")
    return requirements


def label_matcher(text: str | None) -> Matcher:
    if not text:
        return lambda obj: True
    requirements = parse_label_selector(text)

    def match(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req.matches(labels) for req in requirements)

    return match


_EVENT_FIELDS = {
    *(
        f"involvedObject.{f}"
        for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    ),
    "reason",
    "reportingComponent",
    "source",
    "type",
}
# Field labels beyond metadata.name/metadata.namespace, per (group, plural): the
# AddFieldLabelConversionFunc registrations of each kind (pkg/apis/*/v1/conversion.go).
FIELD_LABELS: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    ("", "events"): frozenset(_EVENT_FIELDS),
    ("events.k8s.io", "events"): frozenset(
        _EVENT_FIELDS
        | {f"regarding.{f}" for f in ("kind", "namespace", "name", "uid", "apiVersion")}
        | {"reportingController"}
    ),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "secrets"): frozenset({"type"}),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "services"): frozenset({"spec.clusterIP", "spec.type"}),
    ("apps", "replicasets"): frozenset({"status.replicas"}),
    ("batch", "jobs"): frozenset({"status.successful"}),
}
_ALIASES = {"source": "source.component"}


def field_labels(text: str | None) -> list[str]:
    """The field names a field selector uses (400 on bad syntax)."""
    labels = []
    for part in _split_top_level(text or ""):
        match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(==|!=|=)", part)
        if not match:
            raise bad_request(f"invalid field selector: {part!r}")
        labels.append(match[1])
    return labels


def check_field_labels(
    store_key: tuple[str, str], text: str | None, extra: frozenset[str] = frozenset()
) -> None:
    """400 ``field label not supported`` for a field the kind does not index."""
    supported = FIELD_LABELS.get(store_key, frozenset()) | extra
    for label in field_labels(text):
        if label not in ("metadata.name", "metadata.namespace") and label not in supported:
            raise bad_request(f"field label not supported: {label}")


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _field_value(obj: dict[str, Any], path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, dict):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def field_matcher(text: str | None) -> Matcher:
    """Field selector over dotted paths; a missing field compares as the empty string."""
    if not text:
        return lambda obj: True
    terms: list[tuple[str, bool, str]] = []
    for part in _split_top_level(text):
        match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not match:
            raise bad_request(f"invalid field selector: {part!r}")
        terms.append((_ALIASES.get(match[1], match[1]), match[2] != "!=", _unescape(match[3])))

    def match_obj(obj: dict[str, Any]) -> bool:
        return all((_field_value(obj, path) == value) == equal for path, equal, value in terms)

    return match_obj


def selector_matcher(labels: str | None, fields: str | None) -> Matcher:
    by_labels = label_matcher(labels)
    by_fields = field_matcher(fields)
    return lambda obj: by_labels(obj) and by_fields(obj)
