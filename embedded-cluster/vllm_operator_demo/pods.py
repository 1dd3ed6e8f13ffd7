"""The vLLM image hooks of the local kubelet: what vllm-operator's pods run on a laptop.

devcluster knows no image (``devcluster.images``). vllm-operator's pods name
``vllm/vllm-openai`` images (whose command ends in ``vllm serve``) and the operator's own
image (``vllm-operator bench``, installed in this environment). ``VllmImageHooks`` gives the
kubelet a ``vllm`` (and, for Ray groups, ``ray`` and ``import ray``) that runs the simulator
and each image's environment, both from the product's module ``vllm_operator.sim.vllm_shim``.
The demo, the integration tests and the benchmarks pass it explicitly:
``Kubelet(cluster, workdir, images=VllmImageHooks())``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from devcluster.images import ImageHooks
from vllm_operator.sim.vllm_shim import image_env, write_ray_shims, write_vllm_shim


class VllmImageHooks:
    """Stand-in ``vllm`` (the simulator) and the env of vLLM images, for ``Kubelet(images=)``."""

    def __init__(self, python: str | None = None) -> None:
        self.python = python  # interpreter the shim runs the simulator with (default: this one)

    def install(self, bindir: Path) -> Path | None:
        write_ray_shims(bindir, self.python)  # `ray`, and `import ray` for python3
        return write_vllm_shim(bindir, self.python).parent

    def env(self, image: str) -> Mapping[str, str]:
        return image_env(image)


def vllm_images() -> ImageHooks:
    """The hooks every vllm-operator kubelet uses (a factory: each caller gets its own)."""
    return VllmImageHooks()
