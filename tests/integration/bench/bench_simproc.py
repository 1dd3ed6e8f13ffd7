"""Start the simulator as a child process over real HTTP on 127.0.0.1 (bench tests).

Only the simulator's command-line contract is used (``python -m vllm_operator.sim MODEL
--port 0 ...`` printing ``SIM LISTENING http://...``), so these tests exercise the same
path as the benchmark Job: a separate server process, real sockets, real streams.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable

MODEL = "Qwen/Qwen3-30B-A3B-Instruct-2507-GPTQ-Int4"
StartSim = Callable[..., str]
"""The ``sim`` fixture: ``sim(*knobs) -> base URL``."""


def start_sim(*args: str, model: str = MODEL) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "vllm_operator.sim", model, "--port", "0"]
    cmd += ["--sim-warmup-seconds", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    timer = threading.Timer(30, proc.kill)  # a sim that never listens must not hang the test
    timer.start()
    try:
        for line in proc.stdout:
            if line.startswith("SIM LISTENING "):
                threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep draining
                return proc, line.split()[-1]
    finally:
        timer.cancel()
    raise RuntimeError(f"simulator {args} exited with {proc.wait()}")
