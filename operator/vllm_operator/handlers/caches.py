"""Watch-fed caches: what a reconcile reads instead of asking the API.

kopf watches the VLLMDeployments and every child kind anyway (their events trigger the
reconciles). Its indexes (``@kopf.index``) keep the latest version of each object those
watches deliver, keyed by (namespace, owning VLLMDeployment), and drop it when it is
deleted or stops matching the labels. A reconcile builds the planner's ``Observed`` from
them: no GET or LIST per pass, whatever the number of events. kopf fills every index from
its initial LIST before it calls any other handler, so no reconcile ever runs on a
half-filled cache (which would look like missing children and make the planner act).

The cache lags the operator's own writes by a watch round-trip: ``Caches.record`` keeps
each write in ``kube.own_writes.OwnWrites`` and every read goes through it, so a reconcile
sees what it wrote (no second Job, no verdict posted twice, no wrong delete).

The kinds are one table, ``CACHED_CHILDREN`` (one row per kind: where it lives and what of
it to keep). The registry derives the watches, indexes and event handlers from it; adding
a child kind is one row here, plus its ``list``/``watch`` rows (``by="kopf"``) in
``kube.permissions``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

import kopf

from vllm_operator.kube.client import RESOURCES, VLLMD, Resource
from vllm_operator.kube.own_writes import OwnWrites
from vllm_operator.render import labels as lbl
from vllm_operator.rollout.views import owned_by

Obj = Mapping[str, Any]
IndexKey = tuple[str, str]  # (namespace, VLLMDeployment name)
# What a cache reads: kopf's ``Index`` (key -> ``Store`` of values) or, in tests, a dict.
Source = Mapping[IndexKey, Iterable[Obj]]


def without_managed_fields(body: Obj) -> dict[str, Any]:
    """The object as the API sent it, minus ``metadata.managedFields`` (never read)."""
    out = dict(body)
    meta = out.get("metadata")
    if isinstance(meta, Mapping) and "managedFields" in meta:
        out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return out


POD_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "ownerReferences",
    "deletionTimestamp",
)


def slim_pod(body: Obj) -> dict[str, Any]:
    """What ``rollout.views.pod_view`` reads of a pod: its identity, node and status.

    Pods are the most numerous children; their specs (containers, env, volumes) are the
    Deployment's template again and are never read, so they are not kept.
    """
    meta = body.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    spec = body.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    out: dict[str, Any] = {
        "apiVersion": body.get("apiVersion", "v1"),
        "kind": "Pod",
        "metadata": {k: meta[k] for k in POD_METADATA if k in meta},
        "status": body.get("status") or {},
    }
    if node:
        out["spec"] = {"nodeName": node}
    return out


@dataclass(frozen=True)
class CachedKind:
    """One kind a reconcile reads from a cache: where it lives and what of it is kept."""

    kind: str
    resource: Resource
    # The keyword of ``rollout.observe`` the objects go to.
    observed_as: str = ""
    # Controlled by the VLLMDeployment (its ownerReference): a look-alike is not its child.
    # Pods are controlled by a ReplicaSet or a Job, so only their labels count.
    owned: bool = True
    slim: Callable[[Obj], dict[str, Any]] = field(default=without_managed_fields)
    # An autoscaling engine (config.autoscaling_engines): cached only when the operator is
    # given it, so a cluster without KEDA, or RBAC without autoscalers, needs no such watch.
    feature: str | None = None

    @property
    def index_id(self) -> str:
        """The index's kopf id, which is also the keyword its handlers receive it under."""
        return f"vllmop_cache_{self.resource.plural}"


VLLMD_CACHE = CachedKind("VLLMDeployment", VLLMD)
CACHED_CHILDREN: tuple[CachedKind, ...] = (
    CachedKind("Deployment", RESOURCES["Deployment"], "deployments"),
    # Multi-node revisions (config.multi_node): watched only where LWS is installed.
    CachedKind("LeaderWorkerSet", RESOURCES["LeaderWorkerSet"], "deployments", feature="lws"),
    CachedKind("Service", RESOURCES["Service"], "services"),
    CachedKind("Job", RESOURCES["Job"], "jobs"),
    CachedKind("Pod", RESOURCES["Pod"], "pods", owned=False, slim=slim_pod),
    CachedKind("PodDisruptionBudget", RESOURCES["PodDisruptionBudget"], "budgets"),
    CachedKind(
        "HorizontalPodAutoscaler",
        RESOURCES["HorizontalPodAutoscaler"],
        "autoscalers",
        feature="hpa",
    ),
    CachedKind("ScaledObject", RESOURCES["ScaledObject"], "autoscalers", feature="keda"),
)
OPTIONAL_KINDS = frozenset(c.kind for c in CACHED_CHILDREN if c.feature is not None)


def cached_children(engines: Iterable[str]) -> tuple[CachedKind, ...]:
    """The cached child kinds of an operator given autoscaling ``engines``."""
    given = set(engines)
    return tuple(c for c in CACHED_CHILDREN if c.feature is None or c.feature in given)


# The labels every child carries (render.labels.common_labels): the watches' filter.
CHILD_LABELS: dict[str, Any] = {
    lbl.DEPLOYMENT_LABEL: kopf.PRESENT,
    lbl.MANAGED_BY_LABEL: lbl.MANAGED_BY,
}


def _name(obj: Obj) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


