"""Deletion as the API server and its controllers do it: finalizers, garbage collection,
namespace and CRD cleanup.

kmock 0.8 removes an object on DELETE and leaves its children behind. An operator that
relies on ``ownerReferences`` (the rollout removes a candidate by deleting its owner) would
pass tests and leak on a cluster, or the reverse. Rules implemented:
- DELETE with finalizers sets ``deletionTimestamp`` once; the object goes when the last
  finalizer is removed (by any later write).
- Removal garbage-collects dependents by owner uid, recursively, after the call returns
  (scheduled, like the real collector): a dependent whose other owners still exist only
  loses the reference; ``propagationPolicy: Orphan`` strips references instead. batch/v1
  Jobs default to Orphan when no policy is given, as on a real server. ``Foreground``
  keeps the owner (finalizer ``foregroundDeletion``) until its dependents are gone.
- A new object whose owners do not exist is collected too (wrong uid = a real bug).
- An owner reference resolves as the real collector resolves it: the kind (group from
  ``apiVersion``) names a resource, the owner is looked up by ``name`` in the dependent's
  namespace (or cluster-wide for a cluster-scoped kind) and must carry the reference's
  ``uid``. An owner with the right uid in another namespace, or under another name or
  kind, is absent: the dependent is deleted once no owner is present, and a dependent
  whose other owners are present loses its dangling references. A reference that cannot
  be resolved (unknown kind, or a cluster-scoped dependent naming a namespaced kind)
  leaves the dependent alone, as the collector does.
- Deleting a namespace (or a CRD) marks it terminating, deletes its contents and removes
  it when empty.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable
from typing import Any

from . import apierrors
from .objects import meta, owner_uids, timestamp, without_owner
from .resources import CRD_GROUP, CRD_PLURAL, Registry, ResourceType
from .store import Store, StoreKey, name_of, namespace_of

NAMESPACES: StoreKey = ("", "namespaces")
CRDS: StoreKey = (CRD_GROUP, CRD_PLURAL)
_ORPHAN_BY_DEFAULT = {("batch", "jobs")}
FOREGROUND = "foregroundDeletion"


class Lifecycle:
    """Mixed into ``Semantics``; relies on its store, registry, clock and scheduler."""

    store: Store
    registry: Registry
    clock: Callable[[], datetime.datetime]
    schedule: Callable[[Callable[[], None]], None]
    _orphaning: set[str]

    def delete(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        options: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        options = options or {}
        obj = self.store.get(rtype.store_key, namespace, name)
        if obj is None:
            raise apierrors.not_found(rtype.plural, rtype.group, name)
        pre = options.get("preconditions") or {}
        m = meta(obj)
        if pre.get("uid") not in (None, m.get("uid")) or pre.get("resourceVersion") not in (
            None,
            m.get("resourceVersion"),
        ):
            raise apierrors.conflict(rtype.plural, rtype.group, name)
        policy = options.get("propagationPolicy")
        if options.get("orphanDependents") is True:
            policy = "Orphan"
        if policy is None and rtype.store_key in _ORPHAN_BY_DEFAULT:
            policy = "Orphan"
        if policy == "Orphan":
            self._orphaning.add(str(m.get("uid")))
        if m.get("deletionTimestamp"):
            return obj
        terminating_container = rtype.store_key in (NAMESPACES, CRDS)
        foreground = policy == "Foreground" and self._dependents(str(m.get("uid")))
        if m.get("finalizers") or terminating_container or foreground:
            marked = copy.deepcopy(obj)
            marked["metadata"]["deletionTimestamp"] = timestamp(self.clock())
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            if foreground:
                finalizers = marked["metadata"].setdefault("finalizers", [])
                finalizers.append(FOREGROUND)
                uid = str(m.get("uid"))
                self.schedule(lambda: self._collect_dependents(uid, orphan=False))
            if rtype.store_key == NAMESPACES:
                marked.setdefault("status", {})["phase"] = "Terminating"
            stored = self.store.commit(rtype.store_key, "MODIFIED", marked)
            if terminating_container:
                self.schedule(lambda: self._empty_container(rtype.store_key, stored))
            return stored
        return self.remove(rtype.store_key, obj)

    def delete_collection(
        self,
        rtype: ResourceType,
        namespace: str | None,
        matches: Callable[[dict[str, Any]], bool],
        options: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        deleted = []
        for obj in self.store.select(rtype.store_key, namespace):
            if matches(obj):
                try:
                    deleted.append(self.delete(rtype, namespace_of(obj), name_of(obj), options))
                except apierrors.ApiError:
                    continue
        return deleted

    def _dependents(self, uid: str) -> list[tuple[StoreKey, dict[str, Any]]]:
        return [(sk, obj) for sk, obj in self.store.all_objects() if uid in owner_uids(obj)]

    def _release_foreground_owners(self, dependent: dict[str, Any]) -> None:
        """A foreground-deleted owner goes once its last dependent is gone."""
        for uid in owner_uids(dependent):
            located = self.store.by_uid(uid)
            if located is None or self._dependents(uid):
                continue
            store_key, owner = located
            finalizers = meta(owner).get("finalizers") or []
            if FOREGROUND in finalizers:
                released = copy.deepcopy(owner)
                rest = [f for f in finalizers if f != FOREGROUND]
                released["metadata"]["finalizers"] = rest
                if rest:
                    self.store.commit(store_key, "MODIFIED", released)
                else:
                    del released["metadata"]["finalizers"]
                    self.remove(store_key, released)

    def remove(self, store_key: StoreKey, obj: dict[str, Any]) -> dict[str, Any]:
        """Finally remove ``obj`` (no finalizers left) and schedule what follows from it."""
        gone = self.store.commit(store_key, "DELETED", obj)
        if owner_uids(gone):
            self.schedule(lambda: self._release_foreground_owners(gone))
        uid = str(meta(gone).get("uid"))
        orphan = uid in self._orphaning
        self._orphaning.discard(uid)
        self.schedule(lambda: self._collect_dependents(uid, orphan=orphan))
        namespace = namespace_of(gone)
        if namespace:
            ns = self.store.get(NAMESPACES, "", namespace)
            if ns is not None and meta(ns).get("deletionTimestamp"):
                self.schedule(lambda: self._empty_container(NAMESPACES, ns))
        if store_key == CRDS and not self.store.dry_run:
            self.registry.remove_crd(name_of(gone))
        else:
            crd = self._crd_of(store_key)
            if crd is not None and meta(crd).get("deletionTimestamp"):
                self.schedule(lambda: self._empty_container(CRDS, crd))
        return gone

    def _crd_of(self, store_key: StoreKey) -> dict[str, Any] | None:
        group, plural = store_key
        return self.store.get(CRDS, "", f"{plural}.{group}") if group else None

    def _delete_quietly(self, store_key: StoreKey, obj: dict[str, Any]) -> None:
        """Delete as the garbage collector does: background propagation, finalizers honoured."""
        current = self.store.get(store_key, namespace_of(obj), name_of(obj))
        if current is None or meta(current).get("uid") != meta(obj).get("uid"):
            return
        if meta(current).get("deletionTimestamp"):
            return
        if meta(current).get("finalizers"):
            marked = copy.deepcopy(current)
            marked["metadata"]["deletionTimestamp"] = timestamp(self.clock())
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            self.store.commit(store_key, "MODIFIED", marked)
        else:
            self.remove(store_key, current)

    def owner_present(self, dependent: dict[str, Any], ref: dict[str, Any]) -> bool | None:
        """Whether the owner ``ref`` names exists as named: True, False (absent: the
        reference dangles), or None (unresolvable: the collector leaves it)."""
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        kind = str(ref.get("kind") or "")
        rtype = next((t for t in self.registry if t.group == group and t.kind == kind), None)
        if rtype is None:
            return None
        namespace = namespace_of(dependent)
        if rtype.namespaced and not namespace:
            return None  # a cluster-scoped dependent cannot have a namespaced owner
        owner = self.store.get(
            rtype.store_key, namespace if rtype.namespaced else "", str(ref.get("name") or "")
        )
        return owner is not None and meta(owner).get("uid") == ref.get("uid")

    def _verdicts(self, obj: dict[str, Any]) -> list[tuple[dict[str, Any], bool | None]]:
        refs = meta(obj).get("ownerReferences") or []
        return [(ref, self.owner_present(obj, ref)) for ref in refs if isinstance(ref, dict)]

    def _collect_dependents(self, owner_uid: str, *, orphan: bool) -> None:
        for store_key, obj in self.store.all_objects():
            if owner_uid not in owner_uids(obj):
                continue
            if orphan:
                self.store.commit(store_key, "MODIFIED", without_owner(obj, owner_uid))
            else:
                self._judge(store_key, obj, owner_uid)

    def _judge(self, store_key: StoreKey, obj: dict[str, Any], gone_uid: str = "") -> None:
        """The collector on one dependent: deleted when no owner is present; else its
        dangling references (and the one to ``gone_uid``) are removed."""
        verdicts = [(r, v if r.get("uid") != gone_uid else False) for r, v in self._verdicts(obj)]
        if not verdicts:
            return
        if all(present is False for _, present in verdicts):
            self._delete_quietly(store_key, obj)
            return
        if not any(present for _, present in verdicts):
            return  # only unresolvable owners besides absent ones: left alone
        kept = obj
        for ref, present in verdicts:
            if present is False:
                kept = without_owner(kept, str(ref.get("uid")))
        if kept is not obj:
            self.store.commit(store_key, "MODIFIED", kept)

    def collect_if_orphaned(self, store_key: StoreKey, obj: dict[str, Any]) -> None:
        """A new or re-owned dependent whose owners are absent is garbage, as the
        collector decides (resolved by kind, namespace, name and uid)."""
        current = self.store.get(store_key, namespace_of(obj), name_of(obj))
        if current is None or meta(current).get("uid") != meta(obj).get("uid"):
            return
        self._judge(store_key, current)

    def _empty_container(self, store_key: StoreKey, container: dict[str, Any]) -> None:
        """Delete what a terminating namespace or CRD holds; remove it once it is empty."""
        current = self.store.get(store_key, "", name_of(container))
        if current is None or not meta(current).get("deletionTimestamp"):
            return
        if store_key == NAMESPACES:
            namespace = name_of(current)
            contents = [
                (sk, obj)
                for sk, obj in self.store.all_objects()
                if sk != NAMESPACES and namespace_of(obj) == namespace
            ]
        else:
            group = (current.get("spec") or {}).get("group", "")
            plural = ((current.get("spec") or {}).get("names") or {}).get("plural", "")
            contents = [((group, plural), obj) for obj in self.store.select((group, plural))]
        for sk, obj in contents:
            self._delete_quietly(sk, obj)
        if not contents and not meta(current).get("finalizers"):
            self.remove(store_key, current)
