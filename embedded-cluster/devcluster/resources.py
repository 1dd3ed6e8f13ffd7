"""The resource types the development cluster serves: built-ins plus whatever CRDs define.

One table drives discovery (kubectl, kopf and the ``kubernetes`` client all resolve
plural/kind/shortName from it), routing, status-subresource semantics and Table printing.
Objects are stored per group+plural, so every served version of a CRD sees the same objects
(no conversion: the devcluster rewrites ``apiVersion`` only).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import cel

Column = dict[str, Any]  # an additionalPrinterColumns entry: name, type, jsonPath, ...

_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One served group/version/plural with everything clients ask discovery about."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status_subresource: bool = False
    extra_subresources: tuple[str, ...] = ()
    # A CRD's scale subresource: where its Scale's selector is read (e.g. LeaderWorkerSet's
    # ".status.hpaPodSelector"); empty: spec.selector.matchLabels, as for Deployments.
    scale_selector_path: str = ""
    columns: tuple[Column, ...] = ()
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    # The schema's x-kubernetes-validations, compiled (cel.Node); None: no rules.
    rules: Any = field(default=None, compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def store_key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    def describe(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def discovery_entries(self) -> list[dict[str, Any]]:
        """APIResourceList entries for this resource and its subresources."""
        main: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular_name,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(_VERBS),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        entries = [main]
        if self.status_subresource:
            entries.append(
                {
                    "name": f"{self.plural}/status",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        for sub in self.extra_subresources:
            entries.append(
                {
                    "name": f"{self.plural}/{sub}",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": ["get"],
                }
            )
        return entries


def _col(name: str, json_path: str, type_: str = "string", priority: int = 0) -> Column:
    return {"name": name, "type": type_, "jsonPath": json_path, "priority": priority}


def _computed(name: str, compute: str, type_: str = "string") -> Column:
    """A column kubectl shows for a built-in kind that no JSONPath expresses ("1/2" ready)."""
    return {"name": name, "type": type_, "compute": compute, "priority": 0}


_AGE = _col("Age", ".metadata.creationTimestamp", "date")

BUILTINS: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        status_subresource=True,
        columns=(_col("Status", ".status.phase"), _AGE),
    ),
    ResourceType(
        "",
        "v1",
        "nodes",
        "Node",
        namespaced=False,
        short_names=("no",),
        status_subresource=True,
        columns=(_AGE,),
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        short_names=("po",),
        categories=("all",),
        status_subresource=True,
        extra_subresources=("log", "eviction"),
        columns=(
            _computed("Ready", "pod-ready"),
            _computed("Status", "pod-status"),
            _computed("Restarts", "pod-restarts", "integer"),
            _AGE,
            _col("IP", ".status.podIP", priority=1),
        ),
    ),
    ResourceType(
        "",
        "v1",
        "services",
        "Service",
        short_names=("svc",),
        categories=("all",),
        status_subresource=True,
        columns=(
            _col("Type", ".spec.type"),
            _col("Cluster-IP", ".spec.clusterIP"),
            _computed("Port(s)", "service-ports"),
            _AGE,
            {**_computed("Selector", "service-selector"), "priority": 1},
        ),
    ),
    ResourceType("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    ResourceType("", "v1", "secrets", "Secret"),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    ResourceType(
        "",
        "v1",
        "events",
        "Event",
        short_names=("ev",),
        columns=(
            _col("Type", ".type"),
            _col("Reason", ".reason"),
            _col("Object", ".involvedObject.name"),
            _col("Message", ".message"),
        ),
    ),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        short_names=("deploy",),
        categories=("all",),
        status_subresource=True,
        extra_subresources=("scale",),
        columns=(
            _computed("Ready", "deployment-ready"),
            _computed("Up-To-Date", "deployment-updated", "integer"),
            _computed("Available", "deployment-available", "integer"),
            _AGE,
        ),
    ),
    ResourceType(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        short_names=("rs",),
        categories=("all",),
        status_subresource=True,
        columns=(
            _col("Desired", ".spec.replicas", "integer"),
            _col("Ready", ".status.readyReplicas", "integer"),
            _AGE,
        ),
    ),
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "Job",
        categories=("all",),
        status_subresource=True,
        columns=(
            _computed("Status", "job-status"),
            _computed("Completions", "job-completions"),
            _AGE,
        ),
    ),
    ResourceType(
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        columns=(_col("Holder", ".spec.holderIdentity"), _AGE),
    ),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        short_names=("ev",),
        columns=(
            _col("Type", ".type"),
            _col("Reason", ".reason"),
            _col("Object", ".regarding.name"),
            _col("Note", ".note"),
        ),
    ),
    ResourceType(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        short_names=("hpa",),
        categories=("all",),
        status_subresource=True,
        columns=(
            _col("Reference", ".spec.scaleTargetRef.name"),
            _col("MinPods", ".spec.minReplicas", "integer"),
            _col("MaxPods", ".spec.maxReplicas", "integer"),
            _col("Replicas", ".status.currentReplicas", "integer"),
            _AGE,
        ),
    ),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        short_names=("pdb",),
        status_subresource=True,
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
        status_subresource=True,
        columns=(_col("Created At", ".metadata.creationTimestamp"),),
    ),
)

CRD_GROUP = "apiextensions.k8s.io"
CRD_PLURAL = "customresourcedefinitions"


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The ResourceTypes a CustomResourceDefinition serves (one per served version)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    served: list[ResourceType] = []
    for index, ver in enumerate(spec.get("versions") or []):
        if not ver.get("served", True):
            continue
        schema = (ver.get("schema") or {}).get("openAPIV3Schema")
        where = f"spec.versions[{index}].schema.openAPIV3Schema"
        subresources = ver.get("subresources") or {}
        extra = ("scale",) if "scale" in subresources else ()
        served.append(
            ResourceType(
                group=spec.get("group", ""),
                version=ver.get("name", "v1"),
                plural=names.get("plural", ""),
                kind=names.get("kind", ""),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular", ""),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status_subresource="status" in subresources,
                extra_subresources=extra,
                scale_selector_path=str(
                    (subresources.get("scale") or {}).get("labelSelectorPath") or ""
                ),
                columns=tuple(ver.get("additionalPrinterColumns") or ()),
                schema=schema,
                rules=cel.compile_schema(schema, where)[0],
            )
        )
    return served


class Registry:
    """Served resource types, indexed for routing (group, version, plural) and by kind."""

    def __init__(self, builtins: Iterable[ResourceType] = BUILTINS) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._by_crd: dict[str, list[ResourceType]] = {}
        for rtype in builtins:
            self.add(rtype)

    def add(self, rtype: ResourceType) -> None:
        self._types[(rtype.group, rtype.version, rtype.plural)] = rtype

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))

    def set_crd(self, crd_name: str, types: list[ResourceType]) -> None:
        self.remove_crd(crd_name)
        self._by_crd[crd_name] = types
        for rtype in types:
            self.add(rtype)

    def remove_crd(self, crd_name: str) -> list[ResourceType]:
        removed = self._by_crd.pop(crd_name, [])
        for rtype in removed:
            self._types.pop((rtype.group, rtype.version, rtype.plural), None)
        return removed

    def versions_of(self, group: str, plural: str) -> list[ResourceType]:
        return [t for t in self._types.values() if t.group == group and t.plural == plural]

    def groups(self) -> dict[str, list[str]]:
        """Group name -> served versions (core group "" included), preferred version first."""
        found: dict[str, list[str]] = {}
        for rtype in self._types.values():
            versions = found.setdefault(rtype.group, [])
            if rtype.version not in versions:
                versions.append(rtype.version)
        return {g: sorted(vs, key=_version_priority) for g, vs in found.items()}


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version ordering: GA > beta > alpha, then higher numbers first."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (3, 0, 0)
    major, stage, minor = int(match[1]), match[2], int(match[3] or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor)
