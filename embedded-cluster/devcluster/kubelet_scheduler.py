"""Does a pod fit the one node? ``nodeSelector`` and required node affinity, as kube-scheduler.

A scheduler that ignores a pod's node constraints hides the most common reason a GPU pod
never starts (a selector naming a GPU product the cluster does not have). The local kubelet
asks this before it binds a pod; a pod that does not fit stays Pending with kube-scheduler's
wording, and the kubelet records a FailedScheduling Event for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]

MISMATCH = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
"""kube-scheduler's message when the only node fails the pod's selector or affinity."""


def _number(text: object) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def _requirement(req: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(req.get("key", ""))
    op = req.get("operator")
    values = [str(v) for v in req.get("values") or []]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        have, bound = _number(labels[key]), _number(values[0])
        if have is None or bound is None:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _term(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    expressions = term.get("matchExpressions") or []
    # matchFields only knows metadata.name; the one node matches its own name.
    return bool(expressions or term.get("matchFields")) and all(
        _requirement(r, labels) for r in expressions
    )


def fits(pod: Obj, labels: Mapping[str, str]) -> bool:
    """Whether a node with ``labels`` satisfies the pod's nodeSelector and required affinity."""
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    if any(labels.get(str(k)) != str(v) for k, v in selector.items()):
        return False
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(_term(t, labels) for t in terms)


def unschedulable_reason(pod: Obj, labels: Mapping[str, str]) -> str | None:
    """kube-scheduler's reason when the pod does not fit the node, else None."""
    return None if fits(pod, labels) else MISMATCH
