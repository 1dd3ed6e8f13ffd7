"""Legacy (non-aggregated) discovery documents, built from the live resource registry.

kopf scans ``/api``, ``/apis`` and each group version to learn plurals and whether
``status`` is a subresource (it then patches status separately); the ``kubernetes``
client and kubectl resolve kinds and shortNames from the same documents. kubectl asks
for aggregated discovery first and falls back to these when the answer is a plain
``APIGroupList`` served as ``application/json``, which is what this module produces.
"""

from __future__ import annotations

from typing import Any

from .resources import Registry

SERVER_VERSION = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.0-devcluster",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = registry.groups()
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(name, groups[name]) for name in sorted(groups) if name],
    }


def api_group(registry: Registry, name: str) -> dict[str, Any] | None:
    versions = registry.groups().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    served = [t for t in registry if t.group == group and t.version == version]
    if not served:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [entry for t in served for entry in t.discovery_entries()],
    }


def root_paths(registry: Registry) -> dict[str, Any]:
    paths = {"/api", "/api/v1", "/apis", "/version", "/healthz", "/livez", "/readyz"}
    for name, versions in registry.groups().items():
        if name:
            paths.add(f"/apis/{name}")
            paths.update(f"/apis/{name}/{v}" for v in versions)
    return {"paths": sorted(paths)}
