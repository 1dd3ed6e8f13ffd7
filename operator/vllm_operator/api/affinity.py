"""The shape of ``spec.scheduling.affinity``: a core/v1 Affinity, checked field by field.

The CRD keeps affinity free-form (``x-kubernetes-preserve-unknown-fields``), so the API
server accepts any map there, and the operator copies it into every pod template. Before
this check, ``affinity: {nodeAffinity: "gpu"}`` passed ``kubectl apply`` and then every
Deployment the operator created was refused by the API server, pass after pass. Now the
spec is refused up front, as ``InvalidSpec`` naming the field, the same way ``render`` does.

The schema below is core/v1's (Affinity, NodeAffinity, PodAffinity, PodAntiAffinity and
their terms, as in Kubernetes 1.29+: ``matchLabelKeys``/``mismatchLabelKeys`` included)
plus the value rules the API server applies to them (operators, weights 1-100, values for
In/NotIn only, a topologyKey on every pod affinity term). It is data: one small walker
reads it, and it recurses only as deep as the schema (8 levels), whatever the input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm_operator.api.limits import child_path, describe
from vllm_operator.errors import SpecError

EXPLAIN = "check it against `kubectl explain pod.spec.affinity`"


@dataclass(frozen=True)
class Obj:
    """A map with known fields; ``required`` ones must be present."""

    name: str
    fields: dict[str, Any]
    required: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class ListOf:
    item: Any


STRING_MAP = "string map"

NODE_REQUIREMENT = Obj(
    "NodeSelectorRequirement",
    {"key": str, "operator": str, "values": ListOf(str)},
    frozenset({"key", "operator"}),
)
LABEL_REQUIREMENT = Obj(
    "LabelSelectorRequirement",
    {"key": str, "operator": str, "values": ListOf(str)},
    frozenset({"key", "operator"}),
)
NODE_TERM = Obj(
    "NodeSelectorTerm",
    {"matchExpressions": ListOf(NODE_REQUIREMENT), "matchFields": ListOf(NODE_REQUIREMENT)},
)
LABEL_SELECTOR = Obj(
    "LabelSelector",
    {"matchLabels": STRING_MAP, "matchExpressions": ListOf(LABEL_REQUIREMENT)},
)
POD_TERM = Obj(
    "PodAffinityTerm",
    {
        "labelSelector": LABEL_SELECTOR,
        "namespaces": ListOf(str),
        "topologyKey": str,
        "namespaceSelector": LABEL_SELECTOR,
        "matchLabelKeys": ListOf(str),
        "mismatchLabelKeys": ListOf(str),
    },
    frozenset({"topologyKey"}),
)
POD_AFFINITY = Obj(
    "PodAffinity",
    {
        "requiredDuringSchedulingIgnoredDuringExecution": ListOf(POD_TERM),
        "preferredDuringSchedulingIgnoredDuringExecution": ListOf(
            Obj(
                "WeightedPodAffinityTerm",
                {"weight": int, "podAffinityTerm": POD_TERM},
                frozenset({"weight", "podAffinityTerm"}),
            )
        ),
    },
)
AFFINITY = Obj(
    "Affinity",
    {
        "nodeAffinity": Obj(
            "NodeAffinity",
            {
                "requiredDuringSchedulingIgnoredDuringExecution": Obj(
                    "NodeSelector",
                    {"nodeSelectorTerms": ListOf(NODE_TERM)},
                    frozenset({"nodeSelectorTerms"}),
                ),
                "preferredDuringSchedulingIgnoredDuringExecution": ListOf(
                    Obj(
                        "PreferredSchedulingTerm",
                        {"weight": int, "preference": NODE_TERM},
                        frozenset({"weight", "preference"}),
                    )
                ),
            },
        ),
        "podAffinity": POD_AFFINITY,
        "podAntiAffinity": POD_AFFINITY,
    },
)

_OPERATORS = {
    "NodeSelectorRequirement": ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"),
    "LabelSelectorRequirement": ("In", "NotIn", "Exists", "DoesNotExist"),
}


def _value_rules(schema: Obj, value: dict[str, Any], path: str) -> list[SpecError]:
    errors: list[SpecError] = []
    weight = value.get("weight")
    if "weight" in schema.fields and isinstance(weight, int) and not 1 <= weight <= 100:
        errors.append(SpecError(f"{path}.weight", f"is {weight}", "use 1 to 100"))
    allowed = _OPERATORS.get(schema.name)
    operator = value.get("operator")
    if allowed and isinstance(operator, str):
        if operator not in allowed:
            errors.append(
                SpecError(f"{path}.operator", f"is {describe(operator)}", f"use one of {allowed}")
            )
        values = value.get("values") or []
        if operator in ("In", "NotIn") and not values:
            errors.append(SpecError(f"{path}.values", f"is empty for {operator}", "list values"))
        if operator in ("Exists", "DoesNotExist") and values:
            errors.append(
                SpecError(f"{path}.values", f"must be empty for {operator}", "remove them")
            )
    return errors


def _check(schema: Any, value: Any, path: str, errors: list[SpecError]) -> None:
    if isinstance(schema, Obj):
        if not isinstance(value, dict):
            errors.append(SpecError(path, f"must be a map ({schema.name})", EXPLAIN))
            return
        for key, child in value.items():
            where = child_path(path, str(key))
            if key not in schema.fields:
                errors.append(
                    SpecError(where, f"is not a field of {schema.name}", f"remove it or {EXPLAIN}")
                )
            else:
                _check(schema.fields[key], child, where, errors)
        for key in sorted(schema.required - value.keys()):
            errors.append(SpecError(child_path(path, key), "is required", f"add it; {EXPLAIN}"))
        errors += _value_rules(schema, value, path)
    elif isinstance(schema, ListOf):
        if not isinstance(value, list):
            errors.append(SpecError(path, "must be a list", EXPLAIN))
            return
        for i, item in enumerate(value):
            _check(schema.item, item, f"{path}[{i}]", errors)
    elif schema == STRING_MAP:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            errors.append(SpecError(path, "must be a map of strings", "quote the values"))
    elif schema is int:
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(SpecError(path, f"is {describe(value)}, not an integer", EXPLAIN))
    elif not isinstance(value, str):
        errors.append(SpecError(path, f"is {describe(value)}, not a string", "quote it"))


def check_affinity(value: Any, path: str = "spec.scheduling.affinity") -> list[SpecError]:
    """Problems of an affinity value (None, the default, has none)."""
    if value is None:
        return []
    errors: list[SpecError] = []
    _check(AFFINITY, value, path, errors)
    return errors[:20]
