"""The Ray group scripts (0.10.2/0.11.0 multi-node), run for real by /bin/sh.

Fake ``ray``, ``python3`` and ``vllm`` on PATH record, in order, the argv they received
(NUL-separated, records ended by RS) and the LD_LIBRARY_PATH they
saw; the fake ``python3`` (the scripts' wait
programs) exits with ``FAKE_PY_RC``. The contract: the library-path fix first, then Ray,
then (leader) the wait for the group and ``exec vllm serve "$@"`` with every item untouched.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_operator.engine import ray_group

FAKE = """#!/bin/sh
{{ printf '%s\\0' "{name}" "$@"; printf 'LD=%s\\036' "${{LD_LIBRARY_PATH:-<unset>}}"; }} \\
  >> "$FAKE_OUT"
{tail}
"""
LEADER = "vllm--abc-0.vllm--abc.default"


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, tail in (("ray", ""), ("vllm", ""), ("python3", 'exit "${FAKE_PY_RC:-0}"')):
        path = bin_dir / name
        path.write_text(FAKE.format(name=name, tail=tail))
        path.chmod(0o755)
    return bin_dir


def run(
    fake_bin: Path, tmp_path: Path, command: list[str], args: list[str], **env: str
) -> tuple[int, list[tuple[str, list[str], str]], str]:
    out = tmp_path / "calls"
    full = {
        "PATH": f"{fake_bin}:/usr/bin:/bin",
        "FAKE_OUT": str(out),
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64:/usr/local/cuda/lib64",
        "VLLMOP_LIBRARY_PATH_FIX": "strip-cuda",
        **env,
    }
    proc = subprocess.run(
        [*command, *args], env=full, capture_output=True, text=True, timeout=60, check=False
    )
    calls = []
    if out.exists():
        for record in out.read_text().split("\036"):
            if not record:
                continue
            items, ld = record.rsplit("\0", 1)
            name, *argv = items.split("\0")
            calls.append((name, argv, ld))
    return proc.returncode, calls, proc.stderr


def test_the_leader_starts_the_head_waits_for_the_group_then_serves(
    fake_bin: Path, tmp_path: Path
) -> None:
    serve = [
        "Qwen/Qwen3-8B",
        "--served-model-name",
        "a b $HOME 'q'",
        "--distributed-executor-backend",
        "ray",
    ]
    rc, calls, stderr = run(
        fake_bin, tmp_path, ray_group.leader_command(), serve, VLLMOP_RAY_NODES="3"
    )
    assert rc == 0, stderr
    assert [name for name, _, _ in calls] == ["ray", "python3", "vllm"]
    assert calls[0][1] == [
        "start",
        "--head",
        f"--port={ray_group.RAY_PORT}",
        "--disable-usage-stats",
    ]
    assert calls[1][1][0] == "-c"
    assert calls[1][1][2:] == ["3"]
    assert calls[2][1] == ["serve", *serve]
    # the fix ran before Ray: Ray's workers inherit the environment of `ray start`
    assert all(ld == "LD=/usr/local/nvidia/lib64" for _, _, ld in calls)


def test_the_leader_stops_when_the_group_does_not_join(fake_bin: Path, tmp_path: Path) -> None:
    rc, calls, _ = run(
        fake_bin, tmp_path, ray_group.leader_command(), ["m"], VLLMOP_RAY_NODES="2", FAKE_PY_RC="1"
    )
    assert rc == 1
    assert [name for name, _, _ in calls] == ["ray", "python3"]


def test_the_leader_needs_the_group_size(fake_bin: Path, tmp_path: Path) -> None:
    rc, calls, stderr = run(fake_bin, tmp_path, ray_group.leader_command(), ["m"])
    assert rc != 0
    assert calls == []
    assert ray_group.NODES_ENV in stderr


def test_a_worker_waits_for_the_head_then_joins_it(fake_bin: Path, tmp_path: Path) -> None:
    rc, calls, stderr = run(fake_bin, tmp_path, ray_group.worker_command(), [LEADER])
    assert rc == 0, stderr
    assert [name for name, _, _ in calls] == ["python3", "ray"]
    assert calls[0][1][2:] == [LEADER]
    assert calls[1][1] == [
        "start",
        f"--address={LEADER}:{ray_group.RAY_PORT}",
        "--block",
        "--disable-usage-stats",
    ]
    assert calls[1][2] == "LD=/usr/local/nvidia/lib64"


def test_a_worker_that_never_reaches_the_head_fails(fake_bin: Path, tmp_path: Path) -> None:
    rc, calls, _ = run(fake_bin, tmp_path, ray_group.worker_command(), [LEADER], FAKE_PY_RC="1")
    assert rc == 1
    assert [name for name, _, _ in calls] == ["python3"]


@pytest.mark.parametrize("script", [ray_group.LEADER_SCRIPT, ray_group.WORKER_SCRIPT])
def test_the_scripts_are_safe_from_kubelet_expansion(script: str) -> None:
    assert "$(" not in script
    assert "$$" not in script


def test_the_wait_programs_are_python_that_a_shell_quote_keeps_whole() -> None:
    for program in (ray_group._WAIT, ray_group._REACH):
        assert "'" not in program  # single-quoted in the scripts
        compile(program, "<wait>", "exec")


def test_the_worker_wait_gives_up_on_an_address_nobody_answers() -> None:
    """The real reach program, against a loopback port no one listens on (bound, then
    closed), with the deadline shortened: it exits 1 and says where it looked."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    program = ray_group._REACH.replace(
        f"time.monotonic() + {ray_group.JOIN_SECONDS}", "time.monotonic() + 0"
    ).replace(f"sys.argv[1], {ray_group.RAY_PORT}", f"sys.argv[1], {port}")
    assert f"sys.argv[1], {port}" in program
    assert "time.monotonic() + 0" in program
    proc = subprocess.run(
        [sys.executable, "-c", program, "127.0.0.1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert f"no Ray head at 127.0.0.1:{port}" in proc.stderr
