"""OpenAPI v3 documents: what kubectl's ``apply`` and ``explain`` read from the server.

kubectl's default ``apply`` (``--validate=strict``) first asks whether the server
validates fields itself: it looks, in the OpenAPI v3 document of the object's
group/version, for a PATCH operation tagged with the kind that accepts a
``fieldValidation`` query parameter; if found, it skips client-side validation. So each
served group/version gets one such operation per kind.

``kubectl explain`` (1.27+ reads only ``/openapi/v3``; it never asks for ``/openapi/v2``)
looks in the group/version document's ``components.schemas`` for the schema whose
``x-kubernetes-group-version-kind`` names the kind, then follows ``$ref``s. As
apiextensions-apiserver does, each custom resource's ``openAPIV3Schema`` is published
under its reversed-group name (``dev.vllm-operator.v1alpha1.VLLMDeployment``), with
``metadata`` a reference to ``ObjectMeta`` and a ``...List`` schema beside it. Built-in
kinds publish no schemas (``kubectl explain deployment`` says the kind is not found).
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from .resources import Registry, ResourceType


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def index(registry: Registry) -> dict[str, Any]:
    """The discovery document; each ``hash`` is the content's, so kubectl's HTTP cache
    (keyed by URL) never serves an old schema after a CRD changes."""
    gvs = {(t.group, t.version) for t in registry}
    paths = {}
    for group, version in sorted(gvs):
        path = _gv_path(group, version)
        document = group_version(registry, path)
        digest = hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest.upper()}"}
    return {"paths": paths}


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
    schemas: dict[str, Any] = {}
    for rtype in served:
        schemas.update(_kind_schemas(rtype))
    if schemas:
        schemas[_OBJECT_META] = OBJECT_META_SCHEMA
        schemas[_LIST_META] = LIST_META_SCHEMA
    return {
        "openapi": "3.0.0",
        "info": {"title": "devcluster", "version": "v1"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
_API_VERSION = (
    "APIVersion defines the versioned schema of this representation of an object. Servers "
    "should convert recognized schemas to the latest internal value, and may reject "
    "unrecognized values. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
)
_KIND = (
    "Kind is a string value representing the REST resource this object represents. Servers "
    "may infer this from the endpoint the client submits requests to. Cannot be updated. In "
    "CamelCase. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)
_METADATA = (
    "Standard object's metadata. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _string_map(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": {"type": "string", "default": ""},
        "description": description,
    }


OBJECT_META_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "ObjectMeta is metadata that all persisted resources must have, which includes all "
        "objects users must create."
    ),
    "properties": {
        "name": _string("Name must be unique within a namespace."),
        "generateName": _string(
            "GenerateName is an optional prefix, used by the server, to generate a unique "
            "name ONLY IF the Name field has not been provided."
        ),
        "namespace": _string("Namespace defines the space within which each name must be unique."),
        "labels": _string_map(
            "Map of string keys and values that can be used to organize and categorize "
            "(scope and select) objects."
        ),
        "annotations": _string_map(
            "Annotations is an unstructured key value map stored with a resource that may be "
            "set by external tools to store and retrieve arbitrary metadata."
        ),
        "uid": _string("UID is the unique in time and space value for this object."),
        "resourceVersion": _string(
            "An opaque value that represents the internal version of this object."
        ),
        "generation": {
            "type": "integer",
            "format": "int64",
            "description": "A sequence number representing a specific generation of the desired "
            "state.",
        },
        "creationTimestamp": _string(
            "CreationTimestamp is a timestamp representing the server time when this object "
            "was created."
        ),
        "deletionTimestamp": _string(
            "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."
        ),
        "finalizers": {
            "type": "array",
            "items": {"type": "string", "default": ""},
            "description": "Must be empty before the object is deleted from the registry.",
        },
        "ownerReferences": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "description": "List of objects depended by this object.",
        },
    },
}
LIST_META_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "ListMeta describes metadata that synthetic resources must have.",
    "properties": {
        "resourceVersion": _string("String that identifies the server's internal version."),
        "continue": _string("continue may be set if the user set a limit on the number of items."),
    },
}


def schema_name(rtype: ResourceType, kind: str | None = None) -> str:
    """The reversed-group definition name apiextensions-apiserver publishes."""
    group = ".".join(reversed(rtype.group.split("."))) if rtype.group else "io.k8s.api.core"
    return f"{group}.{rtype.version}.{kind or rtype.kind}"


def _kind_schemas(rtype: ResourceType) -> dict[str, Any]:
    if not isinstance(rtype.schema, dict):
        return {}
    gvk = [{"group": rtype.group, "kind": rtype.kind, "version": rtype.version}]
    schema = copy.deepcopy(rtype.schema)
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {**properties.get("apiVersion", {}), **_string(_API_VERSION)}
    properties["kind"] = {**properties.get("kind", {}), **_string(_KIND)}
    properties["metadata"] = {
        "allOf": [{"$ref": f"#/components/schemas/{_OBJECT_META}"}],
        "description": _METADATA,
    }
    schema.setdefault("type", "object")
    schema["x-kubernetes-group-version-kind"] = gvk
    list_kind = rtype.list_kind
    listing = {
        "type": "object",
        "description": f"{list_kind} is a list of {rtype.kind}",
        "required": ["items"],
        "properties": {
            "apiVersion": _string(_API_VERSION),
            "kind": _string(_KIND),
            "metadata": {
                "allOf": [{"$ref": f"#/components/schemas/{_LIST_META}"}],
                "description": "Standard list metadata.",
            },
            "items": {
                "type": "array",
                "description": f"List of {rtype.plural}.",
                "items": {"$ref": f"#/components/schemas/{schema_name(rtype)}"},
            },
        },
        "x-kubernetes-group-version-kind": [{**gvk[0], "kind": list_kind}],
    }
    return {schema_name(rtype): schema, schema_name(rtype, list_kind): listing}
