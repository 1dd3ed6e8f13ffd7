"""The HTTP face of the development cluster: kmock's KubernetesEmulator with the semantics.

kmock provides the server-side machinery: the request model, request recording for
assertions and the reaction DSL, so a test can still inject faults with
``server[kmock.resource('apps', 'v1', 'deployments'), 'patch'] << 500``; such user
reactions are tried first. Every request no user reaction answers is served by
``Semantics`` instead of kmock's "database over HTTP" store (see ``semantics.py`` for
why). Watches stream from the store's change log, so ``?resourceVersion=`` resumes exactly.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import math
from collections.abc import Mapping
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal.rendering import StreamingError  # not exported; kmock pinned (README)

from . import apierrors, discovery, disruption, openapi
from .apierrors import ApiError
from .resources import ResourceType
from .routing import Route, action, parse_route
from .selectors import selector_matcher
from .semantics import APPLY, Semantics
from .store import Change
from .tables import table, wants_table

logger = logging.getLogger(__name__)
_JSON = "application/json"


def _json(body: Any, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type=_JSON
    )


def _count_key(request: kmock.Request) -> str:
    """ "kopf list deployments", "OpenAPI-Generator update vllmdeployments/status": the client
    (User-Agent up to its first "/"), the action and the resource."""
    agent = str(request.headers.get("User-Agent") or "-").split("/")[0][:40] or "-"
    action = request.action.name.lower() if request.action else str(request.method).lower()
    what = request.resource.plural if request.resource else "-"
    what = f"{what}/{request.subresource}" if request.subresource else what
    return f"{agent} {action} {what}"


@attrs.define(kw_only=True)
class ApiServer(kmock.KubernetesEmulator):
    """A KubernetesEmulator whose unanswered requests get real API-server semantics."""

    semantics: Semantics = attrs.field(factory=Semantics)
    server_address: str = "127.0.0.1"
    max_recorded_requests: int = 10_000
    # "kopf list deployments" (client, action, resource; see _count_key) -> requests served
    # since the start, never trimmed (benchmarks count more than the recorded 10 000).
    request_counts: collections.Counter[str] = attrs.field(factory=collections.Counter, init=False)
    _builtin_payloads: set[int] = attrs.field(factory=set, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        # kmock's own fallbacks (its naive store) are never used: remember them to skip them.
        self._builtin_payloads = {id(p) for p in self._payloads}

    # --- entry point -------------------------------------------------------------------
    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        try:
            request = await self._parse(raw)
            self._requests.append(request)
            self.request_counts[_count_key(request)] += 1
            if len(self._requests) > self.max_recorded_requests:
                del self._requests[: len(self._requests) - self.max_recorded_requests]
            return await self._handle(request)
        except StreamingError as exc:
            response: aiohttp.web.StreamResponse = exc.args[0]
            return response
        except ApiError as exc:
            return _json(exc.status(), exc.code)
        except Exception as exc:
            logger.exception("devcluster: internal error serving %s %s", raw.method, raw.path)
            err = ApiError(500, "InternalError", f"{type(exc).__name__}: {exc}")
            return _json(err.status(), 500)

    async def _parse(self, raw: aiohttp.web.BaseRequest) -> kmock.Request:
        body = await raw.read()
        text = body.decode("utf-8", "replace")
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = None
        route = parse_route(raw.path, self.semantics.registry)
        query = dict(raw.query)
        if route is not None and route.legacy_watch:
            query["watch"] = "true"
        verb = action(route, raw.method, query)
        return kmock.Request(
            id=len(self._requests),
            raw_request=raw,
            url=raw.url,
            method=raw.method,
            params=query,
            headers=dict(raw.headers),
            cookies=dict(raw.cookies),
            data=data,
            body=body,
            text=text,
            action=None if verb is None else kmock.action(verb),
            resource=None
            if route is None
            else kmock.resource(route.group, route.version, route.plural),
            namespace=None if route is None else route.namespace,
            name=None if route is None else route.name,
            subresource=None if route is None else route.subresource or None,
        )

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        user = [p for p in self._payloads if id(p) not in self._builtin_payloads]
        if user:
            ordered = sorted(user, key=lambda p: tuple(-x for x in p.priorities))
            for payload in ordered:
                if request in payload._source and not payload._disabled.is_set():
                    try:
                        response: aiohttp.web.StreamResponse = await payload(request)
                        return response
                    except kmock.ReactionMismatchError:  # type: ignore[attr-defined]  # not in __all__
                        payload._disabled.set()
                    except NotImplementedError:
                        pass
        return await self._serve(request)

    # --- non-resource paths --------------------------------------------------------------
    async def _serve(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        raw = request._raw_request
        assert raw is not None
        registry = self.semantics.registry
        path = "/" + raw.path.strip("/")
        parts = [p for p in path.split("/") if p]
        if raw.method == "GET":
            if path == "/":
                return _json(discovery.root_paths(registry))
            if path == "/version":
                return _json(discovery.SERVER_VERSION)
            if path in ("/healthz", "/livez", "/readyz"):
                return aiohttp.web.Response(text="ok")
            if path == "/api":
                return _json(discovery.api_versions(self.server_address))
            if path == "/apis":
                return _json(discovery.api_group_list(registry))
            if path == "/openapi/v3":
                return _json(openapi.index(registry))
            if path.startswith("/openapi/v3/"):
                document = openapi.group_version(registry, path.removeprefix("/openapi/v3/"))
                if document is None:
                    raise apierrors.resource_not_found()
                return _json(document)
            if len(parts) == 2 and parts[0] == "apis":
                group = discovery.api_group(registry, parts[1])
                if group is None:
                    raise apierrors.resource_not_found()
                return _json(group)
            if (len(parts) == 2 and parts[0] == "api") or (len(parts) == 3 and parts[0] == "apis"):
                group_name, version = ("", parts[1]) if parts[0] == "api" else parts[1:3]
                listing = discovery.api_resource_list(registry, group_name, version)
                if listing is None:
                    raise apierrors.resource_not_found()
                return _json(listing)
        route = parse_route(raw.path, registry)
        if route is None:
            raise apierrors.resource_not_found()
        rtype = registry.get(route.group, route.version, route.plural)
        if rtype is None or (route.namespace is not None and not rtype.namespaced):
            raise apierrors.resource_not_found()
        writing = raw.method in ("POST", "PUT", "PATCH")  # handled without awaiting
        validation = request.params.get("fieldValidation") if writing else None
        with self.semantics.strict_fields(validation):
            if request.params.get("dryRun"):
                with self.semantics.dry_run():
                    return await self._serve_resource(request, raw, route, rtype)
            return await self._serve_resource(request, raw, route, rtype)

    # --- resource paths ----------------------------------------------------------------
    async def _serve_resource(
        self,
        request: kmock.Request,
        raw: aiohttp.web.BaseRequest,
        route: Route,
        rtype: ResourceType,
    ) -> aiohttp.web.StreamResponse:
        sem = self.semantics
        params = request.params
        ns = route.namespace or ""
        name, sub, method = route.name, route.subresource, raw.method
        if rtype.namespaced and name is not None and not ns and method != "POST":
            raise apierrors.resource_not_found()
        if method == "GET" and params.get("watch") in ("true", "1"):
            return await self._watch(raw, rtype, route, params)
        if method == "GET" and name is None:
            items, rv = sem.list(
                rtype, route.namespace, params.get("labelSelector"), params.get("fieldSelector")
            )
            if wants_table(raw.headers.get("Accept", "")):
                return _json(
                    table(
                        rtype, items, str(rv), sem.clock(), params.get("includeObject", "Metadata")
                    )
                )
            return _json(self._list_body(rtype, items, rv, params))
        if method == "POST" and name is None:
            return _json(sem.create(rtype, ns, self._body(request)), 201)
        if method == "DELETE" and name is None:
            sem.check_field_selector(rtype, params.get("fieldSelector"))
            matches = selector_matcher(params.get("labelSelector"), params.get("fieldSelector"))
            deleted = sem.delete_collection(rtype, route.namespace, matches, self._options(request))
            return _json(self._list_body(rtype, deleted, sem.store.rv, {}))
        if name is None:
            raise apierrors.method_not_allowed()
        if method == "POST" and sub == "eviction" and rtype.store_key == ("", "pods"):
            return _json(disruption.evict(sem, ns, name), 201)
        if method == "GET":
            if sub == "log" and rtype.store_key == ("", "pods"):
                tail = params.get("tailLines", "")
                text = sem.pod_log(
                    ns, name, params.get("container", ""), int(tail) if tail.isdigit() else None
                )
                return aiohttp.web.Response(text=text)
            if sub == "scale" and "scale" in rtype.extra_subresources:
                return _json(sem.scale(rtype, ns, name))
            if sub not in ("", "status") or (sub == "status" and not rtype.status_subresource):
                raise apierrors.resource_not_found()
            obj = sem.get(rtype, ns, name)
            if wants_table(raw.headers.get("Accept", "")):
                rv = obj["metadata"]["resourceVersion"]
                return _json(
                    table(rtype, [obj], rv, sem.clock(), params.get("includeObject", "Metadata"))
                )
            return _json(obj)
        if sub == "scale" and "scale" in rtype.extra_subresources and method in ("PUT", "PATCH"):
            scale = self._body(request)
            spec = (scale.get("spec") or {}) if isinstance(scale, dict) else {}
            return _json(sem.set_scale(rtype, ns, name, spec.get("replicas")))
        if method == "PUT":
            return _json(sem.replace(rtype, ns, name, self._body(request), sub))
        if method == "PATCH":
            content_type = raw.headers.get("Content-Type", "")
            if content_type.split(";", maxsplit=1)[0].strip() == APPLY:
                if not params.get("fieldManager"):
                    raise apierrors.bad_request("PATCH with apply-patch requires fieldManager")
                body: Any = yaml.safe_load(request.text) if request.text else None
            else:
                body = self._body(request)
            return _json(
                sem.patch(rtype, ns, name, body, content_type=content_type, subresource=sub)
            )
        if method == "DELETE":
            return _json(sem.delete(rtype, ns, name, self._options(request)))
        raise apierrors.method_not_allowed()

    @staticmethod
    def _body(request: kmock.Request) -> Any:
        content_type = request.headers.get("Content-Type", "")
        if "protobuf" in content_type:
            # kubectl sends built-in kinds as protobuf; a 415 makes client-go retry as JSON.
            raise apierrors.unsupported_media_type(content_type)
        if request.body and request.data is None:
            raise apierrors.bad_request("the request body is not valid JSON")
        return request.data

    @staticmethod
    def _options(request: kmock.Request) -> dict[str, Any]:
        options = dict(request.data) if isinstance(request.data, dict) else {}
        if "propagationPolicy" in request.params:
            options["propagationPolicy"] = request.params["propagationPolicy"]
        return options

    @staticmethod
    def _list_body(
        rtype: ResourceType, items: list[dict[str, Any]], rv: int, params: Mapping[str, str]
    ) -> dict[str, Any]:
        """A typed list; ``limit``/``continue`` paginate by position (good enough for kubectl)."""
        cont, lim = str(params.get("continue") or "0"), str(params.get("limit") or "0")
        start = int(cont) if cont.isdigit() else 0
        limit = int(lim) if lim.isdigit() else 0
        page = items[start : start + limit] if limit else items[start:]
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit and start + limit < len(items):
            metadata["continue"] = str(start + limit)
            metadata["remainingItemCount"] = len(items) - start - limit
        return {
            "kind": rtype.list_kind,
            "apiVersion": rtype.api_version,
            "metadata": metadata,
            "items": page,
        }

    # --- watch -------------------------------------------------------------------------
    async def _watch(
        self,
        raw: aiohttp.web.BaseRequest,
        rtype: ResourceType,
        route: Route,
        params: Mapping[str, str],
    ) -> aiohttp.web.StreamResponse:
        fields = params.get("fieldSelector") or ""
        self.semantics.check_field_selector(rtype, fields)
        if route.name:
            fields = ",".join(f for f in (fields, f"metadata.name={route.name}") if f)
        matches = selector_matcher(params.get("labelSelector"), fields)
        since_text = params.get("resourceVersion") or ""
        if since_text and not since_text.isdigit():
            raise apierrors.bad_request(f"invalid resourceVersion: {since_text!r}")
        since = int(since_text) if since_text else None
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else math.inf
        as_table = wants_table(raw.headers.get("Accept", ""))
        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": _JSON})
        response.enable_chunked_encoding()
        try:
            backlog, sub = self.semantics.store.subscribe(rtype.store_key, route.namespace, since)
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
                event = self._event(change, matches, rtype)
                if event is None:
                    continue
                if as_table:
                    obj = event["object"]
                    tab = table(
                        rtype,
                        [obj],
                        obj["metadata"]["resourceVersion"],
                        self.semantics.clock(),
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
            metadata: dict[str, Any] = {"resourceVersion": str(self.semantics.store.rv)}
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
            while not closing:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    if bookmarks:
                        await response.write(bookmark())
                    break
                try:
                    change = await asyncio.wait_for(sub.queue.get(), min(remaining, 1.0))
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
            self.semantics.store.unsubscribe(sub)
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response

    def _event(self, change: Change, matches: Any, rtype: ResourceType) -> dict[str, Any] | None:
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
