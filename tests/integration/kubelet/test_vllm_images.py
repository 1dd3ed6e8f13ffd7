"""The vLLM image hooks: which images get the CUDA toolkit path, the version, the shim.

The kubelet knows no image; ``vllm_operator_demo.pods.VllmImageHooks`` tells it what a
``vllm/vllm-openai`` image sets. The library path must be the one the simulator's CUBLAS
fault reacts to, on exactly the releases whose images carry it (0.16.0 up to 0.18.0).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devcluster.images import ImageHooks
from vllm_operator.engine.version import v
from vllm_operator.sim.startup import StartupFailure, check_cublas
from vllm_operator_demo.pods import VllmImageHooks, vllm_images


@pytest.mark.parametrize(
    ("image", "toolkit_path", "version"),
    [
        ("vllm/vllm-openai:v0.15.1", False, "0.15.1"),
        ("vllm/vllm-openai:v0.16.0", True, "0.16.0"),
        ("docker.io/vllm/vllm-openai:v0.17.1", True, "0.17.1"),
        ("vllm/vllm-openai:v0.18.0", False, "0.18.0"),
        ("vllm/vllm-openai:latest", False, None),
        ("vllm/vllm-openai@sha256:" + "0" * 64, False, None),
        ("ghcr.io/vllm-operator/vllm-operator:0.1.0", False, "0.1.0"),
    ],
)
def test_image_env(image: str, toolkit_path: bool, version: str | None) -> None:
    env = dict(vllm_images().env(image))
    assert ("LD_LIBRARY_PATH" in env) is toolkit_path
    assert env.get("VLLMOP_SIM_VERSION") == version


def test_the_baked_library_path_is_what_the_simulated_fault_needs() -> None:
    env = vllm_images().env("vllm/vllm-openai:v0.17.0")
    with pytest.raises(StartupFailure, match="CUBLAS_STATUS_INVALID_VALUE"):
        check_cublas(v(env["VLLMOP_SIM_VERSION"]), env["LD_LIBRARY_PATH"])


def test_install_writes_an_executable_vllm(tmp_path: Path) -> None:
    hooks: ImageHooks = VllmImageHooks(python="/opt/py/bin/python3")
    bindir = hooks.install(tmp_path / "bin")
    assert bindir == tmp_path / "bin"
    shim = bindir / "vllm"
    assert os.access(shim, os.X_OK)
    assert "exec /opt/py/bin/python3 -m vllm_operator.sim" in shim.read_text()
