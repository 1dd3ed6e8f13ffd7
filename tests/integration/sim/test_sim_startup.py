"""Start-up like vLLM: refuse connections while warming up, die on the CUBLAS library mix,
and run as ``vllm serve`` behind the image's shell entrypoint."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from vllm_operator.sim import SimConfig, SimProcess, SimServer, SimThread
from vllm_operator.sim.startup import StartupFailure
from vllm_operator.sim.vllm_shim import write_vllm_shim

IMAGE_LD_PATH = "/usr/local/nvidia/lib64:/usr/local/cuda/lib64"  # vLLM 0.16/0.17 images


def strip_cuda(ld_path: str) -> str:
    """The fix under test: drop only the CUDA toolkit entries, keep the driver paths."""
    keep = [e for e in ld_path.split(":") if not e.startswith("/usr/local/cuda")]
    return ":".join(keep)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_refuses_connections_during_warmup_then_serves() -> None:
    port = free_port()
    config = SimConfig.create("m", port=port, warmup_seconds=0.6)
    server = SimServer(config)
    loop = asyncio.get_running_loop()
    started = loop.time()
    task = asyncio.create_task(server.start())
    refused = 0
    async with aiohttp.ClientSession() as http:
        while loop.time() - started < 10:
            try:
                async with http.get(f"http://127.0.0.1:{port}/health") as r:
                    assert r.status == 200
                    break
            except aiohttp.ClientConnectorError:
                refused += 1
                await asyncio.sleep(0.05)
        ready_after = loop.time() - started
    await task
    await server.stop()
    assert refused >= 3
    assert ready_after >= 0.6


async def test_cublas_failure_at_end_of_warmup_and_its_fix() -> None:
    port = free_port()
    broken = SimConfig.create("m", port=port, warmup_seconds=0.1, ld_library_path=IMAGE_LD_PATH)
    with pytest.raises(StartupFailure, match="CUBLAS_STATUS_INVALID_VALUE"):
        await SimServer(broken).start()
    with socket.socket() as s:  # it never listened
        assert s.connect_ex(("127.0.0.1", port)) != 0
    fixed = SimConfig.create("m", warmup_seconds=0.1, ld_library_path=strip_cuda(IMAGE_LD_PATH))
    assert fixed.ld_library_path == "/usr/local/nvidia/lib64"
    async with (
        SimServer(fixed) as sim,
        aiohttp.ClientSession() as http,
        http.get(sim.url + "/health") as r,
    ):
        assert r.status == 200
    newer = SimConfig.create("m", version="0.22.0", warmup_seconds=0, ld_library_path=IMAGE_LD_PATH)
    async with SimServer(newer):
        pass


def run_image_entrypoint(
    tmp_path: Path, args: list[str], ld_path: str | None, fix: bool = False
) -> subprocess.Popen[str]:
    """The pod's command: a constant shell script ending in ``exec vllm serve "$@"``."""
    shim_dir = write_vllm_shim(tmp_path / "bin").parent
    env = dict(os.environ, PATH=f"{shim_dir}:{os.environ['PATH']}")
    env.pop("LD_LIBRARY_PATH", None)
    if ld_path is not None:
        env["LD_LIBRARY_PATH"] = ld_path
    script = 'exec vllm serve "$@"'
    if fix:
        script = (
            'LD_LIBRARY_PATH=$(printf %s "$LD_LIBRARY_PATH" | tr : "\\n" | '
            "grep -v '^/usr/local/cuda' | paste -sd: -); export LD_LIBRARY_PATH; " + script
        )
    return subprocess.Popen(
        ["sh", "-c", script, "sh", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_vllm_shim_rejects_flags_like_the_real_cli(tmp_path: Path) -> None:
    proc = run_image_entrypoint(
        tmp_path, ["m", "--sim-version", "0.16.0", "--performance-mode", "throughput"], None
    )
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "--performance-mode" in err


def test_image_entrypoint_dies_on_cublas_and_serves_once_fixed(tmp_path: Path) -> None:
    args = ["m", "--host", "127.0.0.1", "--port", "0", "--sim-warmup-seconds", "0.05"]
    proc = run_image_entrypoint(tmp_path, args, IMAGE_LD_PATH)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "CUBLAS_STATUS_INVALID_VALUE" in err
    assert "SIM LISTENING" not in out

    proc = run_image_entrypoint(tmp_path, args, IMAGE_LD_PATH, fix=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("SIM LISTENING http://127.0.0.1:")
        url = line.split()[-1]
        with urllib.request.urlopen(url + "/health", timeout=5) as r:
            assert r.status == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    assert proc.returncode == 0  # SIGTERM is a clean shutdown


def test_subprocess_env_knobs_and_port_zero() -> None:
    env = dict(os.environ, VLLMOP_SIM_VERSION="0.16.0", VLLMOP_SIM_WARMUP_SECONDS="0")
    argv = ["m", "--host", "127.0.0.1", "--port", "0"]
    with (
        SimProcess.start(argv, env=env, stderr=subprocess.DEVNULL) as sim,
        urllib.request.urlopen(sim.url + "/version", timeout=5) as r,
    ):
        assert r.read() == b'{"version": "0.16.0"}'
    with pytest.raises(RuntimeError, match="status 2"):
        SimProcess.start(["m", "--performance-mode", "throughput"], env=env,
                         stderr=subprocess.DEVNULL)  # fmt: skip


def test_sigterm_during_warmup_exits_promptly() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_operator.sim", "m", "--port", "0",
         "--sim-warmup-seconds", "60", "--sim-version", "0.17.0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    assert "warm-up 60.00 s" in proc.stderr.readline()  # the handlers are installed by now
    proc.terminate()
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert "SIM LISTENING" not in out


def test_thread_runner_for_synchronous_callers() -> None:
    with (
        SimThread(SimConfig.create("m", warmup_seconds=0)) as sim,
        urllib.request.urlopen(sim.url + "/health", timeout=5) as r,
    ):
        assert r.status == 200


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
async def test_curl_parses_the_stream(start_sim: Any) -> None:
    async with start_sim() as sim:
        proc = await asyncio.create_subprocess_exec(
            "curl", "-sSN", "--fail", sim.url + "/v1/chat/completions",
            "-H", "Content-Type: application/json",
            "-d", '{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}',
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await proc.communicate()
    assert proc.returncode == 0
    events = [line for line in out.decode().split("\n\n") if line]
    assert events[-1] == "data: [DONE]"
    assert len(events) == 1 + 3 + 1  # role, 3 tokens, [DONE]


def test_python_dash_m_help() -> None:
    r = subprocess.run([sys.executable, "-m", "vllm_operator.sim", "--help"],
                       capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert r.returncode == 0
    assert "--sim-version" in r.stdout
