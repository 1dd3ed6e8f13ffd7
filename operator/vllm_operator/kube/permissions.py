"""Every Kubernetes API call the operator makes, declared in one place.

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

Deliberately absent: Secrets (API keys and HF tokens are only referenced from pod specs),
ConfigMaps (a custom suite is mounted into the Job, never read by the operator), ``*``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Verb = Literal["get", "list", "watch", "create", "patch", "update", "delete"]


@dataclass(frozen=True)
class Permission:
    """One (apiGroup, resource, verb) the operator uses; ``resource`` may be a subresource."""

    api_group: str
    resource: str
    verb: Verb
    by: Literal["operator", "kopf", "apiserver"] = "operator"
    why: str = ""

    @property
    def cluster_scoped(self) -> bool:
        """Granted by a ClusterRole in every scope (the resource has no namespace)."""
        return self.resource in CLUSTER_SCOPED


class PermissionNotDeclared(RuntimeError):
    """A call to the API that ``PERMISSIONS`` does not declare (a bug, never a retry)."""


_GROUP = "vllm-operator.dev"
CLUSTER_SCOPED = frozenset({"nodes"})

PERMISSIONS: tuple[Permission, ...] = (
    # The custom resource.
    Permission(_GROUP, "vllmdeployments", "list", "kopf", "watch for spec changes; cache"),
    Permission(_GROUP, "vllmdeployments", "watch", "kopf", "watch for spec changes; cache"),
    Permission(
        _GROUP, "vllmdeployments", "patch", why="record handled promote/abort/rerun requests"
    ),
    Permission(_GROUP, "vllmdeployments/status", "patch", why="write phase, conditions, verdicts"),
    # Children carry blockOwnerDeletion: true; with OwnerReferencesPermissionEnforcement
    # (OpenShift's default) creating them needs update on the owner's finalizers. Not a call
    # the operator makes itself: the API server checks it on every create of a child.
    Permission(
        _GROUP,
        "vllmdeployments/finalizers",
        "update",
        "apiserver",
        "create children with blockOwnerDeletion (owner-reference permission enforcement)",
    ),
    # One Deployment per revision.
    Permission("apps", "deployments", "list", "kopf", "cache the revisions of a resource"),
    Permission("apps", "deployments", "get", why="who holds a name about to be created"),
    Permission("apps", "deployments", "watch", "kopf", "react to readiness changes; cache"),
    Permission("apps", "deployments", "create", why="start a candidate revision"),
    Permission("apps", "deployments", "patch", why="scale a candidate, set its role"),
    Permission("apps", "deployments", "delete", why="remove rejected and retired revisions"),
    # The serving and candidate Services.
    Permission("", "services", "list", "kopf", "cache: which revision the Service selects"),
    Permission("", "services", "watch", "kopf", "cache: which revision the Service selects"),
    Permission("", "services", "get", why="who holds a name about to be created"),
    Permission("", "services", "create", why="create the serving and candidate Services"),
    Permission("", "services", "patch", why="switch the serving Service to a promoted revision"),
    Permission("", "services", "delete", why="remove the twin's Service after a gate"),
    # Benchmark Jobs.
    Permission("batch", "jobs", "list", "kopf", "cache the benchmark Jobs"),
    Permission("batch", "jobs", "get", why="who holds a name about to be created"),
    Permission("batch", "jobs", "watch", "kopf", "react to finished benchmarks; cache"),
    Permission("batch", "jobs", "create", why="benchmark a Ready candidate"),
    Permission("batch", "jobs", "delete", why="remove abandoned or judged benchmark Jobs"),
    # Pods: causes of stuck candidates, benchmark results.
    Permission(
        "",
        "pods",
        "list",
        why="kopf's cache (why a candidate or Job pod does not run); read a finished Job's "
        "pods fresh, once, before its verdict",
    ),
    Permission("", "pods", "watch", "kopf", "react to pods failing to start; cache"),
    Permission("", "pods/log", "get", why="a summary if the termination message is empty"),
    # Nodes (cluster-scoped): where a gate's candidate and twin ran.
    Permission("", "nodes", "get", why="GPU product (nvidia.com/gpu.product) of a gate's nodes"),
    # Events on the resource.
    Permission("", "events", "create", why="an Event for every transition and warning"),
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
