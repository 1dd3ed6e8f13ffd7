"""A simulator process with a flat profile (fixed TTFT and ITL), for the client benchmarks.

``bench_accuracy.py`` and ``bench_load.py`` compare the bench's figures with the simulator's
own ground truth; both start it the same way, optionally pinned to one CPU.
"""

from __future__ import annotations

import shutil
import subprocess
import sys


def start_sim(
    model: str, ttft_ms: float, itl_ms: float, cpu: int | None
) -> tuple[subprocess.Popen[str], str]:
    """Start ``python -m vllm_operator.sim`` on a free port; return it and its URL."""
    prefix = ["taskset", "-c", str(cpu)] if cpu is not None and shutil.which("taskset") else []
    cmd = [
        *prefix,
        sys.executable,
        "-m",
        "vllm_operator.sim",
        model,
        "--port",
        "0",
        "--sim-warmup-seconds",
        "0",
        "--sim-ttft-ms",
        str(ttft_ms),
        "--sim-itl-ms",
        str(itl_ms),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("SIM LISTENING "):
            return proc, line.split()[-1]
    raise RuntimeError(f"simulator exited with {proc.wait()}")
