"""A ``vllm`` executable that runs the simulator, for pods rendered for the real image.

Why: the operator's pod command is a shell entrypoint ending in ``exec vllm serve "$@"``.
A local "kubelet" (tests, the demo) puts the directory written here first on ``PATH`` and
runs the rendered command unchanged; the shim drops the leading ``serve`` and execs
``python -m vllm_operator.sim`` with the remaining arguments as separate argv items (no
string is ever re-parsed by a shell).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

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
