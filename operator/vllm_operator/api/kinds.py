"""Every kind the operator touches, once: where it lives in the API and what may be done to it.

The client's resource paths (``kube.client.RESOURCES``), the permissions it enforces and the
chart's RBAC is tested against (``kube.permissions.PERMISSIONS``), the kinds the planner may
create, patch and delete (``ChildKind``, the children a VLLMDeployment owns) and the kinds
the shell treats as children all come from ``KINDS``. A new child kind is one row here (with
its rights and why each is needed), a render function and the planner step that creates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from vllm_operator.api.resource import GROUP, KIND, PLURAL, VERSION

Verb = Literal["get", "list", "watch", "create", "patch", "update", "delete"]
# Who makes the call: the operator (through kube.client), kopf (its watches), or the API
# server on the operator's behalf (owner-reference permission enforcement).
By = Literal["operator", "kopf", "apiserver"]
# The children a VLLMDeployment owns: what the planner's actions name.
ChildKind = Literal[
    "Deployment",
    "LeaderWorkerSet",
    "Service",
    "Job",
    "HorizontalPodAutoscaler",
    "ScaledObject",
    "PodDisruptionBudget",
]
# An optional feature the chart grants only when enabled (None: always granted).
Feature = Literal["hpa", "keda", "lws"]


@dataclass(frozen=True)
class Right:
    """One verb on a kind (or one of its subresources), and why the operator needs it."""

    verb: Verb
    why: str
    by: By = "operator"
    subresource: str = ""
    feature: Feature | None = None


@dataclass(frozen=True)
class KindInfo:
    """One kind: its API coordinates, whether it is a child, and the rights on it."""

    kind: str
    group: str
    version: str
    plural: str
    rights: tuple[Right, ...]
    child: bool = False  # created by the planner and owned by the VLLMDeployment
    namespaced: bool = True
    own_namespace: bool = False  # only in the operator's own namespace (a Role, not cluster)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _autoscaler_rights(feature: Feature) -> tuple[Right, ...]:
    return (
        Right("list", "cache the autoscaler of a resource", "kopf", feature=feature),
        Right("watch", "cache the autoscaler of a resource", "kopf", feature=feature),
        Right("get", "who holds a name about to be created", feature=feature),
        Right("create", "scale the serving revision with load", feature=feature),
        Right("patch", "move it to a promoted revision", feature=feature),
        Right("delete", "remove it when spec.autoscaling goes", feature=feature),
    )


KINDS: tuple[KindInfo, ...] = (
    KindInfo(
        KIND,
        GROUP,
        VERSION,
        PLURAL,
        (
            Right("list", "watch for spec changes; cache", "kopf"),
            Right("watch", "watch for spec changes; cache", "kopf"),
            Right("patch", "record handled promote/abort/rerun requests"),
            Right("patch", "write phase, conditions, verdicts", subresource="status"),
            # Children carry blockOwnerDeletion: true; with OwnerReferencesPermission-
            # Enforcement (OpenShift's default) creating them needs update on the owner's
            # finalizers. Not a call the operator makes: the API server checks it.
            Right(
                "update",
                "create children with blockOwnerDeletion (owner-reference permission enforcement)",
                "apiserver",
                subresource="finalizers",
            ),
        ),
    ),
    # One Deployment per revision.
    KindInfo(
        "Deployment",
        "apps",
        "v1",
        "deployments",
        (
            Right("list", "cache the revisions of a resource", "kopf"),
            Right("get", "who holds a name about to be created"),
            Right("watch", "react to readiness changes; cache", "kopf"),
            Right("create", "start a candidate revision"),
            Right("patch", "scale a candidate, set its role"),
            Right("delete", "remove rejected and retired revisions"),
        ),
        child=True,
    ),
    # One LeaderWorkerSet per multi-node revision (spec.resources.nodes > 1), in place of
    # its Deployment; only where LeaderWorkerSet is installed (feature "lws", --multi-node).
    KindInfo(
        "LeaderWorkerSet",
        "leaderworkerset.x-k8s.io",
        "v1",
        "leaderworkersets",
        (
            Right("list", "cache the multi-node revisions of a resource", "kopf", feature="lws"),
            Right("watch", "react to group readiness changes; cache", "kopf", feature="lws"),
            Right("get", "who holds a name about to be created", feature="lws"),
            Right("create", "start a multi-node candidate revision", feature="lws"),
            Right("patch", "scale a multi-node candidate, set its role", feature="lws"),
            Right("delete", "remove rejected and retired multi-node revisions", feature="lws"),
        ),
        child=True,
    ),
    # With --multi-node, kopf watches the CRDs (cluster-scoped, read-only) so that a
    # LeaderWorkerSet CRD installed after start-up is watched without a restart
    # (handlers/registry.py ``configure``); the operator never reads them itself.
    KindInfo(
        "CustomResourceDefinition",
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        (
            Right("list", "notice LeaderWorkerSet installed after start-up", "kopf", feature="lws"),
            Right(
                "watch", "notice LeaderWorkerSet installed after start-up", "kopf", feature="lws"
            ),
        ),
        namespaced=False,
    ),
    # The serving and candidate Services.
    KindInfo(
        "Service",
        "",
        "v1",
        "services",
        (
            Right("list", "cache: which revision the Service selects", "kopf"),
            Right("watch", "cache: which revision the Service selects", "kopf"),
            Right("get", "who holds a name about to be created"),
            Right("create", "create the serving and candidate Services"),
            Right("patch", "switch the serving Service to a promoted revision"),
            Right("delete", "remove the twin's Service after a gate"),
        ),
        child=True,
    ),
    # Benchmark Jobs.
    KindInfo(
        "Job",
        "batch",
        "v1",
        "jobs",
        (
            Right("list", "cache the benchmark Jobs", "kopf"),
            Right("get", "who holds a name about to be created"),
            Right("watch", "react to finished benchmarks; cache", "kopf"),
            Right("create", "benchmark a Ready candidate"),
            Right("delete", "remove abandoned or judged benchmark Jobs"),
        ),
        child=True,
    ),
    # Pods: causes of stuck candidates, benchmark results.
    KindInfo(
        "Pod",
        "",
        "v1",
        "pods",
        (
            Right(
                "list",
                "kopf's cache (why a candidate or Job pod does not run); read a finished Job's "
                "pods fresh, once, before its verdict",
            ),
            Right("watch", "react to pods failing to start; cache", "kopf"),
            Right("get", "a summary if the termination message is empty", subresource="log"),
        ),
    ),
    # Nodes (cluster-scoped): where a gate's candidate and twin ran.
    KindInfo(
        "Node",
        "",
        "v1",
        "nodes",
        (Right("get", "GPU product (nvidia.com/gpu.product) of a gate's nodes"),),
        namespaced=False,
    ),
    # One PodDisruptionBudget per serving revision.
    KindInfo(
        "PodDisruptionBudget",
        "policy",
        "v1",
        "poddisruptionbudgets",
        (
            Right("list", "cache the serving budgets", "kopf"),
            Right("watch", "cache the serving budgets", "kopf"),
            Right("get", "who holds a name to be created"),
            Right("create", "budget a serving revision"),
            Right("patch", "apply spec.disruption changes"),
            Right("delete", "remove a retired budget"),
        ),
        child=True,
    ),
    # The autoscaler of the serving revision (optional features, see kube/permissions.py).
    KindInfo(
        "HorizontalPodAutoscaler",
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        _autoscaler_rights("hpa"),
        child=True,
    ),
    KindInfo(
        "ScaledObject",
        "keda.sh",
        "v1alpha1",
        "scaledobjects",
        _autoscaler_rights("keda"),
        child=True,
    ),
    # A canary's HTTPRoute (rollout.canary.traffic.mode gatewayAPI): the user's object, not a
    # child; the operator only reads it and sets the weights of its backends.
    KindInfo(
        "HTTPRoute",
        "gateway.networking.k8s.io",
        "v1",
        "httproutes",
        (
            Right("get", "read the canary's route (rollout.canary.traffic.httpRoute)"),
            Right("patch", "set its backend weights between stable and candidate"),
        ),
    ),
    # Leader election (operator's namespace only): one Lease, read and renewed.
    KindInfo(
        "Lease",
        "coordination.k8s.io",
        "v1",
        "leases",
        (
            Right("get", "read who leads"),
            Right("create", "the first replica creates it"),
            Right("update", "acquire, renew, release"),
        ),
        own_namespace=True,
    ),
    # Events on the resource.
    KindInfo(
        "Event",
        "",
        "v1",
        "events",
        (Right("create", "an Event for every transition and warning"),),
    ),
)

BY_KIND: dict[str, KindInfo] = {k.kind: k for k in KINDS}
CHILD_KINDS: tuple[ChildKind, ...] = get_args(ChildKind)
