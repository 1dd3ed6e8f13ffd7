"""A small test CRD (Widget) used across the devcluster tests."""

from __future__ import annotations

from typing import Any

GROUP, VERSION, PLURAL = "test.devcluster.io", "v1", "widgets"
API_VERSION = f"{GROUP}/{VERSION}"


def widget_crd(*, status: bool = True, columns: bool = True) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {
                            "size": {"type": "integer", "default": 1},
                            "image": {"type": "string"},
                        },
                    },
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            }
        },
    }
    if status:
        version["subresources"] = {"status": {}}
    if columns:
        version["additionalPrinterColumns"] = [
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {
                "name": "Ready",
                "type": "string",
                "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
            },
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": PLURAL,
                "singular": "widget",
                "kind": "Widget",
                "shortNames": ["wdg"],
                "categories": ["all"],
            },
            "versions": [version],
        },
    }


def widget(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": dict(spec),
    }
