"""Fault injection and image emulation for the local kubelet.

Faults are how tests (and ``demo --apply``) reproduce what a GPU cluster does to a rollout
without a GPU cluster: an image that never pulls, a pod no node can take (by label, or by
GPU count over a configured capacity), a server that never becomes Ready, a container
interrupted as it ends, a mesh that injects its proxy as a native sidecar (which a test may
then crash: ``kubelet_sidecars.crash_sidecar``). Rules match pods by
image (shell-style pattern) and/or labels; they are read on every reconcile, so a test may
swap ``kubelet.faults`` between steps. They apply to pods the kubelet has not started yet.

Faults an image shows by itself (a start-up failure caused by the environment the image bakes
in) are not rules here: the product's ``ImageHooks.env`` gives the image that environment
(``devcluster.images``) and the program the pod runs fails on it, as the real one would.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

GPU_SUFFIX = "/gpu"
MESH_PROXY = "mesh-proxy"
# The injected proxy: a process that idles until stopped (nothing is proxied through it).
_IDLE = "import time\nwhile True:\n    time.sleep(3600)\n"


@dataclass(frozen=True)
class Match:
    """Pods whose image matches ``image`` (if given) and which carry all ``labels``."""

    image: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def matches(self, pod: Obj) -> bool:
        containers = (pod.get("spec") or {}).get("containers") or [{}]
        image = str(containers[0].get("image") or "")
        if self.image is not None and not fnmatch.fnmatchcase(image, self.image):
            return False
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return all(labels.get(k) == val for k, val in self.labels.items())


@dataclass(frozen=True)
class Faults:
    """What goes wrong, and how many GPUs the (single) node has."""

    image_pull: tuple[Match, ...] = ()
    unschedulable: tuple[Match, ...] = ()
    never_ready: tuple[Match, ...] = ()
    gpu_capacity: int | None = None  # None: unlimited
    # The container ends as if interrupted (SIGINT, exit 130) after its process wrote what it
    # wrote: how a hostile child of the bench ended the Job in issue 10.
    interrupted: tuple[Match, ...] = ()
    # A service mesh's admission webhook (Istio, Linkerd) injects its proxy into these pods
    # as they are created: a native sidecar named ``mesh-proxy``, first of the init containers.
    mesh_sidecars: tuple[Match, ...] = ()

    def admit(self, pod: Obj) -> Obj:
        """The pod as the API stores it after admission: with the mesh's proxy if a
        ``mesh_sidecars`` rule matches it."""
        if not any(m.matches(pod) for m in self.mesh_sidecars):
            return pod
        spec = dict(pod.get("spec") or {})
        proxy = {
            "name": MESH_PROXY,
            "image": "example.invalid/mesh-proxy:1",
            "command": ["python", "-c", _IDLE],
            "restartPolicy": "Always",
        }
        spec["initContainers"] = [proxy, *(spec.get("initContainers") or [])]
        return {**pod, "spec": spec}

    def image_fault(self, pod: Obj) -> str | None:
        if any(m.matches(pod) for m in self.image_pull):
            image = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("image")
            return f'Failed to pull image "{image}": manifest unknown (devcluster fault)'
        return None

    def is_interrupted(self, pod: Obj) -> bool:
        return any(m.matches(pod) for m in self.interrupted)

    def is_never_ready(self, pod: Obj) -> bool:
        return any(m.matches(pod) for m in self.never_ready)

    def unschedulable_reason(self, pod: Obj, gpus_in_use: int) -> str | None:
        if any(m.matches(pod) for m in self.unschedulable):
            return "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
        need, resource = gpu_request(pod)
        if self.gpu_capacity is not None and need and gpus_in_use + need > self.gpu_capacity:
            return f"0/1 nodes are available: 1 Insufficient {resource}."
        return None


def gpu_request(pod: Obj) -> tuple[int, str]:
    """GPUs the pod asks for (any extended resource ending in ``/gpu``) and its name."""
    total, name = 0, "nvidia.com/gpu"
    for container in (pod.get("spec") or {}).get("containers") or []:
        res = container.get("resources") or {}
        for section in ("limits", "requests"):
            for key, value in (res.get(section) or {}).items():
                if key.endswith(GPU_SUFFIX):
                    try:
                        count = int(str(value))
                    except ValueError:
                        continue
                    total, name = max(total, count), key
    return total, name
