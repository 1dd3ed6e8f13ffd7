"""The simulated Ray cluster (``sim.ray_cluster``) as the Ray group scripts use it.

Real processes over loopback, through the shims a vLLM image's pod gets (``ray`` and a
``python3`` that can ``import ray``): ``ray start --head`` returns once the head listens and
leaves its address where ``ray.init(address="auto")`` finds it; ``ray.nodes()`` counts the
head and every ``ray start --address=... --block`` node; a node that leaves makes the
engine's watch fire; a node's ``--block`` ends (status 1) when the head goes.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from devcluster.kubelet_launch import free_port
from vllm_operator.sim import ray_cluster
from vllm_operator.sim.vllm_shim import write_ray_shims

COUNT = "import ray; ray.init(address='auto'); print(len(ray.nodes())); ray.shutdown()"


@pytest.fixture
def pod(tmp_path: Path) -> dict[str, str]:
    """The environment of a vLLM image's pod: the shims first on PATH, its own TMPDIR."""
    bindir = tmp_path / "bin"
    write_ray_shims(bindir)
    (tmp_path / "tmp").mkdir()
    return {
        **os.environ,
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "TMPDIR": str(tmp_path / "tmp"),
        "VLLMOP_SIM_VERSION": "0.11.0",
        "LWS_LEADER_ADDRESS": "127.0.0.1",
    }


def wait_for(predicate: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def nodes(env: dict[str, str]) -> int:
    out = subprocess.run(
        ["python3", "-c", COUNT], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return int(out.stdout.strip())


def test_a_head_counts_its_nodes_and_a_node_ends_with_the_head(pod: dict[str, str]) -> None:
    port = free_port()
    # The head outlives `ray start` (as Ray's does) while its owner, the container's main
    # process (here this shell), runs.
    owner = subprocess.Popen(
        ["/bin/sh", "-c", f"ray start --head --port={port} && exec sleep 600"], env=pod
    )
    try:
        wait_for(_file(pod).exists, "the head's address written")
        assert _file(pod).read_text().strip() == f"127.0.0.1:{port}"
        assert nodes(pod) == 1
        worker = subprocess.Popen(
            ["ray", "start", f"--address=127.0.0.1:{port}", "--block"], env=pod
        )
        wait_for(lambda: nodes(pod) == 2, "the worker node joined")
        lost: list[str] = []

        async def watch_a_loss() -> None:
            watch = ray_cluster.ClusterWatch(("127.0.0.1", port), lost.append)
            await watch.open()
            worker.kill()
            for _ in range(600):
                if lost:
                    break
                await asyncio.sleep(0.1)
            await watch.close()

        asyncio.run(watch_a_loss())
        assert lost
        assert lost[0].startswith("a Ray node left")
        assert nodes(pod) == 1
        again = subprocess.Popen(
            ["ray", "start", f"--address=127.0.0.1:{port}", "--block"], env=pod
        )
        wait_for(lambda: nodes(pod) == 2, "a second node joined")
        owner.kill()  # the container's main process ends: the head follows, then the node
        assert again.wait(timeout=60) == 1
    finally:
        owner.kill()
        owner.wait()


def _file(env: dict[str, str]) -> Path:
    return Path(env["TMPDIR"]) / "ray" / "ray_current_cluster"


def test_only_the_two_ray_start_forms_are_played(pod: dict[str, str]) -> None:
    for argv in (["ray", "status"], ["ray", "start"], ["ray", "start", "--address=nohost"]):
        done = subprocess.run(
            argv, env=pod, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 2, argv
        assert "only `ray start --head --port=P`" in done.stderr


def test_without_a_head_ray_init_fails_and_a_node_cannot_join(pod: dict[str, str]) -> None:
    done = subprocess.run(
        ["python3", "-c", COUNT], env=pod, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    assert "no running Ray cluster found" in done.stderr
    port = free_port()
    done = subprocess.run(
        ["ray", "start", f"--address=127.0.0.1:{port}", "--block"],
        env=pod,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
