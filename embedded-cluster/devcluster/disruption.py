"""PodDisruptionBudgets and the Eviction subresource, as the API server and the disruption
controller apply them.

``POST .../pods/<name>/eviction`` (what ``kubectl drain`` and cluster autoscalers call)
deletes the pod only when no PodDisruptionBudget selecting it would drop below its floor;
otherwise it answers 429 TooManyRequests, and the caller retries later. Without this an
operator's budgets are never exercised: a plain DELETE ignores them, on a real cluster too.

The rules (kube-controller-manager's disruption controller and the eviction REST handler):
expected pods come from the pods' controllers' ``spec.replicas`` (or the number of pods for an
integer ``minAvailable``), healthy pods are Ready and not terminating, ``disruptionsAllowed``
is healthy minus desired; a pod that is not Ready may be evicted when
``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or when the budget is met (the default
``IfHealthyBudget``); more than one budget on a pod is an error (500), as on a cluster.
The status each evaluation computes is written to the budget, so ``kubectl get pdb`` shows it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from . import apierrors
from .objects import meta
from .resources import ResourceType
from .selectors import label_matcher
from .semantics import Semantics

Obj = dict[str, Any]
PODS = ("", "pods")
PDBS = ("policy", "poddisruptionbudgets")
DEPLOYMENTS = ("apps", "deployments")


class _Host:
    """What eviction needs from the API semantics: stored objects, deletes, status writes."""

    def __init__(self, sem: Semantics) -> None:
        self.sem = sem

    def _rtype(self, store_key: tuple[str, str]) -> ResourceType:
        version = {PODS: "v1", PDBS: "v1", DEPLOYMENTS: "v1"}[store_key]
        rtype = self.sem.registry.get(store_key[0], version, store_key[1])
        assert rtype is not None, store_key
        return rtype

    def stored(self, store_key: tuple[str, str], namespace: str, name: str) -> Obj | None:
        return self.sem.store.get(store_key, namespace, name)

    def selected(self, store_key: tuple[str, str], namespace: str) -> list[Obj]:
        return list(self.sem.store.select(store_key, namespace))

    def delete_pod(self, namespace: str, name: str) -> None:
        self.sem.delete(self._rtype(PODS), namespace, name, {})

    def write_status(self, store_key: tuple[str, str], obj: Obj, status: Obj) -> None:
        name = str(meta(obj).get("name"))
        namespace = str(meta(obj).get("namespace"))
        rtype = self._rtype(store_key)
        self.sem.patch(rtype, namespace, name, {"status": status}, subresource="status")


def selector_text(selector: Mapping[str, Any] | None) -> str:
    """A LabelSelector object as selector text (matchLabels and matchExpressions)."""
    selector = selector or {}
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        joined = ",".join(values)
        parts.append(
            {
                "In": f"{key} in ({joined})",
                "NotIn": f"{key} notin ({joined})",
                "Exists": f"{key}",
                "DoesNotExist": f"!{key}",
            }[op]
        )
    return ",".join(parts)


def _ready(pod: Obj) -> bool:
    if meta(pod).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _scaled(value: int | str, total: int, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    fraction = int(value.rstrip("%")) / 100 * total
    return math.ceil(fraction) if round_up else math.floor(fraction)


def budget_status(pdb: Obj, pods: list[Obj], replicas_of: Callable[[Obj], int | None]) -> Obj:
    """The status the disruption controller computes for ``pdb`` over ``pods`` (its
    matches); ``replicas_of(pod)`` is the pod's controller's ``spec.replicas``, if any."""
    spec = pdb.get("spec") or {}
    live = [p for p in pods if not meta(p).get("deletionTimestamp")]
    healthy = sum(1 for p in live if _ready(p))
    controllers: dict[str, int] = {}
    for pod in live:
        owner = next(
            (r for r in meta(pod).get("ownerReferences") or [] if r.get("controller")), None
        )
        count = replicas_of(pod)
        if owner is not None and count is not None:
            controllers[str(owner.get("uid") or owner.get("name"))] = count
    scaled_total = sum(controllers.values()) if controllers else len(live)
    if spec.get("minAvailable") is not None:
        floor = spec["minAvailable"]
        expected = len(live) if isinstance(floor, int) else scaled_total
        desired = _scaled(floor, expected, round_up=True)
    else:
        expected = scaled_total
        unavailable = spec.get("maxUnavailable", 1)
        desired = max(0, expected - _scaled(unavailable, expected, round_up=True))
    return {
        "observedGeneration": meta(pdb).get("generation", 1),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": max(0, healthy - desired),
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True" if healthy > desired else "False",
                "reason": "SufficientPods" if healthy > desired else "InsufficientPods",
                "message": "",
            }
        ],
    }


def evict(sem: Semantics, namespace: str, name: str) -> Obj:
    """Evict pod ``namespace/name`` unless a budget forbids it (429, nothing changes)."""
    host = _Host(sem)
    pod = host.stored(PODS, namespace, name)
    if pod is None:
        raise apierrors.not_found("pods", "", name)
    success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if meta(pod).get("deletionTimestamp"):
        return success
    labels = meta(pod).get("labels") or {}
    budgets = [
        b
        for b in host.selected(PDBS, namespace)
        if (b.get("spec") or {}).get("selector") is not None
        and label_matcher(selector_text((b.get("spec") or {}).get("selector")))(
            {"metadata": {"labels": labels}}
        )
    ]
    if len(budgets) > 1:
        raise apierrors.ApiError(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support.",
        )
    if budgets:
        (pdb,) = budgets
        selector = selector_text((pdb.get("spec") or {}).get("selector"))
        matches = label_matcher(selector)
        pods = [p for p in host.selected(PODS, namespace) if matches(p)]
        status = budget_status(pdb, pods, lambda p: _controller_replicas(host, namespace, p))
        host.write_status(PDBS, pdb, status)
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
        healthy_enough = status["currentHealthy"] >= status["desiredHealthy"]
        if not _ready(pod):
            allowed = policy == "AlwaysAllow" or healthy_enough
        else:
            allowed = status["disruptionsAllowed"] > 0
        if not allowed:
            raise apierrors.ApiError(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                {
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": (
                                f"The disruption budget {meta(pdb).get('name')} needs "
                                f"{status['desiredHealthy']} healthy pods and has "
                                f"{status['currentHealthy']} currently"
                            ),
                        }
                    ]
                },
            )
    host.delete_pod(namespace, name)
    if budgets:
        (pdb,) = budgets
        fresh = host.stored(PDBS, namespace, str(meta(pdb).get("name")))
        if fresh is not None:
            after = dict(fresh.get("status") or {})
            after["disruptionsAllowed"] = max(0, int(after.get("disruptionsAllowed", 1)) - 1)
            after["currentHealthy"] = max(0, int(after.get("currentHealthy", 1)) - 1)
            host.write_status(PDBS, fresh, after)
    return success


def _controller_replicas(host: _Host, namespace: str, pod: Obj) -> int | None:
    for ref in meta(pod).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Deployment":
            owner = host.stored(DEPLOYMENTS, namespace, str(ref.get("name")))
            uid = ref.get("uid") or meta(owner or {}).get("uid")
            if owner is not None and meta(owner).get("uid") == uid:
                replicas = (owner.get("spec") or {}).get("replicas", 1)
                return int(replicas) if isinstance(replicas, int) else None
    return None
