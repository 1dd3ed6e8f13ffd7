"""A simulated multi-node group over loopback: join, serve only when whole, die together.

Real processes (``python -m vllm_operator.sim``) with the flags the operator renders for a
2-node group (``engine.multinode``), so what is tested is the argv a pod runs.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO

import httpx
import pytest

from devcluster.kubelet_launch import free_port

TIMEOUT = 60.0


def group_argv(rank: int, master_port: int, port: int | None = None) -> list[str]:
    argv = ["sim-model", "--sim-version", "0.22.0", "--sim-warmup-seconds", "0"]
    argv += ["--tensor-parallel-size", "1", "--pipeline-parallel-size", "2"]
    argv += ["--nnodes", "2", "--node-rank", str(rank)]
    argv += ["--master-addr", "127.0.0.1", "--master-port", str(master_port)]
    if rank:
        return [*argv, "--headless"]
    return [*argv, "--port", str(port)]


class Proc:
    """A simulator process whose stderr lines are collected as they come."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vllm_operator.sim", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._drain, args=(self.proc.stdout,), daemon=True).start()

    def _drain(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self.lines.append(line)

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def wait(cond: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(0.05)


@pytest.fixture
def procs() -> Iterator[Callable[[list[str]], Proc]]:
    started: list[Proc] = []

    def start(argv: list[str]) -> Proc:
        started.append(Proc(argv))
        return started[-1]

    yield start
    for proc in started:
        proc.stop()


def test_the_leader_serves_only_once_the_worker_joined_and_dies_when_it_goes(
    procs: Callable[[list[str]], Proc],
) -> None:
    master, port = free_port(), free_port()
    leader = procs(group_argv(0, master, port))
    wait(lambda: leader.said("waiting for 1 worker node(s)"), "the leader opens its rendezvous")
    with pytest.raises(httpx.ConnectError):  # no API server before the group is whole
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
    worker = procs(group_argv(1, master))
    wait(lambda: leader.said("SIM LISTENING"), "the leader listens once the worker joined")
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    assert worker.said("joined the group as node 1 of 2 (headless)")
    assert worker.proc.poll() is None
    worker.proc.kill()  # a worker lost: the leader's engine fails, the process exits 1
    assert leader.proc.wait(TIMEOUT) == 1
    assert leader.said("worker node 1 left the group")


def test_a_worker_started_first_waits_for_its_leader_and_exits_when_the_leader_goes(
    procs: Callable[[list[str]], Proc],
) -> None:
    master, port = free_port(), free_port()
    worker = procs(group_argv(1, master))
    leader = procs(group_argv(0, master, port))
    wait(lambda: leader.said("SIM LISTENING"), "the group forms whatever the order")
    leader.proc.kill()
    assert worker.proc.wait(TIMEOUT) == 1
    assert worker.said("the leader left the group")


def test_a_second_worker_of_the_same_rank_is_refused(
    procs: Callable[[list[str]], Proc],
) -> None:
    master, port = free_port(), free_port()
    leader = procs(group_argv(0, master, port))
    procs(group_argv(1, master))
    wait(lambda: leader.said("SIM LISTENING"), "the group forms")
    again = procs(group_argv(1, master))
    assert again.proc.wait(TIMEOUT) == 1
    assert again.said("the leader refused node rank 1")
    assert leader.proc.poll() is None  # a refused stranger does not end the group
