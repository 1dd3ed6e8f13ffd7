"""Start-up failures a real vLLM image shows, reproduced so the operator's fixes can be tested.

CUBLAS_STATUS_INVALID_VALUE (vllm-facts; vllm#35608, vllm-omni#1790, pytorch#174949): the
0.16/0.17 images pair a pip-installed ``libcublas`` with a system ``libcublasLt`` found
through ``LD_LIBRARY_PATH`` (``/usr/local/cuda/lib64``, CUDA 12.9); the first bf16/fp16 GEMM
fails after the weights are loaded, and vLLM exits. Driver directories such as
``/usr/local/nvidia/lib64`` are harmless (GKE mounts the driver there, vllm PR #25766), and
so are toolkit entries on vLLM >= 0.18 (shared/calibration/h200-vllm-0.22.md: 0.22 with the
CUDA 13 toolkit first loaded its own pip pair and passed). Rule used: on the releases of
``engine.tables.CUBLAS_PATH_BUG`` (0.16.x/0.17.x), any ``/usr/local/cuda[-X.Y]/lib64`` entry
fails the start.
"""

from __future__ import annotations

import re

from vllm_operator.engine.tables import CUBLAS_PATH_BUG
from vllm_operator.engine.version import Version
from vllm_operator.errors import VLLMOperatorError

# The same rule as the entrypoint's strip-cuda (engine/entrypoint.py; a test compares them).
_TOOLKIT_ENTRY = re.compile(r"^/usr/local/cuda(-[0-9]+(\.[0-9]+)*)?/(lib64|targets/[^/]+/lib)/?$")


# What a cold start spends its time on (shared/calibration/h200-vllm-0.22.md: eager 54 s of
# loading and profiling; compiled 115 s = the same plus torch.compile ~30 s and CUDA graph
# capture ~24 s). Fractions of the profile's warm-up, logged as the stages go by.
_STAGES = {
    "eager": (
        (0.85, "Loading weights and profiling memory"),
        (0.15, "enforce_eager: skipping torch.compile and CUDA graphs; allocating KV cache"),
    ),
    "compiled": (
        (0.47, "Loading weights and profiling memory"),
        (0.26, "torch.compile: compiling the model graph (cache in VLLM_CACHE_ROOT)"),
        (0.21, "Capturing CUDA graphs (FULL_AND_PIECEWISE)"),
        (0.06, "Allocating KV cache and starting the API server"),
    ),
}


def warmup_stages(mode: str, seconds: float) -> list[tuple[float, str]]:
    """``(duration, log line)`` of each warm-up stage for a profile ``mode``."""
    stages = _STAGES["eager" if mode == "eager" else "compiled"]
    return [(fraction * seconds, text) for fraction, text in stages]


class StartupFailure(VLLMOperatorError):
    """vLLM would exit during start-up; ``log`` is the line it prints last."""

    def __init__(self, log: str, exit_code: int = 1) -> None:
        super().__init__(log)
        self.log = log
        self.exit_code = exit_code


def toolkit_entries(ld_library_path: str | None) -> list[str]:
    """The CUDA toolkit library directories in ``ld_library_path``."""
    if not ld_library_path:
        return []
    return [e for e in ld_library_path.split(":") if _TOOLKIT_ENTRY.match(e)]


def check_cublas(version: Version, ld_library_path: str | None) -> None:
    """Raise :class:`StartupFailure` when this version and library path hit the CUBLAS bug."""
    if not CUBLAS_PATH_BUG.covers(version):
        return
    entries = toolkit_entries(ld_library_path)
    if entries:
        raise StartupFailure(
            "RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling "
            "`cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, "
            "CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, compute_type, "
            "CUBLAS_GEMM_DEFAULT_TENSOR_OP)` "
            f"(simulated: vLLM {version} with CUDA toolkit libraries first on "
            f"LD_LIBRARY_PATH: {', '.join(entries)}; remove the toolkit entries, keep the "
            "driver paths)"
        )
