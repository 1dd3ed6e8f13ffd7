"""URL paths to resource requests, parsed the way the API server routes them.

kmock 0.8's path parser fails on ``/api/v1/namespaces`` (the namespaces collection looks
like a ``namespaces/<ns>/...`` prefix with nothing after it), which breaks kopf in
namespaced mode. Here ``namespaces/<x>/<y>`` is a namespaced request only if ``<y>`` is a
namespaced plural of that group/version; otherwise it is the namespace object's
subresource (``/api/v1/namespaces/foo/status``). Legacy ``/watch/`` prefixes are accepted.

``action`` names the Kubernetes verb of a request for kmock's request records and reaction
criteria (``kmock.action``), by kmock's own rules, without kmock's private parser.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .resources import Registry


@dataclass(frozen=True)
class Route:
    group: str
    version: str
    plural: str
    namespace: str | None = None  # None: cluster-wide (all namespaces, or cluster-scoped)
    name: str | None = None
    subresource: str = ""
    legacy_watch: bool = False


def parse_route(path: str, registry: Registry) -> Route | None:
    """The resource a path addresses, or None for non-resource paths (discovery etc.)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    legacy_watch = False
    if rest and rest[0] == "watch":
        legacy_watch, rest = True, rest[1:]
    if not rest:
        return None
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        candidate = registry.get(group, version, rest[2])
        if candidate is not None and candidate.namespaced:
            namespace, rest = rest[1], rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) >= 2 else None
    subresource = "/".join(rest[2:])
    return Route(group, version, plural, namespace, name, subresource, legacy_watch)


def action(route: Route | None, method: str, query: Mapping[str, str]) -> str | None:
    """kmock's action name (``LIST``, ``WATCH``, ...) of a request, or None if it has none.

    GET with ``watch=true`` watches (named or not); otherwise a collection is LISTed or
    CREATEd, and a named object FETCHed, UPDATEd (PATCH) or DELETEd. PUT, and POST to a
    name, have no action in kmock's model.
    """
    if route is None:
        return None
    method = method.upper()
    if method == "GET" and (route.legacy_watch or query.get("watch") == "true"):
        return "WATCH"
    if route.name is None:
        return {"GET": "LIST", "POST": "CREATE"}.get(method)
    return {"GET": "FETCH", "PATCH": "UPDATE", "DELETE": "DELETE"}.get(method)
