"""What a vLLM image is to a local kubelet: a ``vllm`` executable and the image's environment.

Why: the operator's pod command is a shell entrypoint ending in ``exec vllm serve "$@"``.
A local "kubelet" (tests, the demo) puts the directory written here first on ``PATH`` and
runs the rendered command unchanged; the shim drops the leading ``serve`` and execs
``python -m vllm_operator.sim`` with the remaining arguments as separate argv items (no
string is ever re-parsed by a shell). A Ray group's pods (vLLM 0.10.2/0.11.0) also call
``ray`` and ``python3 -c '... import ray ...'``: ``write_ray_shims`` puts the simulated Ray
(``sim.ray_cluster``) beside ``vllm``.

``image_env`` is the environment a ``vllm/vllm-openai`` image bakes in, as far as the
simulator cares: the vLLM version its tag names (``VLLMOP_SIM_VERSION``, so the simulator
emulates that release) and, for the releases whose image hits the CUBLAS start-up failure
(:mod:`.startup`), the CUDA toolkit on ``LD_LIBRARY_PATH``, so the entrypoint's library-path
fix has something real to fix. Pure: no devcluster import; ``vllm_operator_demo.pods``
adapts both functions to devcluster's ``ImageHooks``.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from vllm_operator.engine.tables import CUBLAS_PATH_BUG
from vllm_operator.engine.version import version_from_image
from vllm_operator.sim.ray_cluster import write_ray_module

# LD_LIBRARY_PATH of the vllm/vllm-openai images built on the CUDA 12.9 base (0.16, 0.17).
CUDA_BASE_LIBRARY_PATH = "/usr/local/nvidia/lib64:/usr/local/cuda/lib64"

_TEMPLATE = """#!/bin/sh
# vllm shim written by vllm_operator.sim.vllm_shim: runs the vLLM simulator.
if [ "$1" = "serve" ]; then shift; fi
exec {python} -m vllm_operator.sim "$@"
"""


def write_vllm_shim(directory: Path, python: str | None = None) -> Path:
    """Write an executable ``vllm`` into ``directory`` (created if needed); return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "vllm"
    path.write_text(_TEMPLATE.format(python=shlex.quote(python or sys.executable)))
    path.chmod(0o755)
    return path


_RAY_TEMPLATE = """#!/bin/sh
# ray shim written by vllm_operator.sim.vllm_shim: the simulated Ray (sim.ray_cluster).
exec {python} -m vllm_operator.sim.ray_main "$@"
"""

_PYTHON_TEMPLATE = """#!/bin/sh
# python3 shim written by vllm_operator.sim.vllm_shim: this Python; in a vLLM image's pod
# (VLLMOP_SIM_VERSION set) the simulated `ray` is importable, as Ray is in the image.
if [ -n "${{VLLMOP_SIM_VERSION:-}}" ]; then
  PYTHONPATH={site}; export PYTHONPATH
fi
exec {python} "$@"
"""


def write_ray_shims(directory: Path, python: str | None = None) -> list[Path]:
    """Write ``ray`` and ``python3`` into ``directory`` (beside ``vllm``): what a vLLM
    image's Ray group scripts (``engine.ray_group``) call besides ``vllm``."""
    exe = shlex.quote(python or sys.executable)
    site = write_ray_module(directory / "ray-site")
    written = []
    for name, text in (
        ("ray", _RAY_TEMPLATE.format(python=exe)),
        ("python3", _PYTHON_TEMPLATE.format(python=exe, site=shlex.quote(str(site)))),
    ):
        path = directory / name
        path.write_text(text)
        path.chmod(0o755)
        written.append(path)
    return written


def image_env(image: str) -> dict[str, str]:
    """The environment ``image`` gives the simulator: its vLLM version and library path."""
    version = version_from_image(image)
    env: dict[str, str] = {}
    if "vllm-openai" in image and version is not None and CUBLAS_PATH_BUG.covers(version):
        env["LD_LIBRARY_PATH"] = CUDA_BASE_LIBRARY_PATH
    if version is not None:
        env["VLLMOP_SIM_VERSION"] = str(version)
    return env
