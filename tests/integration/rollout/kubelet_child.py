"""The rollout tests' kubelet process: what it runs, with no more imports than it needs.

``KubeletProcess`` (harness.py) starts it with multiprocessing's spawn: a fresh interpreter
that imports this module to find its target. The harness itself imports the API server,
kopf, the kubernetes client and the operator (about 1.8 CPU s in a fresh interpreter);
this module only the kubelet and the images it runs (about 0.7), once per rollout test.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from devcluster.kubelet import Kubelet
from vllm_operator_demo.pods import vllm_images

if TYPE_CHECKING:
    from devcluster.kubelet_faults import Faults

# What the operator reads from the (only) Node: the GPU product of where a gate ran.
GPU_PRODUCT = "NVIDIA-H200-SIM"


def run_kubelet(
    api: tuple[str, bytes | None], workdir: str, faults: Faults | None, ready: Any, stop: Any
) -> None:
    """A kubelet in its own process: its Service proxies then do not share a GIL with the
    API server and the operator, so the benchmark measures the simulator, not the test."""
    url, ca_pem = api  # the API's URL and, over HTTPS, its CA
    kubelet = Kubelet(
        url,
        Path(workdir),
        time_scale=0.01,
        faults=faults,
        node_labels={"nvidia.com/gpu.product": GPU_PRODUCT},
        images=vllm_images(),
        ca_pem=ca_pem,
    )
    kubelet.start()
    ready.set()
    try:
        stop.wait()
    finally:
        kubelet.stop(timeout=5)
