"""A simulated multi-node vLLM group: workers join the leader, and nobody survives a loss.

vLLM >= 0.11.1 spans nodes with ``--nnodes N --node-rank R --master-addr A --master-port P``
(workers add ``--headless``: no API server). What the operator and the LeaderWorkerSet
depend on, and what this module reproduces over loopback TCP:

- the leader (rank 0) opens the group's rendezvous on ``A:P`` (torch.distributed's store)
  and starts its engine, and so its API server, only once all ``N - 1`` workers joined:
  until then it does not listen, so its probes fail as a real leader's do;
- a headless worker dials ``A:P`` until the leader answers (a worker often starts first;
  after ``JOIN_TIMEOUT_SECONDS`` it gives up and exits 1, as torch's store timeout does),
  then serves nothing and lives as long as the leader does;
- once the group runs, losing any member ends the others: the leader's engine fails when a
  worker's process goes (``MultiprocExecutor``'s worker monitor, vllm/v1/executor/
  multiproc_executor.py in 0.11.1 and 0.22.0), and a worker whose leader is gone exits.
  Exit status 1 either way, so the kubelet restarts the container and the LeaderWorkerSet
  (``RecreateGroupOnPodRestart``) recreates the whole group.

The wire is one line each way (``JOIN <rank>`` / ``OK``), then an idle connection whose end
is the signal. Pure asyncio; the process exit is the caller's (``runner``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from vllm_operator.errors import VLLMOperatorError

log = logging.getLogger("vllm_operator.sim")

JOIN_TIMEOUT_SECONDS = 600.0
RETRY_SECONDS = 0.2
_LINE_LIMIT = 64


class _Parsed(Protocol):
    def value(self, dest: str) -> Any: ...


@dataclass(frozen=True)
class GroupRole:
    """This process's place in a group, read from vLLM's own flags."""

    nnodes: int
    node_rank: int
    master_addr: str
    master_port: int
    headless: bool

    @property
    def leader(self) -> bool:
        return self.node_rank == 0


def role_from(parsed: _Parsed) -> GroupRole | None:
    """The group role of a parsed ``vllm serve`` line; None for a one-node server."""
    nnodes = parsed.value("nnodes")
    if not isinstance(nnodes, int) or nnodes <= 1:
        return None
    rank, port = parsed.value("node_rank"), parsed.value("master_port")
    return GroupRole(
        nnodes=nnodes,
        node_rank=rank if isinstance(rank, int) else 0,
        master_addr=str(parsed.value("master_addr") or "127.0.0.1"),
        master_port=port if isinstance(port, int) else 29501,
        headless=bool(parsed.value("headless")),
    )


class GroupError(VLLMOperatorError):
    """The group cannot form (a bad rank, the leader unreachable): vLLM exits 1."""


class Rendezvous:
    """The leader's side: accept ``nnodes - 1`` distinct workers, then watch them."""

    def __init__(self, role: GroupRole, on_lost: Callable[[str], None]) -> None:
        if role.node_rank != 0 or role.headless:
            raise GroupError("the leader is node rank 0 and not --headless")
        self.role = role
        self.joined: dict[int, asyncio.StreamWriter] = {}
        self.complete = asyncio.Event()
        self._on_lost = on_lost
        self._server: asyncio.Server | None = None

    async def open(self) -> None:
        self._server = await asyncio.start_server(
            self._member, self.role.master_addr, self.role.master_port, reuse_address=True
        )
        log.info(
            "waiting for %d worker node(s) on %s:%d",
            self.role.nnodes - 1,
            self.role.master_addr,
            self.role.master_port,
        )

    async def _member(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 30.0)
        except (TimeoutError, ConnectionError):
            writer.close()
            return
        words = line[:_LINE_LIMIT].decode(errors="replace").split()
        rank = int(words[1]) if len(words) == 2 and words[0] == "JOIN" and words[1].isdigit() else 0
        if not 0 < rank < self.role.nnodes or rank in self.joined or self.complete.is_set():
            writer.write(b"NO\n")
            writer.close()
            return
        self.joined[rank] = writer
        writer.write(b"OK\n")
        log.info("worker node %d joined (%d of %d)", rank, len(self.joined), self.role.nnodes - 1)
        if len(self.joined) == self.role.nnodes - 1:
            self.complete.set()
        with contextlib.suppress(ConnectionError):
            await reader.read()  # the worker says nothing more: EOF is its end
        if self._server is not None:  # not closed by us
            self._on_lost(f"worker node {rank} left the group: the engine fails")

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in self.joined.values():
            writer.close()


async def join(role: GroupRole, *, give_up_after: float = JOIN_TIMEOUT_SECONDS) -> int:
    """A headless worker's life: join the leader, then wait for it to end; exit status."""
    if role.leader or not role.headless:
        raise GroupError("a worker is node rank >= 1 with --headless")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + give_up_after
    while True:
        try:
            reader, writer = await asyncio.open_connection(role.master_addr, role.master_port)
            writer.write(f"JOIN {role.node_rank}\n".encode())
            answer = await asyncio.wait_for(reader.readline(), 30.0)
        except (OSError, TimeoutError):
            if loop.time() > deadline:
                log.error("no leader at %s:%d", role.master_addr, role.master_port)
                return 1
            await asyncio.sleep(RETRY_SECONDS)
            continue
        if answer.strip() != b"OK":
            log.error("the leader refused node rank %d", role.node_rank)
            return 1
        break
    log.info("joined the group as node %d of %d (headless)", role.node_rank, role.nnodes)
    with contextlib.suppress(ConnectionError):
        await reader.read()
    log.error("the leader left the group: this worker exits")
    writer.close()
    return 1
