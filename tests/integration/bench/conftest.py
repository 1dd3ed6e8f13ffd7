"""A simulator child process per test (see ``bench_simproc``), stopped at teardown."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from bench_simproc import MODEL, StartSim, start_sim


@pytest.fixture
def sim() -> Iterator[StartSim]:
    """``sim("--sim-version", "0.16.0", ...)`` -> base URL; every process is stopped after."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str, model: str = MODEL) -> str:
        proc, url = start_sim(*args, model=model)
        procs.append(proc)
        return url

    yield start
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
