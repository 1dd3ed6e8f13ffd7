"""A simulated Ray cluster: what the pods of a Ray group (vLLM 0.10.2, 0.11.0) run locally.

The operator's Ray group scripts (``engine.ray_group``) run ``ray start --head``, a
``python3 -c`` that polls ``ray.nodes()`` until the group's nodes are alive, then ``vllm
serve ... --distributed-executor-backend ray`` on the leader, and ``ray start --address=
<leader>:6379 --block`` on each worker. A vLLM image has ``ray`` (the 0.10.2/0.11.0 wheels
require ``ray[cgraph]``); a laptop does not. This module stands in for the parts of Ray
those scripts and vLLM's Ray executor touch, so the rendered scripts run unchanged on the
embedded cluster, as the one-node and native group pods run the simulator (``sim.group``):

- ``ray start --head --port=P``: starts the head (a background process of the pod, as
  Ray's GCS is) listening on the node's address and ``P``, writes its address where Ray
  does (``ray/ray_current_cluster`` under the temporary directory: what
  ``ray.init(address="auto")`` reads) and returns once it listens;
- ``ray start --address=A:P --block``: joins the head as a node and blocks; it exits 1
  when the head goes (Ray's ``--block`` ends once a Ray process of the node dies);
- ``import ray``: ``init``, ``nodes`` (the head and every joined node, ``Alive``) and
  ``shutdown`` (``write_ray_module`` writes the importable ``ray`` package);
- vLLM's Ray executor (``SimConfig.ray_head``, set when ``--distributed-executor-backend
  ray`` finds a running head): the engine watches the cluster, and a node that leaves
  fails it, as a dead Ray actor fails vLLM's ``RayDistributedExecutor``; the API server
  exits 1 and the LeaderWorkerSet recreates the group.

Not simulated: GPU bundles and placement groups (the leader's script already waits for
every node; ``multinode`` fixes TP x PP = nodes x gpus before anything runs).

The node's address is the pod's own: ``LWS_LEADER_ADDRESS`` on the leader, which names the
leader itself, resolved by the local kubelet to the pod's loopback address
(``devcluster.pod_dns``); 127.0.0.1 elsewhere. The wire is one line each way, then an idle
connection whose end is the signal, as in ``sim.group``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger("vllm_operator.sim")

_LINE_LIMIT = 64
LISTEN_WAIT_SECONDS = 30.0
PARENT_POLL_SECONDS = 0.5
_MODULE = """\
# ray stand-in written by vllm_operator.sim.ray_cluster (the embedded cluster's vLLM images).
from vllm_operator.sim.ray_cluster import init, is_initialized, nodes, shutdown

__version__ = "2.48.0+sim"
__all__ = ["init", "is_initialized", "nodes", "shutdown"]
"""


def address_file() -> Path:
    """Where ``ray start --head`` leaves the cluster's address (Ray: /tmp/ray/...)."""
    return Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"


def node_address(env: Mapping[str, str]) -> str:
    """This node's address: the pod's own (see the module docstring)."""
    leader = env.get("LWS_LEADER_ADDRESS", "")
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(leader).is_loopback:
            return leader
    return "127.0.0.1"


def current_head() -> tuple[str, int] | None:
    """The head this node's ``ray start --head`` left, or None (no Ray cluster here)."""
    try:
        text = address_file().read_text(encoding="utf-8")[:_LINE_LIMIT].strip()
    except OSError:
        return None
    host, _, port = text.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


def executor_head(backend: object) -> tuple[str, int] | None:
    """The cluster vLLM's Ray executor joins: with ``--distributed-executor-backend ray``,
    the one ``ray start --head`` left here (a Ray group's leader); None otherwise (without
    a running cluster, vLLM starts its own, on one node)."""
    return current_head() if backend == "ray" else None


# ---- the head -------------------------------------------------------------------------
class Head:
    """The cluster's head: counts nodes, tells watchers when one leaves."""

    def __init__(self) -> None:
        self.nodes: set[asyncio.StreamWriter] = set()
        self.watchers: set[asyncio.StreamWriter] = set()
        self.closing = False

    async def client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 30.0)
        except (TimeoutError, ConnectionError):
            writer.close()
            return
        word = line[:_LINE_LIMIT].decode(errors="replace").strip()
        if word == "NODES":
            writer.write(f"{1 + len(self.nodes)}\n".encode())
            writer.close()
            return
        if word not in ("NODE", "WATCH"):
            writer.write(b"NO\n")
            writer.close()
            return
        members = self.nodes if word == "NODE" else self.watchers
        members.add(writer)
        writer.write(b"OK\n")
        if word == "NODE":
            log.info("ray head: node joined (%d alive)", 1 + len(self.nodes))
        with contextlib.suppress(ConnectionError):
            await reader.read()
        members.discard(writer)
        if word == "NODE" and not self.closing:
            log.error("ray head: a node left the cluster (%d alive)", 1 + len(self.nodes))
            for watcher in list(self.watchers):
                with contextlib.suppress(ConnectionError):
                    watcher.write(b"LOST\n")


async def run_head(host: str, port: int, owner: int) -> None:
    """Serve the head until the process ``owner`` (the container's main process) is gone."""
    head = Head()
    server = await asyncio.start_server(head.client, host, port, reuse_address=True)
    while _alive(owner):  # noqa: ASYNC110 - another process's end sets no Event here
        await asyncio.sleep(PARENT_POLL_SECONDS)
    server.close()
    head.closing = True
    members = [*head.nodes, *head.watchers]
    for writer in members:  # every node and engine sees the head go
        writer.close()
    await asyncio.gather(*(w.wait_closed() for w in members), return_exceptions=True)
    await asyncio.sleep(0.1)  # the member tasks see their connections end


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _reachable(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1.0).close()
    except OSError:
        return False
    return True


