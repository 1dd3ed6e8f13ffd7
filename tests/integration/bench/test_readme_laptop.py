"""README's "Gate on your own traffic" laptop commands, copied as written: the simulator in
one terminal, the workload file, the prompts, `bench` with SLO limits and `judge` on the
summary it wrote in another, ending Passed. Each runs in a fresh `bash` whose PATH has no
`vllm-operator` (no venv activated, as a newcomer's shell after README's install), its
folder a clone-like one whose `.venv` is this checkout's environment. Only the port is
changed (to a free one). Issue 42: README named a bare `vllm-operator` after installing
into `.venv/bin/`: exit 127."""

from __future__ import annotations

import os
import re
import socket
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


def newcomer_shell(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A clone-like folder whose ``.venv`` is this checkout's environment, and an environment
    as after README's install: no venv activated, no ``vllm-operator`` on PATH."""
    venv = Path(sys.prefix)
    if not (venv / "bin" / "vllm-operator").exists():
        pytest.fail(f"{venv}/bin/vllm-operator missing: pip install -e . into this venv")
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(venv, target_is_directory=True)
    path = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "vllm-operator").exists()
    ]
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env["PATH"] = os.pathsep.join(path)
    bare = subprocess.run(
        ["bash", "-c", "command -v vllm-operator"], cwd=clone, env=env, check=False
    )
    assert bare.returncode != 0, "the test's shell finds a vllm-operator on PATH"
    return clone, env


def test_the_laptop_commands_end_passed(tmp_path: Path) -> None:
    sim_line, bench_lines = block("laptop-sim").strip(), block("laptop-bench")
    assert sim_line.startswith(".venv/bin/vllm-operator sim ")
    assert "--port 8000" in sim_line
    assert "127.0.0.1:8000" in bench_lines
    # Issue 42: the laptop path ends in a judged verdict, from the summary bench wrote.
    assert "--summary-path summary.json" in bench_lines
    assert ".venv/bin/vllm-operator judge --summary summary.json" in bench_lines
    port = str(free_port())
    work, env = newcomer_shell(tmp_path)
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
    assert "\nverdict: Passed\n" in shown, shown[-3000:]  # judge, on bench's summary
    assert shown.rindex("verdict: Passed") > shown.index("## Gate: Passed (exit 0)")
    assert "TTFT p99" in shown
