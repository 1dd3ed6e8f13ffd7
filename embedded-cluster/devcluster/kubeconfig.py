"""A kubeconfig for the development cluster, so kubectl, kopf's default login and the
``kubernetes`` client reach it exactly as they would reach a real cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def kubeconfig(url: str, *, name: str = "devcluster", namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {"token": "devcluster"}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
        ],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | Path, url: str, *, name: str = "devcluster", namespace: str = "default"
) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig(url, name=name, namespace=namespace)))
    return target
