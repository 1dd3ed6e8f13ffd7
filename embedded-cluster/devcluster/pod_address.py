"""Where a pod of this cluster listens: every pod is 127.0.0.1, each on a local port of its own.

A real cluster gives each pod an IP and the container's own port. Here the kubelet runs
every pod as a local process on a free port, and says which in a pod condition
(``kubelet_runtime.LOCAL_PORTS_CONDITION``). ``pod_address`` turns that into the seam an
operator takes for reaching one pod (``OperatorConfig.pod_address``), so the operator's code
that reads a pod's /metrics runs unchanged against this cluster.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from devcluster.client import ClusterClient
from devcluster.kubelet_runtime import LOCAL_PORTS_CONDITION

PodAddress = Callable[[str, str, str, int], Awaitable[tuple[str, int] | None]]


def local_port(pod: dict[str, Any], container_port: int) -> int | None:
    """The local port a pod's ``container_port`` is reached on, from its status."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") != LOCAL_PORTS_CONDITION:
            continue
        try:
            ports = json.loads(cond.get("message") or "{}")
        except ValueError:
            return None
        found = ports.get(str(container_port))
        return int(found) if found is not None else None
    return None


def pod_address(cluster: ClusterClient) -> PodAddress:
    """The seam: (namespace, pod, pod IP, container port) -> (host, port) to connect to."""

    async def address(namespace: str, name: str, ip: str, port: int) -> tuple[str, int] | None:
        try:
            pod = await asyncio.to_thread(cluster.get, "v1", "pods", name, namespace)
        except Exception:  # gone, or the cluster stopping: the operator reports it unread
            return None
        found = local_port(pod, port) if pod else None
        return None if found is None else ("127.0.0.1", found)

    return address