def start_head(port: int, env: Mapping[str, str]) -> int:
    """``ray start --head``: the head in the background, its address written; exit status."""
    host = node_address(env)
    owner = str(os.getppid())  # the container's main process: the shell, later `vllm serve`
    head = subprocess.Popen(  # same process group: it goes with the pod
        [sys.executable, "-m", "vllm_operator.sim.ray_main", "head", host, str(port), owner],
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + LISTEN_WAIT_SECONDS
    while not _reachable(host, port):
        if head.poll() is not None or time.monotonic() > deadline:
            sys.stderr.write(f"ray (simulated): the head did not listen on {host}:{port}\n")
            return 1
        time.sleep(0.1)
    address_file().parent.mkdir(parents=True, exist_ok=True)
    address_file().write_text(f"{host}:{port}\n", encoding="utf-8")
    sys.stderr.write(f"Ray runtime started (simulated head at {host}:{port}).\n")
    return 0


def join_block(host: str, port: int) -> int:
    """``ray start --address=HOST:PORT --block``: a node until the head goes; exit 1."""
    try:
        conn = socket.create_connection((host, port), timeout=30.0)
    except OSError as exc:
        sys.stderr.write(f"ray (simulated): no head at {host}:{port}: {exc}\n")
        return 1
    with conn:
        conn.sendall(b"NODE\n")
        stream = conn.makefile("rb")
        if stream.readline(_LINE_LIMIT).strip() != b"OK":
            sys.stderr.write("ray (simulated): the head refused this node\n")
            return 1
        sys.stderr.write(f"joined the Ray cluster at {host}:{port} (simulated); blocking\n")
        conn.settimeout(None)
        stream.read()  # EOF: the head is gone
    sys.stderr.write("ray (simulated): the head is gone; this node stops\n")
    return 1


# ---- `import ray` ---------------------------------------------------------------------
_initialized: tuple[str, int] | None = None


def init(address: str | None = "auto", **_: object) -> None:
    """``ray.init``: connect to the running cluster (``auto``/None: the one started here)."""
    global _initialized  # noqa: PLW0603 - the module is Ray's API, which is module state
    head = current_head() if address in (None, "auto") else _split(str(address))
    if head is None:
        raise ConnectionError("ray (simulated): no running Ray cluster found")
    _initialized = head


def is_initialized() -> bool:
    return _initialized is not None


def nodes() -> list[dict[str, object]]:
    """``ray.nodes``: one entry per node of the cluster, all alive (the dead ones left)."""
    if _initialized is None:
        raise RuntimeError("ray (simulated): call ray.init() first")
    with socket.create_connection(_initialized, timeout=10.0) as conn:
        conn.sendall(b"NODES\n")
        count = conn.makefile("rb").readline(_LINE_LIMIT).strip()
    alive = int(count) if count.isdigit() else 0
    return [{"NodeID": f"sim-node-{i}", "Alive": True} for i in range(alive)]


def shutdown() -> None:
    global _initialized  # noqa: PLW0603
    _initialized = None


def _split(address: str) -> tuple[str, int] | None:
    host, _, port = address.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


def write_ray_module(site: Path) -> Path:
    """Write the importable ``ray`` stand-in package into ``site``; return ``site``."""
    package = site / "ray"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(_MODULE, encoding="utf-8")
    return site


# ---- vLLM's Ray executor --------------------------------------------------------------
class ClusterWatch:
    """The engine's view of its Ray cluster: ``on_lost`` once a node leaves it."""

    def __init__(self, head: tuple[str, int], on_lost: Callable[[str], None]) -> None:
        self.head = head
        self._on_lost = on_lost
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        reader, writer = await asyncio.open_connection(*self.head)
        writer.write(b"WATCH\n")
        if (await asyncio.wait_for(reader.readline(), 30.0)).strip() != b"OK":
            raise ConnectionError("the Ray head refused the engine")
        self._writer = writer
        self._task = asyncio.get_running_loop().create_task(self._follow(reader))
        log.info("Ray executor: connected to the Ray cluster at %s:%d", *self.head)

    async def _follow(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError):
            line = await reader.readline()
            if self._writer is not None:  # not closed by us
                why = "a Ray node left" if line.strip() == b"LOST" else "the Ray head is gone"
                self._on_lost(f"{why}: its actors died and the engine fails")

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        if self._task is not None:
            self._task.cancel()


# ---- the `ray` command ----------------------------------------------------------------
def main(argv: list[str]) -> int:
    """``ray start --head --port=P`` or ``ray start --address=A:P --block``; also the
    head's own process (``head HOST PORT OWNER``)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if argv[:1] == ["head"] and len(argv) == 4 and argv[2].isdigit() and argv[3].isdigit():
        asyncio.run(run_head(argv[1], int(argv[2]), int(argv[3])))
        return 0
    flags = dict(_flags(argv[1:])) if argv[:1] == ["start"] else {}
    if "head" in flags:
        port = flags.get("port", "6379")
        return start_head(int(port), os.environ) if port.isdigit() else 2
    head = _split(flags.get("address", ""))
    if head is not None and "block" in flags:
        return join_block(*head)
    sys.stderr.write(
        "ray (simulated): only `ray start --head --port=P` and "
        "`ray start --address=HOST:PORT --block` are played here\n"
    )
    return 2


def _flags(argv: list[str]) -> list[tuple[str, str]]:
    out = []
    for item in argv:
        if item.startswith("--"):
            name, _, value = item[2:].partition("=")
            out.append((name, value))
    return out
