"""A watch, streamed as the API server streams it.

Events come from the store's change log (so ``?resourceVersion=`` resumes exactly and
nothing falls between a list and its watch), translated per watcher: selectors turn edges
into ADDED/DELETED, Table watches send column definitions once. With
``allowWatchBookmarks`` a BOOKMARK carries the current resourceVersion every
``bookmark_interval`` and once 2 s before ``timeoutSeconds`` (the cacher's
``nextBookmarkTime``), never at the very end; a streaming list (``sendInitialEvents``)
ends its initial events with the ``k8s.io/initial-events-end`` bookmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Mapping
from typing import Any

import aiohttp.web

from . import listing
from .apierrors import ApiError
from .resources import ResourceType
from .routing import Route
from .selectors import selector_matcher
from .semantics import Semantics
from .store import Change
from .tables import table, wants_table

_JSON = "application/json"


async def serve_watch(
    semantics: Semantics,
    raw: aiohttp.web.BaseRequest,
    rtype: ResourceType,
    route: Route,
    params: Mapping[str, str],
    *,
    bookmark_interval: float,
) -> aiohttp.web.StreamResponse:
    fields = params.get("fieldSelector") or ""
    semantics.check_field_selector(rtype, fields)
    if route.name:
        fields = ",".join(f for f in (fields, f"metadata.name={route.name}") if f)
    matches = selector_matcher(params.get("labelSelector"), fields)
    listing.validate_options(params, watch=True)
    since = listing.parse_version(params.get("resourceVersion") or "") or None
    timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else math.inf
    as_table = wants_table(raw.headers.get("Accept", ""))
    response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": _JSON})
    response.enable_chunked_encoding()
    try:
        backlog, sub = semantics.store.subscribe(rtype.store_key, route.namespace, since)
    except ApiError as exc:
        await response.prepare(raw)
        error = {"type": "ERROR", "object": exc.status()}
        await response.write(json.dumps(error).encode() + b"\n")
        await response.write_eof()
        return response
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    first = [True]

    def encode(changes: list[Change]) -> bytes:
        lines = []
        for change in changes:
            event = _event(change, matches, rtype)
            if event is None:
                continue
            if as_table:
                obj = event["object"]
                tab = table(
                    rtype,
                    [obj],
                    obj["metadata"]["resourceVersion"],
                    semantics.clock(),
                    params.get("includeObject", "Metadata"),
                )
                if not first[0]:
                    tab["columnDefinitions"] = []
                first[0] = False
                event = {"type": event["type"], "object": tab}
            lines.append(json.dumps(event, separators=(",", ":")).encode() + b"\n")
        return b"".join(lines)

    bookmarks = params.get("allowWatchBookmarks") == "true"

    def bookmark(**annotations: str) -> bytes:
        metadata: dict[str, Any] = {"resourceVersion": str(semantics.store.rv)}
        if annotations:
            metadata["annotations"] = annotations
        obj = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": metadata}
        return json.dumps({"type": "BOOKMARK", "object": obj}).encode() + b"\n"

    closing = False
    try:
        await response.prepare(raw)
        chunk = encode(backlog)
        if bookmarks and params.get("sendInitialEvents") == "true":
            # The streaming-list protocol: the initial state ends with this bookmark.
            chunk += bookmark(**{"k8s.io/initial-events-end": "true"})
        if chunk:
            await response.write(chunk)
        next_bookmark = (
            _next_bookmark(bookmark_interval, loop.time(), deadline) if bookmarks else math.inf
        )
        while not closing:
            now = loop.time()
            if now >= deadline:
                break
            if now >= next_bookmark:
                await response.write(bookmark())
                next_bookmark = _next_bookmark(bookmark_interval, now, deadline)
            wait = min(deadline, next_bookmark) - now
            try:
                change = await asyncio.wait_for(sub.queue.get(), max(0.0, min(wait, 1.0)))
            except TimeoutError:
                if raw.transport is None or raw.transport.is_closing():
                    break
                continue
            if change is None:
                break
            batch = [change]
            while not sub.queue.empty():
                item = sub.queue.get_nowait()
                if item is None:
                    closing = True
                    break
                batch.append(item)
            if chunk := encode(batch):
                await response.write(chunk)
    except ConnectionError:
        pass
    finally:
        semantics.store.unsubscribe(sub)
    with contextlib.suppress(ConnectionError):
        await response.write_eof()
    return response


def _next_bookmark(bookmark_interval: float, now: float, deadline: float) -> float:
    """When the next BOOKMARK is due: after the interval, capped 2 s before the deadline;
    never (inf) when that moment has passed."""
    due = min(now + bookmark_interval, deadline - 2.0)
    return due if due >= now else math.inf


def _event(change: Change, matches: Any, rtype: ResourceType) -> dict[str, Any] | None:
    """Translate a change for one watcher: selectors turn edges into ADDED/DELETED."""
    new_ok = matches(change.obj)
    if change.type == "MODIFIED":
        old_ok = change.old is not None and matches(change.old)
        kind = {(True, True): "MODIFIED", (False, True): "ADDED", (True, False): "DELETED"}.get(
            (old_ok, new_ok)
        )
    else:
        kind = change.type if new_ok else None
    if kind is None:
        return None
    obj = change.obj
    if obj.get("apiVersion") != rtype.api_version:
        obj = {**obj, "apiVersion": rtype.api_version}
    return {"type": kind, "object": obj}