class Caches:
    """The reconcile's read side: cached objects with the operator's own writes on top."""

    def __init__(self, writes: OwnWrites | None = None) -> None:
        self.sources: dict[str, Source] = {}
        self.writes = writes if writes is not None else OwnWrites()
        self.bound = False

    @classmethod
    def of(cls, objects: Mapping[str, Iterable[Obj]], writes: OwnWrites | None = None) -> Caches:
        """Caches holding ``objects`` (kind -> objects), keyed as the watches key them; every
        always-watched kind is present, empty unless given."""
        caches = cls(writes)
        for cached in (VLLMD_CACHE, *cached_children(())):
            caches.sources[cached.kind] = {}  # a kind not given holds nothing
        for kind, objs in objects.items():
            source: dict[IndexKey, list[Obj]] = {}
            for obj in objs:
                key = owner_key(obj) if kind != VLLMD_CACHE.kind else own_key(obj)
                if key is not None:
                    source.setdefault(key, []).append(obj)
            caches.sources[kind] = source
        return caches

    def bind(self, handler_kwargs: Mapping[str, Any]) -> None:
        """Take kopf's indexes from the keywords of a handler call (they never change)."""
        if self.bound:
            return
        for cached in (VLLMD_CACHE, *CACHED_CHILDREN):
            index = handler_kwargs.get(cached.index_id)
            if index is not None:
                self.sources[cached.kind] = index
        self.bound = VLLMD_CACHE.kind in self.sources

    def child(self, kind: str, namespace: str, owner: str, name: str) -> Obj | None:
        """One of ``owner``'s objects by name, as last seen or written (None: not known)."""
        if kind not in self.sources:
            return None
        cached = self._cached(kind, namespace, owner).get(name)
        return self.writes.view((kind, namespace, name), cached)

    def _cached(self, kind: str, namespace: str, owner: str) -> dict[str, Obj]:
        source = self.sources.get(kind)
        if source is None:
            raise RuntimeError(f"no cache of {kind} yet (read before kopf's first event)")
        return {_name(o): o for o in source.get((namespace, owner), ())}

    def body(self, namespace: str, name: str) -> Obj | None:
        """The VLLMDeployment ``namespace/name`` as last seen or written, or None."""
        cached = self._cached(VLLMD_CACHE.kind, namespace, name).get(name)
        return self.writes.view((VLLMD_CACHE.kind, namespace, name), cached)

    def children(self, kind: str, namespace: str, owner: str) -> list[Obj]:
        """The objects of ``kind`` labelled as ``owner``'s, as last seen or written."""
        if kind in OPTIONAL_KINDS and kind not in self.sources:
            return []  # an autoscaling engine this operator is not given: never watched
        cached = self._cached(kind, namespace, owner)
        names = set(cached) | {key[2] for key in self.writes.keys_of(kind, namespace, owner)}
        found = (self.writes.view((kind, namespace, n), cached.get(n)) for n in sorted(names))
        return [obj for obj in found if obj is not None]

    def record(self, kind: str, namespace: str, owner: str, name: str, written: Obj | None) -> None:
        """The operator wrote ``written`` (None: deleted it): reads see it from now on."""
        if kind not in self.sources:
            return  # a kind no watch caches: nothing can be stale
        cached = self._cached(kind, namespace, owner).get(name)
        self.writes.record((kind, namespace, name), owner, cached, written)


class ObservedChildren(TypedDict, total=False):
    """The keywords of ``rollout.observe`` a ``CachedKind.observed_as`` may name."""

    deployments: list[Obj]
    services: list[Obj]
    jobs: list[Obj]
    pods: list[Obj]
    budgets: list[Obj]
    autoscalers: list[Obj]


def observed_children(caches: Caches, namespace: str, name: str) -> ObservedChildren:
    """The children of VLLMDeployment ``namespace/name`` as keywords of ``rollout.observe``:
    every cached kind, only the objects it controls where ownership is checked."""
    body = caches.body(namespace, name)
    meta = body.get("metadata") if body is not None else None
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    found: dict[str, list[Obj]] = {}
    for cached in CACHED_CHILDREN:  # two autoscaler kinds share one keyword
        found.setdefault(cached.observed_as, []).extend(
            obj
            for obj in caches.children(cached.kind, namespace, name)
            if not cached.owned or owned_by(uid if isinstance(uid, str) else None, obj)
        )
    return cast(ObservedChildren, found)


def owner_key(obj: Obj) -> IndexKey | None:
    """A child's index key: its namespace and the VLLMDeployment its label names."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    owner = labels.get(lbl.DEPLOYMENT_LABEL) if isinstance(labels, Mapping) else None
    if not isinstance(owner, str) or not isinstance(meta, Mapping):
        return None
    return (str(meta.get("namespace") or "default"), owner)


def own_key(obj: Obj) -> IndexKey | None:
    """A VLLMDeployment's index key: its own namespace and name."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return None
    return (str(meta.get("namespace") or "default"), str(meta["name"]))


def register_indexes(registry: kopf.OperatorRegistry, engines: Iterable[str] = ()) -> None:
    """One kopf index per cached kind on ``registry`` (the watches kopf runs anyway);
    autoscaler kinds only for the autoscaling ``engines`` the operator is given."""
    for cached in (VLLMD_CACHE, *cached_children(engines)):
        res = cached.resource
        is_child = cached.kind != VLLMD_CACHE.kind

        def index(
            *, body: kopf.Body, cached: CachedKind = cached, is_child: bool = is_child, **_: Any
        ) -> dict[IndexKey, dict[str, Any]] | None:
            key = owner_key(body) if is_child else own_key(body)
            return None if key is None else {key: cached.slim(body)}

        kopf.index(
            res.group,
            res.version,
            res.plural,
            id=cached.index_id,
            registry=registry,
            labels=CHILD_LABELS if is_child else None,
        )(index)
