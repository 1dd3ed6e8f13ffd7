"""A kubeconfig for the development cluster, so kubectl, kopf's default login and the
``kubernetes`` client reach it exactly as they would reach a real cluster."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml


def kubeconfig(
    url: str, *, name: str = "devcluster", namespace: str = "default", ca_pem: bytes | None = None
) -> dict[str, Any]:
    """``ca_pem``: the CA of an HTTPS server, as ``certificate-authority-data``."""
    cluster: dict[str, Any] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": "devcluster"}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
        ],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | Path,
    url: str,
    *,
    name: str = "devcluster",
    namespace: str = "default",
    ca_pem: bytes | None = None,
) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    config = kubeconfig(url, name=name, namespace=namespace, ca_pem=ca_pem)
    target.write_text(yaml.safe_dump(config))
    return target
