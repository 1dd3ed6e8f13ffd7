"""The HTTP face of the development cluster: kmock's KubernetesEmulator with the semantics.

kmock provides the server-side machinery: the request model, request recording for
assertions and the reaction DSL, so a test can still inject faults with
``server[kmock.resource('apps', 'v1', 'deployments'), 'patch'] << 500``; such user
reactions are tried first. Every request no user reaction answers is served by
``Semantics`` instead of kmock's "database over HTTP" store (see ``semantics.py`` for
why). Lists are paged and their options validated by ``listing.py``; watches stream from
the store's change log (``watching.py``), so ``?resourceVersion=`` resumes exactly.
"""

from __future__ import annotations

import collections
import json
import logging
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal.rendering import StreamingError  # not exported; kmock pinned (README)

from . import apierrors, discovery, disruption, listing, openapi
from . import fielderrors as fe
from .apierrors import ApiError
from .fielderrors import GoLiteral
from .resources import ResourceType
from .routing import Route, action, parse_route
from .selectors import selector_matcher
from .semantics import APPLY, Semantics
from .tables import table, wants_table
from .watching import serve_watch

logger = logging.getLogger(__name__)
_JSON = "application/json"


def _json(body: Any, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type=_JSON
    )


_OPTIONS_KIND = {
    "POST": "CreateOptions",
    "PUT": "UpdateOptions",
    "PATCH": "PatchOptions",
    "DELETE": "DeleteOptions",
}


def _check_dry_run(method: str, values: list[str]) -> None:
    """ValidateDryRun: "All" is the only dry run (422 for anything else, as a server)."""
    if all(value == "All" for value in values):
        return
    shown = GoLiteral("[]string{" + ", ".join(json.dumps(v) for v in values) + "}")
    error = fe.not_supported("dryRun", shown, ["All"])
    raise fe.invalid_error(_OPTIONS_KIND[method], "meta.k8s.io", "", [error])


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
    # A watch with allowWatchBookmarks gets a BOOKMARK this often, and one 2 s before its
    # timeoutSeconds, never after (the cacher's nextBookmarkTime; a minute on a server).
    bookmark_interval: float = 60.0
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
            found = self._discovery(path, parts)
            if found is not None:
                return found
        route = parse_route(raw.path, registry)
        if route is None:
            raise apierrors.resource_not_found()
        rtype = registry.get(route.group, route.version, route.plural)
        if rtype is None or (route.namespace is not None and not rtype.namespaced):
            raise apierrors.resource_not_found()
        writing = raw.method in ("POST", "PUT", "PATCH")  # handled without awaiting
        validation = request.params.get("fieldValidation") if writing else None
        if "dryRun" in request.params and raw.method in _OPTIONS_KIND:
            _check_dry_run(raw.method, raw.query.getall("dryRun"))
        with self.semantics.strict_fields(validation):
            if request.params.get("dryRun"):
                with self.semantics.dry_run():
                    return await self._serve_resource(request, raw, route, rtype)
            return await self._serve_resource(request, raw, route, rtype)

    def _discovery(self, path: str, parts: list[str]) -> aiohttp.web.StreamResponse | None:
        """A GET of a path outside the resources (discovery, OpenAPI, health); None if not."""
        registry = self.semantics.registry
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
        return None

    # --- resource paths ----------------------------------------------------------------
    async def _serve_resource(
        self,
        request: kmock.Request,
        raw: aiohttp.web.BaseRequest,
        route: Route,
        rtype: ResourceType,
    ) -> aiohttp.web.StreamResponse:
        ns = route.namespace or ""
        name, method = route.name, raw.method
        if rtype.namespaced and name is not None and not ns and method != "POST":
            raise apierrors.resource_not_found()
        if method == "GET" and request.params.get("watch") in ("true", "1"):
            return await serve_watch(
                self.semantics,
                raw,
                rtype,
                route,
                request.params,
                bookmark_interval=self.bookmark_interval,
            )
        if name is None:
            return self._serve_collection(request, raw, route, rtype)
        if method == "POST" and route.subresource == "eviction" and rtype.store_key == ("", "pods"):
            return _json(disruption.evict(self.semantics, ns, name), 201)
        if method == "GET":
            return self._serve_get(request, raw, route, rtype, name)
        return self._serve_write(request, raw, route, rtype, name)

    def _serve_collection(
        self,
        request: kmock.Request,
        raw: aiohttp.web.BaseRequest,
        route: Route,
        rtype: ResourceType,
    ) -> aiohttp.web.StreamResponse:
        """A request on a collection: list, create, or delete many."""
        sem, params, method = self.semantics, request.params, raw.method
        if method == "GET":
            sem.check_field_selector(rtype, params.get("fieldSelector"))
            matches = selector_matcher(params.get("labelSelector"), params.get("fieldSelector"))
            found, rv, token, remaining = listing.list_objects(
                sem.store, rtype.store_key, route.namespace, params, matches
            )
            items = [sem.present(rtype, obj) for obj in found]
            if wants_table(raw.headers.get("Accept", "")):
                tab = table(
                    rtype, items, str(rv), sem.clock(), params.get("includeObject", "Metadata")
                )
                if token:
                    tab["metadata"]["continue"] = token
                return _json(tab)
            return _json(self._list_body(rtype, items, rv, token, remaining))
        if method == "POST":
            return _json(sem.create(rtype, route.namespace or "", self._body(request)), 201)
        if method == "DELETE":
            sem.check_field_selector(rtype, params.get("fieldSelector"))
            matches = selector_matcher(params.get("labelSelector"), params.get("fieldSelector"))
            deleted = sem.delete_collection(rtype, route.namespace, matches, self._options(request))
            return _json(self._list_body(rtype, deleted, sem.store.rv))
        raise apierrors.method_not_allowed()

    def _serve_get(
        self,
        request: kmock.Request,
        raw: aiohttp.web.BaseRequest,
        route: Route,
        rtype: ResourceType,
        name: str,
    ) -> aiohttp.web.StreamResponse:
        """A GET of one object: itself, its status, its scale or (a pod) its log."""
        sem, params, sub, ns = self.semantics, request.params, route.subresource, route.namespace
        ns = ns or ""
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

    def _serve_write(
        self,
        request: kmock.Request,
        raw: aiohttp.web.BaseRequest,
        route: Route,
        rtype: ResourceType,
        name: str,
    ) -> aiohttp.web.StreamResponse:
        """A PUT, PATCH or DELETE of one object (or of its scale)."""
        sem, params, sub, method = self.semantics, request.params, route.subresource, raw.method
        ns = route.namespace or ""
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
        rtype: ResourceType,
        items: list[dict[str, Any]],
        rv: int,
        token: str | None = None,
        remaining: int | None = None,
    ) -> dict[str, Any]:
        """A typed list (one page of it: ``listing.py`` pages and validates)."""
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if token:
            metadata["continue"] = token
        if remaining is not None:
            metadata["remainingItemCount"] = remaining
        return {
            "kind": rtype.list_kind,
            "apiVersion": rtype.api_version,
            "metadata": metadata,
            "items": items,
        }
