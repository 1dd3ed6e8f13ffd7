"""The object store: one global resourceVersion counter and an ordered change log.

Why a log and not kmock's per-object history: watches must resume exactly after a given
``resourceVersion`` (kopf re-watches from its last list), and the snapshot a watch starts
from must be taken atomically with its subscription so no event falls between list and
watch. Everything here is synchronous and runs on the devcluster's own event loop, so a
snapshot+subscribe is atomic by construction. Stored objects are never mutated in place:
every write stores a fresh dict, so events may share them safely.
"""

from __future__ import annotations

import asyncio
import collections
import copy
from dataclasses import dataclass, field
from typing import Any

from .apierrors import expired

StoreKey = tuple[str, str]  # (group, plural): every served version shares the objects
ObjectKey = tuple[str, str]  # (namespace or "", name)


@dataclass(frozen=True)
class Change:
    """One committed write, as watchers see it (``old`` lets selectors emit ADDED/DELETED)."""

    rv: int
    store_key: StoreKey
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]
    old: dict[str, Any] | None


@dataclass(eq=False)
class Subscription:
    store_key: StoreKey
    namespace: str | None
    queue: asyncio.Queue[Change | None] = field(default_factory=asyncio.Queue)


def namespace_of(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def name_of(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class Store:
    """In-memory objects by (group, plural) -> (namespace, name), plus the change log."""

    def __init__(self, max_log: int = 100_000) -> None:
        self._objects: dict[StoreKey, dict[ObjectKey, dict[str, Any]]] = {}
        self._uids: dict[str, tuple[StoreKey, ObjectKey]] = {}
        self._log: collections.deque[Change] = collections.deque()
        self._max_log = max_log
        self._compacted_rv = 0  # changes at or below this rv are gone from the log
        self._subscriptions: set[Subscription] = set()
        self.rv = 0
        self.dry_run = False  # set around a ?dryRun=All request: compute, store nothing

    # --- reads -------------------------------------------------------------------------
    def get(self, store_key: StoreKey, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get(store_key, {}).get((namespace, name))

    def select(self, store_key: StoreKey, namespace: str | None = None) -> list[dict[str, Any]]:
        objects = self._objects.get(store_key, {})
        found = [obj for (ns, _), obj in objects.items() if namespace is None or ns == namespace]
        return sorted(found, key=lambda o: (namespace_of(o), name_of(o)))

    def snapshot(self, store_key: StoreKey, namespace: str | None, rv: int) -> list[dict[str, Any]]:
        """The objects as they were at ``rv`` (an Exact list, a continued list): the
        current ones with every later change undone; 410 once the log no longer reaches
        back that far."""
        if rv >= self.rv:
            return self.select(store_key, namespace)
        if rv < self._compacted_rv:
            raise expired(rv, self._compacted_rv + 1)
        state = dict(self._objects.get(store_key, {}))
        for change in reversed(self._log):
            if change.rv <= rv:
                break
            if change.store_key != store_key:
                continue
            key = (namespace_of(change.obj), name_of(change.obj))
            if change.old is None:
                state.pop(key, None)
            else:
                state[key] = change.old
        found = [obj for (ns, _), obj in state.items() if namespace is None or ns == namespace]
        return sorted(found, key=lambda o: (namespace_of(o), name_of(o)))

    def by_uid(self, uid: str) -> tuple[StoreKey, dict[str, Any]] | None:
        located = self._uids.get(uid)
        if located is None:
            return None
        store_key, key = located
        obj = self._objects.get(store_key, {}).get(key)
        return None if obj is None else (store_key, obj)

    def store_keys(self) -> list[StoreKey]:
        return list(self._objects)

    def all_objects(self) -> list[tuple[StoreKey, dict[str, Any]]]:
        return [(sk, obj) for sk, objs in self._objects.items() for obj in objs.values()]

    def history(self, store_key: StoreKey, namespace: str, name: str) -> list[Change]:
        """Every logged change of one object, oldest first (for assertions in tests)."""
        return [
            ch
            for ch in self._log
            if ch.store_key == store_key
            and namespace_of(ch.obj) == namespace
            and name_of(ch.obj) == name
        ]

    # --- writes ------------------------------------------------------------------------
    def commit(self, store_key: StoreKey, type_: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store (ADDED/MODIFIED) or remove (DELETED) ``obj`` under a new resourceVersion."""
        if self.dry_run:
            return copy.deepcopy(obj)
        self.rv += 1
        new = copy.deepcopy(obj)
        new.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        key = (namespace_of(new), name_of(new))
        bucket = self._objects.setdefault(store_key, {})
        old = bucket.get(key)
        uid = new["metadata"].get("uid")
        if type_ == "DELETED":
            bucket.pop(key, None)
            if uid:
                self._uids.pop(uid, None)
        else:
            bucket[key] = new
            if uid:
                self._uids[uid] = (store_key, key)
        change = Change(self.rv, store_key, type_, new, old)
        self._log.append(change)
        while len(self._log) > self._max_log:
            self._compacted_rv = self._log.popleft().rv
        for sub in self._subscriptions:
            if sub.store_key == store_key and (sub.namespace in (None, key[0])):
                sub.queue.put_nowait(change)
        return new

    # --- watching ----------------------------------------------------------------------
    def subscribe(
        self, store_key: StoreKey, namespace: str | None, since: int | None
    ) -> tuple[list[Change], Subscription]:
        """Atomically: the backlog a new watch must send first, and its live subscription.

        ``since=None`` (or 0) means "current state first": every existing object as a
        synthetic ADDED. Otherwise only changes after ``since``; 410 Expired when the log
        no longer reaches back that far.
        """
        if since:
            if since < self._compacted_rv:
                raise expired(since, self._compacted_rv + 1)
            backlog = [
                ch
                for ch in self._log
                if ch.rv > since
                and ch.store_key == store_key
                and (namespace is None or namespace_of(ch.obj) == namespace)
            ]
        else:
            backlog = [
                Change(int(obj["metadata"]["resourceVersion"]), store_key, "ADDED", obj, None)
                for obj in self.select(store_key, namespace)
            ]
        sub = Subscription(store_key, namespace)
        self._subscriptions.add(sub)
        return backlog, sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscriptions.discard(sub)

    def close_all(self) -> None:
        """End every live watch (server shutdown)."""
        for sub in self._subscriptions:
            sub.queue.put_nowait(None)
        self._subscriptions.clear()
