"""Where a pod of this cluster listens: every pod is 127.0.0.1, each on a local port of its own.

A real cluster gives each pod an IP and the container's own port. Here the kubelet runs
every pod as a local process on a free port and annotates the pod with its address
(``kubelet.ADDRESS_ANNOTATION``). ``pod_address`` turns that into the seam an operator takes
for reaching one pod (``OperatorConfig.pod_address``), so the operator's code that reads a
pod's /metrics runs unchanged against this cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from devcluster.client import ClusterClient
from devcluster.kubelet import ADDRESS_ANNOTATION

PodAddress = Callable[[str, str, str, int], Awaitable[tuple[str, int] | None]]


def local_address(pod: dict[str, Any]) -> tuple[str, int] | None:
    """The (host, port) a pod of this cluster serves on, from its annotation."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(ADDRESS_ANNOTATION)
    if not isinstance(text, str) or ":" not in text:
        return None
    host, _, port = text.rpartition(":")
    return (host, int(port)) if port.isdigit() else None


def pod_address(cluster: ClusterClient) -> PodAddress:
    """The seam: (namespace, pod, pod IP, container port) -> (host, port) to connect to."""

    async def address(namespace: str, name: str, ip: str, port: int) -> tuple[str, int] | None:
        try:
            pod = await asyncio.to_thread(cluster.get, "v1", "pods", name, namespace)
        except Exception:  # gone, or the cluster stopping: the operator reports it unread
            return None
        return local_address(pod) if pod else None

    return address
