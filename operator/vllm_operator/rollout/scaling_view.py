"""What the planner sees of the autoscaler and the disruption budgets of one resource.

Read-only views built from raw API objects, like those of ``views.py`` (kept apart so that
module stays small): the autoscaler by the Deployment it targets, each budget by the
revision label it was created with. ``differs`` compares only what the operator sets, so a
field the API server or KEDA defaults never causes a patch (and a patch loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vllm_operator.render import labels


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class AutoscalerView:
    """The HorizontalPodAutoscaler or KEDA ScaledObject of the resource."""

    kind: str
    name: str
    target: str | None  # name of the Deployment in scaleTargetRef
    spec: Mapping[str, Any] = field(default_factory=dict)
    deleting: bool = False


@dataclass(frozen=True)
class BudgetView:
    """The PodDisruptionBudget of one revision."""

    name: str
    revision: str | None
    spec: Mapping[str, Any] = field(default_factory=dict)
    deleting: bool = False


def autoscaler_view(obj: Mapping[str, Any]) -> AutoscalerView:
    meta = _dict(obj.get("metadata"))
    spec = _dict(obj.get("spec"))
    target = _dict(spec.get("scaleTargetRef")).get("name")
    return AutoscalerView(
        kind=str(obj.get("kind", "")),
        name=str(meta.get("name", "")),
        target=target if isinstance(target, str) else None,
        spec=spec,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def budget_view(obj: Mapping[str, Any]) -> BudgetView:
    meta = _dict(obj.get("metadata"))
    revision = _dict(meta.get("labels")).get(labels.REVISION_LABEL)
    return BudgetView(
        name=str(meta.get("name", "")),
        revision=revision if isinstance(revision, str) else None,
        spec=_dict(obj.get("spec")),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def differs(wanted: object, current: object) -> bool:
    """Whether ``current`` lacks something of ``wanted`` (keys ``wanted`` does not set, such
    as server defaults, are ignored; lists must match item by item)."""
    if isinstance(wanted, Mapping):
        if not isinstance(current, Mapping):
            return True
        return any(differs(v, current.get(k)) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        if not isinstance(current, list | tuple) or len(wanted) != len(current):
            return True
        return any(differs(w, c) for w, c in zip(wanted, current, strict=True))
    return wanted != current
