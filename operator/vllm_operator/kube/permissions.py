"""Every Kubernetes API call the operator makes, declared in one place (``api/kinds.py``).

The Helm chart's RBAC rules are tested against this list in both directions, and the
``kube`` client refuses any call that is not declared here, so the chart can never grant
less than the code needs (a 403 in production) nor more (a wider blast radius than needed).
The calls kopf itself makes to watch resources are declared too (``by="kopf"``): the chart
must grant them, though they do not go through ``kube.client``. Every list and watch is
kopf's: its watches feed the caches a reconcile reads (``handlers.caches``); the operator
itself lists only a finished benchmark Job's pods, once, before judging it. So are rights
the API server checks on the operator's behalf (``by="apiserver"``:
``vllmdeployments/finalizers`` update, which owner-reference permission enforcement
requires for children with ``blockOwnerDeletion``).

Nodes are cluster-scoped: ``get nodes`` (the GPU product a gate's pods ran on, from the
``nvidia.com/gpu.product`` label) is granted by a ClusterRole even when the operator watches
only some namespaces. Read-only, one verb, no list: the operator reads only the nodes its
candidates and twins were scheduled to, during a gate.

Leases (leader election) are granted only in the operator's own namespace: a Role there,
whatever namespaces it watches (``own_namespace``), rendered when the chart enables leader
election. get, create and update: no list or watch (the Lease's name is fixed), no delete.

Autoscalers are optional (``feature``): HorizontalPodAutoscalers are declared with
``feature="hpa"`` and KEDA ScaledObjects with ``feature="keda"``; the chart grants them only
when its ``autoscaling.enabled`` / ``autoscaling.keda`` values say so, and the operator
touches them only when told the same (``--autoscaling-engines``), so a cluster without KEDA
or a namespace where autoscalers are not wanted needs no such rights.

Deliberately absent: Secrets (API keys and HF tokens are only referenced from pod specs),
ConfigMaps (a custom suite is mounted into the Job, never read by the operator), ``*``.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.api.kinds import KINDS, By, Feature, Verb
from vllm_operator.errors import VLLMOperatorError

__all__ = ["CLUSTER_SCOPED", "PERMISSIONS", "Permission", "PermissionNotDeclared", "Verb"]


@dataclass(frozen=True)
class Permission:
    """One (apiGroup, resource, verb) the operator uses; ``resource`` may be a subresource."""

    api_group: str
    resource: str
    verb: Verb
    by: By = "operator"
    why: str = ""
    # An optional feature the chart grants only when enabled (None: always granted).
    feature: Feature | None = None

    @property
    def cluster_scoped(self) -> bool:
        """Granted by a ClusterRole in every scope (the resource has no namespace)."""
        return self.resource in CLUSTER_SCOPED

    @property
    def own_namespace(self) -> bool:
        """Granted by a Role in the operator's own namespace only (leader election)."""
        return self.resource in OWN_NAMESPACE


class PermissionNotDeclared(VLLMOperatorError, RuntimeError):
    """A call to the API that ``PERMISSIONS`` does not declare (a bug, never a retry)."""


CLUSTER_SCOPED = frozenset(k.plural for k in KINDS if not k.namespaced)
OWN_NAMESPACE = frozenset(k.plural for k in KINDS if k.own_namespace)

# Derived from the one table of kinds (api/kinds.py), where each right says why it is needed.
PERMISSIONS: tuple[Permission, ...] = tuple(
    Permission(
        k.group,
        f"{k.plural}/{r.subresource}" if r.subresource else k.plural,
        r.verb,
        r.by,
        r.why,
        r.feature,
    )
    for k in KINDS
    for r in k.rights
)


def is_declared(api_group: str, resource: str, verb: str) -> bool:
    """Whether the operator may make this call."""
    return any(
        p.api_group == api_group and p.resource == resource and p.verb == verb for p in PERMISSIONS
    )


def require(api_group: str, resource: str, verb: str) -> None:
    """Raise ``PermissionNotDeclared`` unless the call is declared in ``PERMISSIONS``."""
    if not is_declared(api_group, resource, verb):
        raise PermissionNotDeclared(
            f"{verb} {resource or '?'} in API group {api_group or 'core'!r} is not declared in "
            "vllm_operator.kube.permissions.PERMISSIONS (declare it and update the chart's RBAC)"
        )
