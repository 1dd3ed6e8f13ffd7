"""Read-your-own-writes over a watch-fed cache.

The operator reads the cluster from caches its watches fill, so its own writes come back
some milliseconds later. In between, the cache still shows the object as it was, and a
reconcile on that view could act twice: post a verdict again, start a second benchmark
Job for a revision whose verdict is already in the status, or re-create what it has just
deleted. The planner is idempotent (a create answering 409 is "already so"), but a status
that is behind is not.

So every write the operator makes is recorded here with the object the API answered, and
a read of the cache goes through ``OwnWrites.view``: while the cache shows a version older
than the operator's write (or nothing, after a create; or the deleted object, after a
delete), the reconcile sees what it wrote; once the cache has caught up (or moved past,
because someone else wrote after), the record is dropped and the cache is the truth again.
"Older" compares resourceVersions as integers when both are (etcd and the embedded API
server); with opaque versions, only the exact versions the cache showed before the write
count as stale. Records expire after ``ttl`` seconds and their number is bounded: a lost
watch event costs at most ``ttl`` of a view that is ahead of the cache, never memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]
Key = tuple[str, str, str]  # (kind, namespace, name)

DEFAULT_TTL = 60.0
# About 4 records per resource in a burst (status, Deployment, two Services), each
# dropped as soon as the watch catches up: room for a burst of 10,000 resources.
DEFAULT_LIMIT = 40_000


def resource_version(obj: Obj | None) -> str | None:
    """The object's resourceVersion ("" when it has none), or None for no object."""
    if obj is None:
        return None
    meta = obj.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) else ""


def _as_int(rv: str | None) -> int | None:
    return int(rv) if rv is not None and rv.isdigit() and len(rv) < 30 else None


@dataclass(frozen=True)
class _Write:
    obj: Obj | None  # what the API answered; None: deleted
    owner: str  # the VLLMDeployment the object belongs to
    before: frozenset[str | None]  # versions the cache showed before (None: absent)
    absent_is_stale: bool  # the cache never showed it: a create (or a write on one)
    expires: float


class OwnWrites:
    """The operator's recent writes, consulted on every read of the cache."""

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_TTL,
        limit: int = DEFAULT_LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._limit = limit
        self._clock = clock
        self._writes: dict[Key, _Write] = {}
        # (kind, namespace, owner) -> names with a record: a reconcile asks per owner, and
        # scanning every record per ask would make a burst of N resources cost N^2.
        self._by_owner: dict[tuple[str, str, str], set[str]] = {}

    def __len__(self) -> int:
        return len(self._writes)

    def record(self, key: Key, owner: str, cached: Obj | None, written: Obj | None) -> None:
        """Remember that the operator wrote ``written`` (None: deleted) over ``cached``,
        what the cache held for ``key`` at the time of the write."""
        cached_rv = resource_version(cached)
        if written is not None and cached is not None and resource_version(written) == cached_rv:
            self._drop(key)  # a no-op write: the cache already shows it
            return
        previous = self._live(key)
        before = {cached_rv}
        absent_is_stale = cached is None
        if previous is not None:
            before |= previous.before | {resource_version(previous.obj)}
            absent_is_stale = absent_is_stale and previous.absent_is_stale
        if written is None:
            absent_is_stale = False  # after a delete, an absent object is the truth
        self._drop(key)  # re-insert: the dict's order is the age order
        self._by_owner.setdefault((key[0], key[1], owner), set()).add(key[2])
        self._writes[key] = _Write(
            obj=written,
            owner=owner,
            before=frozenset(before),
            absent_is_stale=absent_is_stale,
            expires=self._clock() + self._ttl,
        )
        self._sweep()

    def _sweep(self) -> None:
        """Drop expired records and the oldest beyond ``limit``. Every record has the same
        ttl and is re-inserted when written, so the dict's order is the expiry order."""
        now = self._clock()
        while self._writes:
            oldest = next(iter(self._writes))
            if self._writes[oldest].expires > now and len(self._writes) <= self._limit:
                break
            self._drop(oldest)

    def view(self, key: Key, cached: Obj | None) -> Obj | None:
        """What a reconcile should see for ``key`` given what the cache holds now."""
        write = self._live(key)
        if write is None:
            return cached
        if self._stale(write, cached):
            return write.obj
        self._drop(key)  # the cache has caught up or moved past: it is the truth
        return cached

    def keys_of(self, kind: str, namespace: str, owner: str) -> Iterator[Key]:
        """Keys of the live records of one VLLMDeployment's objects of ``kind``."""
        for name in list(self._by_owner.get((kind, namespace, owner), ())):
            yield (kind, namespace, name)

    def _live(self, key: Key) -> _Write | None:
        write = self._writes.get(key)
        if write is not None and write.expires <= self._clock():
            self._drop(key)
            return None
        return write

    def _drop(self, key: Key) -> None:
        write = self._writes.pop(key, None)
        if write is None:
            return
        group = (key[0], key[1], write.owner)
        names = self._by_owner.get(group)
        if names is not None:
            names.discard(key[2])
            if not names:
                del self._by_owner[group]

    @staticmethod
    def _stale(write: _Write, cached: Obj | None) -> bool:
        """Whether ``cached`` predates ``write`` (so the write is what is true now)."""
        if cached is None:
            return write.absent_is_stale
        cached_rv = resource_version(cached)
        if cached_rv in write.before:
            return True
        now = _as_int(cached_rv)
        if write.obj is None:  # a delete: stale while the cache shows a version from before
            known = [v for v in (_as_int(rv) for rv in write.before) if v is not None]
            return now is not None and bool(known) and now <= max(known)
        written = _as_int(resource_version(write.obj))
        return now is not None and written is not None and now < written
