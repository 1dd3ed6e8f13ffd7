"""README's "Gate on your own traffic" laptop commands, copied as written: the simulator in
one terminal, the workload file, the prompts and `bench` with SLO limits in another, ending
Passed. Only the port is changed (to a free one) and `vllm-operator` is this checkout's."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


def block(name: str) -> str:
    """The shell block between README's ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(rf"<!-- {name}:begin -->\n```sh\n(.*?)```\n<!-- {name}:end -->", text, re.S)
    assert found, f"README has no {name} block"
    return found.group(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_laptop_commands_end_passed(tmp_path: Path) -> None:
    sim_line, bench_lines = block("laptop-sim").strip(), block("laptop-bench")
    assert sim_line.startswith("vllm-operator sim ")
    assert "--port 8000" in sim_line
    assert "127.0.0.1:8000" in bench_lines
    port = str(free_port())
    shim = tmp_path / "bin" / "vllm-operator"  # the command README names, this checkout's
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m vllm_operator.commands "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}
    work = tmp_path / "laptop"
    work.mkdir()
    sim = subprocess.Popen(
        ["bash", "-c", "exec " + sim_line.replace("8000", port)],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60  # the README's 2 s warm-up, on a loaded machine
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert sim.poll() is None, "the simulator exited"
            assert time.monotonic() < deadline, "the simulator was not healthy within 60 s"
            time.sleep(0.2)
        done = subprocess.run(
            ["bash", "-e", "-c", bench_lines.replace("8000", port)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )
    finally:
        sim.terminate()
        sim.wait(timeout=20)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shown = done.stdout  # the report for people, ending in the verdict, piped or not
    assert "## Gate: Passed (exit 0)" in shown, shown[-3000:]
    assert "TTFT p99" in shown
