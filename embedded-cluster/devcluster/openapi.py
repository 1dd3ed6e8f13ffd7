"""Just enough OpenAPI v3 for kubectl's default ``apply`` (``--validate=strict``).

kubectl first asks whether the server validates fields itself: it looks, in the OpenAPI v3
document of the object's group/version, for a PATCH operation tagged with the kind that
accepts a ``fieldValidation`` query parameter. If found, it skips client-side validation
(which would need the full OpenAPI v2 schemas). So each served group/version gets one such
operation per kind; no schemas are published, hence ``kubectl explain`` does not work.
"""

from __future__ import annotations

from typing import Any

from .resources import Registry, ResourceType


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def index(registry: Registry) -> dict[str, Any]:
    gvs = {(t.group, t.version) for t in registry}
    return {
        "paths": {
            _gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash={g}{v}"}
            for g, v in sorted(gvs)
        }
    }


def _object_path(rtype: ResourceType) -> str:
    base = "/" + _gv_path(rtype.group, rtype.version)
    scope = "/namespaces/{namespace}" if rtype.namespaced else ""
    return f"{base}{scope}/{rtype.plural}/{{name}}"


def group_version(registry: Registry, path: str) -> dict[str, Any] | None:
    """The document for ``api/v1`` or ``apis/<group>/<version>``, or None if not served."""
    parts = path.strip("/").split("/")
    if parts[:1] == ["api"] and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[:1] == ["apis"] and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    served = [t for t in registry if (t.group, t.version) == (group, version)]
    if not served:
        return None
    paths = {
        _object_path(t): {
            "patch": {
                "operationId": f"patch{t.kind}",
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                ],
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {
                    "group": t.group,
                    "version": t.version,
                    "kind": t.kind,
                },
                "responses": {"200": {"description": "OK"}},
            }
        }
        for t in served
    }
    return {
        "openapi": "3.0.0",
        "info": {"title": "devcluster", "version": "v1"},
        "paths": paths,
        "components": {"schemas": {}},
    }
