"""The kubelet's view of the API server: a small REST client and list+watch informers.

The local kubelet plays controllers that, in a real cluster, talk to the API server over
HTTP and nothing else; so does this one. It does not share objects with the DevCluster in
memory: everything it learns comes from list/watch, and everything it changes goes through
create, merge-patch (status subresource when served) and delete. That keeps the operator's
tests honest: what the kubelet writes is exactly what kopf and kubectl read.

An informer lists, then watches from the list's resourceVersion, and re-lists whenever the
stream ends or fails; against a server without watch it degrades to polling.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

log = logging.getLogger(__name__)

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """A resource type the kubelet uses: its REST prefix and plural."""

    prefix: str  # "/api/v1" or "/apis/apps/v1"
    plural: str

    def path(self, namespace: str | None, name: str | None = None, sub: str = "") -> str:
        base = (
            f"{self.prefix}/namespaces/{namespace}/{self.plural}"
            if namespace
            else f"{self.prefix}/{self.plural}"
        )
        if name:
            base = f"{base}/{name}"
        if sub:
            base = f"{base}/{sub}"
        return base


PODS = Kind("/api/v1", "pods")
SERVICES = Kind("/api/v1", "services")
SECRETS = Kind("/api/v1", "secrets")
CONFIGMAPS = Kind("/api/v1", "configmaps")
DEPLOYMENTS = Kind("/apis/apps/v1", "deployments")
JOBS = Kind("/apis/batch/v1", "jobs")
LEADERWORKERSETS = Kind("/apis/leaderworkerset.x-k8s.io/v1", "leaderworkersets")
NODES = Kind("/api/v1", "nodes")
EVENTS = Kind("/api/v1", "events")


class APIError(Exception):
    """An HTTP error answer from the API server."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:300]}")
        self.status = status


def resource_version(obj: Obj) -> int | None:
    """The resourceVersion as a number when the server uses numbers (DevCluster does)."""
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else None


def key_of(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class KubeAPI:
    """Async REST calls against one API server URL (no auth: the DevCluster needs none)."""

    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 10.0,
        ca_pem: bytes | None = None,
    ) -> None:
        verify = ssl.create_default_context(cadata=ca_pem.decode()) if ca_pem else True
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), transport=transport, timeout=timeout, verify=verify
        )
        self._no_status_sub: set[Kind] = set()
        self._has_status_sub: set[Kind] = set()

    async def close(self) -> None:
        await self._client.aclose()

    async def _send(self, method: str, path: str, **kw: Any) -> Obj:
        resp = await self._client.request(method, path, **kw)
        if resp.status_code >= 400:
            raise APIError(resp.status_code, resp.text)
        if not resp.content:
            return {}
        data: Obj = resp.json()
        return data

    async def list(self, kind: Kind, namespace: str | None) -> tuple[list[Obj], str]:
        data = await self._send("GET", kind.path(namespace))
        rv = str((data.get("metadata") or {}).get("resourceVersion") or "")
        return list(data.get("items") or []), rv

    async def create(self, kind: Kind, namespace: str, obj: Obj) -> Obj:
        return await self._send("POST", kind.path(namespace), json=obj)

    async def patch(self, kind: Kind, namespace: str, name: str, patch: Obj) -> Obj:
        return await self._send(
            "PATCH",
            kind.path(namespace, name),
            content=json.dumps(patch),
            headers={"Content-Type": "application/merge-patch+json"},
        )

    async def patch_status(self, kind: Kind, namespace: str, name: str, status: Obj) -> Obj:
        """Merge-patch ``status``, via the status subresource where the server serves it."""
        body = json.dumps({"status": status})
        headers = {"Content-Type": "application/merge-patch+json"}
        if kind not in self._no_status_sub:
            try:
                answer = await self._send(
                    "PATCH", kind.path(namespace, name, "status"), content=body, headers=headers
                )
            except APIError as exc:
                if exc.status not in (404, 405) or kind in self._has_status_sub:
                    raise
                # Either the object is gone (the next call raises 404 too) or the server
                # serves no status subresource: then patch the object itself from now on.
                answer = await self._send(
                    "PATCH", kind.path(namespace, name), content=body, headers=headers
                )
                self._no_status_sub.add(kind)
                return answer
            else:
                self._has_status_sub.add(kind)
                return answer
        return await self._send("PATCH", kind.path(namespace, name), content=body, headers=headers)

    async def delete(self, kind: Kind, namespace: str, name: str) -> None:
        try:
            await self._send(
                "DELETE",
                kind.path(namespace, name),
                json={"propagationPolicy": "Background", "gracePeriodSeconds": 0},
            )
        except APIError as exc:
            if exc.status != 404:
                raise

    async def watch_lines(self, kind: Kind, namespace: str | None, rv: str) -> Any:
        """Yield decoded watch events ``{"type": ..., "object": ...}`` until the stream ends."""
        params = {"watch": "true", "allowWatchBookmarks": "true"}
        if rv:
            params["resourceVersion"] = rv
        async with self._client.stream(
            "GET", kind.path(namespace), params=params, timeout=httpx.Timeout(None, connect=5.0)
        ) as resp:
            if resp.status_code >= 400:
                raise APIError(resp.status_code, (await resp.aread()).decode(errors="replace"))
            async for line in resp.aiter_lines():
                if line.strip():
                    yield json.loads(line)


