"""Pod DNS names on one host: each named pod gets a loopback address of its own.

A real cluster's DNS answers ``<hostname>.<subdomain>.<namespace>[.svc[.cluster.local]]``
with the pod's IP when a headless Service named ``<subdomain>`` exists; LeaderWorkerSet
gives every group's leader such a name (``LWS_LEADER_ADDRESS``) and the group's other pods
dial it. Programs that take the address apart from its port (``ray start
--address=<leader>:6379``, a script that tries ``<leader>`` on a fixed port) cannot be
handed a different port, and every group wants the same one: on one host network they
would collide. Linux routes all of 127.0.0.0/8 to the loopback interface, so the kubelet
gives each such pod an address of its own there, and rewrites every env value and argv
item that is exactly that pod's DNS name to it. A server in the pod binds the same address
(it reads it from that env value) and its group reaches it on the port it expects.

The address is random in 127.0.0.0/8 (never 127.0.0.x, where the kubelet's own servers and
proxies listen), so kubelets of separate tests on one host seldom meet; a recreated pod gets
a new one, like a new pod IP.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from typing import Any

# (namespace, hostname, subdomain) -> the pod's loopback address, or None: no such pod.
PodLookup = Callable[[str, str, str], "str | None"]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAME_RE = re.compile(rf"{_LABEL}(\.{_LABEL})+")


class PodAddresses:
    """One loopback address per (namespace, pod), kept until the pod is forgotten;
    ``lookup`` finds the pod of a DNS name among ``pods()`` (the kubelet's view)."""

    def __init__(
        self,
        pods: Callable[[], Iterable[dict[str, Any]]] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._pods = pods or list
        self._rng = rng or random.Random()
        self._addresses: dict[tuple[str, str], str] = {}

    def lookup(self, namespace: str, hostname: str, subdomain: str) -> str | None:
        """The address of ``<hostname>.<subdomain>.<namespace>``; None: no such pod."""
        pod = named_pod(self._pods(), namespace, hostname, subdomain)
        return None if pod is None else self.get(namespace, pod)

    def get(self, namespace: str, pod: str) -> str:
        key = (namespace, pod)
        if key not in self._addresses:
            taken = set(self._addresses.values())
            while True:
                a, b, c = (self._rng.randint(1, 254) for _ in range(3))
                address = f"127.{a}.{b}.{c}"
                if address not in taken:
                    break
            self._addresses[key] = address
        return self._addresses[key]

    def forget(self, namespace: str, pod: str) -> None:
        self._addresses.pop((namespace, pod), None)


def named_pod(
    pods: Iterable[dict[str, Any]], namespace: str, hostname: str, subdomain: str
) -> str | None:
    """The name of the live pod answering ``<hostname>.<subdomain>.<namespace>``, if any."""
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if (
            meta.get("namespace", "default") == namespace
            and (spec.get("hostname") or meta.get("name")) == hostname
            and spec.get("subdomain") == subdomain
            and not meta.get("deletionTimestamp")
        ):
            return str(meta.get("name"))
    return None


def resolve_pod_name(text: str, namespace: str, lookup: PodLookup | None) -> str:
    """``text`` if it is not exactly a pod's DNS name, else that pod's loopback address."""
    if lookup is None or not _NAME_RE.fullmatch(text):
        return text
    parts = text.split(".")
    if parts[3:] not in ([], ["svc"], ["svc", "cluster", "local"]):
        return text
    ns = parts[2] if len(parts) > 2 else namespace
    return lookup(ns, parts[0], parts[1]) or text