class Informer:
    """A cache of one kind's objects kept current by list+watch; calls ``on_change``."""

    def __init__(
        self,
        api: KubeAPI,
        kind: Kind,
        namespace: str | None,
        on_change: Callable[[], None],
        *,
        poll_interval: float = 0.5,
    ) -> None:
        self.api = api
        self.kind = kind
        self.namespace = namespace
        self.objects: dict[tuple[str, str], Obj] = {}
        # Objects we deleted, by the resourceVersion we last knew: a watch event that was
        # already in flight must not bring them back into the cache.
        self._tombstones: dict[tuple[str, str], int] = {}
        self.synced = asyncio.Event()
        self._on_change = on_change
        self._poll = poll_interval

    def items(self) -> list[Obj]:
        return list(self.objects.values())

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.objects.get((namespace, name))

    def store(self, obj: Obj) -> None:
        """Record our own write's answer at once (the watch confirms it later)."""
        if obj.get("metadata") and not self._stale(key_of(obj), obj):
            self.objects[key_of(obj)] = obj

    def forget(self, namespace: str, name: str) -> None:
        gone = self.objects.pop((namespace, name), None)
        rv = resource_version(gone) if gone else None
        if rv is not None:
            self._tombstones[(namespace, name)] = rv

    def _stale(self, key: tuple[str, str], obj: Obj) -> bool:
        """True for an older version than the one cached (or deleted) for ``key``."""
        rv = resource_version(obj)
        if rv is None:
            return False
        current = self.objects.get(key)
        known = resource_version(current) if current else self._tombstones.get(key)
        return known is not None and rv <= known and (current is None or rv < known)

    async def run(self) -> None:
        while True:
            try:
                items, rv = await self.api.list(self.kind, self.namespace)
            except (httpx.HTTPError, APIError) as exc:
                log.debug("list %s failed: %s", self.kind.plural, exc)
                await asyncio.sleep(self._poll)
                continue
            self.objects = {key_of(o): o for o in items}
            self._tombstones.clear()
            self.synced.set()
            self._on_change()
            try:
                async for event in self.api.watch_lines(self.kind, self.namespace, rv):
                    self._apply(event)
            except (httpx.HTTPError, APIError, ValueError) as exc:
                log.debug("watch %s ended: %s", self.kind.plural, exc)
                await asyncio.sleep(self._poll)

    def _apply(self, event: Obj) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            raise APIError(int(obj.get("code") or 410), str(obj.get("message") or "watch error"))
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return
        key = key_of(obj)
        if kind == "DELETED":
            self.objects.pop(key, None)
            self._tombstones.pop(key, None)
        elif self._stale(key, obj):
            return
        else:
            self.objects[key] = obj
        self._on_change()


class HasURL(Protocol):
    """What the kubelet is given to reach the API server: anything with a ``url``."""

    @property
    def url(self) -> str: ...
