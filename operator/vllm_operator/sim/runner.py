"""Running a simulator: warm-up, bind, serve; in this loop, in a thread, or as a process.

Why the order matters: a real vLLM does not listen while it loads and compiles, so probes
see "connection refused" until it is ready; the simulator sleeps its warm-up *before*
binding the socket, then checks the start-up failures of its version, then listens.

Three ways to run one, for three kinds of callers:
* ``async with SimServer(config) as sim:`` / ``await serve(config)``: in the caller's loop;
* ``with SimThread(config) as sim:``: its own loop in a background thread (sync tests);
* ``SimProcess.start([...argv])``: ``python -m vllm_operator.sim`` as a child process,
  with the bound port read from its ``SIM LISTENING http://HOST:PORT`` stdout line.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import IO, Any

from aiohttp import web

from vllm_operator.sim import group, ray_cluster
from vllm_operator.sim.config import SimConfig
from vllm_operator.sim.server import build_app
from vllm_operator.sim.startup import StartupFailure, check_cublas, warmup_stages
from vllm_operator.sim.state import SimState

log = logging.getLogger("vllm_operator.sim")
LISTENING_PREFIX = "SIM LISTENING "
CRASH_EXIT_CODE = 1


class SimServer:
    """One simulator in the running event loop."""

    def __init__(
        self,
        config: SimConfig,
        *,
        wall: Callable[[], float] = time.time,
        exit_on_crash: bool = False,
    ) -> None:
        self.config = config
        self.state = SimState(config, wall=wall)
        self.state.crash = self._crash
        self._runner: web.AppRunner | None = None
        self._exit_on_crash = exit_on_crash
        self._rendezvous: group.Rendezvous | None = None
        self._ray: ray_cluster.ClusterWatch | None = None
        self.url = ""

    async def start(self) -> str:
        """Warm up (not listening), fail like vLLM would, then listen; return the base URL."""
        cfg = self.config
        log.info(
            "vLLM API server version %s (simulated), model %s, profile %s, warm-up %.2f s",
            cfg.version,
            cfg.model,
            cfg.profile.name,
            cfg.warmup_seconds,
        )
        if cfg.group is not None:  # a group's leader: its engine starts once all joined
            self._rendezvous = group.Rendezvous(cfg.group, self._member_lost)
            await self._rendezvous.open()
            await self._rendezvous.complete.wait()
        if cfg.ray_head is not None:  # a Ray group's leader: the engine's actors on the nodes
            self._ray = ray_cluster.ClusterWatch(cfg.ray_head, self._member_lost)
            await self._ray.open()
        if cfg.warmup_seconds > 0:
            for seconds, text in warmup_stages(cfg.profile.mode, cfg.warmup_seconds):
                log.info("%s (%.1f s)", text, seconds)
                await asyncio.sleep(seconds)
        check_cublas(cfg.version, cfg.ld_library_path)
        runner = web.AppRunner(
            build_app(self.state),
            access_log=None,
            handle_signals=False,
            keepalive_timeout=cfg.keep_alive_seconds,  # idle connections close, as in vLLM
        )
        await runner.setup()
        site = web.TCPSite(runner, cfg.host, cfg.port, reuse_address=True)
        await site.start()
        self._runner = runner
        host, port = runner.addresses[0][:2]
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        self.url = f"http://{host}:{port}"
        log.info("Starting vLLM API server on %s", self.url)
        if cfg.faults.die_after_seconds is not None:
            asyncio.get_running_loop().call_later(cfg.faults.die_after_seconds, self._die)
        if cfg.faults.crash_after_seconds is not None:
            asyncio.get_running_loop().call_later(cfg.faults.crash_after_seconds, self._crash)
        return self.url

    def _crash(self) -> None:
        """The server crashes: a process exits at once (status 1, nothing flushed, every
        connection reset), as one the OOM killer or a fatal error ended; in a thread the
        engine dies and the server stops listening."""
        log.error("the server crashed (simulated: --sim-crash-after-seconds or /sim/live-faults)")
        if self._exit_on_crash:
            os._exit(CRASH_EXIT_CODE)
        self.state.dead = True
        asyncio.get_running_loop().create_task(self.stop())

    def _member_lost(self, why: str) -> None:
        log.error("%s", why)
        self._crash()

    def _die(self) -> None:
        self.state.dead = True
        log.error("EngineCore encountered a fatal error (simulated: --sim-die-after-seconds)")

    async def stop(self) -> None:
        rendezvous, self._rendezvous = self._rendezvous, None
        if rendezvous is not None:
            await rendezvous.close()
        ray, self._ray = self._ray, None
        if ray is not None:
            await ray.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def serve(
    config: SimConfig,
    *,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Run a simulator until ``stop`` is set (forever without one).

    Raises :class:`~vllm_operator.sim.startup.StartupFailure` where vLLM would exit. A
    headless worker of a group serves nothing: it joins its leader (``sim.group``).
    """
    if config.group is not None and not config.group.leader:
        await _work(config.group, stop)
        return
    server = SimServer(config, exit_on_crash=True)  # a process of its own: a crash exits it
    starting = asyncio.create_task(server.start())
    if stop is not None:  # a SIGTERM during the warm-up ends the process promptly
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
            await server.stop()
            return
        stopping.cancel()
    await starting
    try:
        if on_listening is not None:
            on_listening(server.url)
        if ready is not None:
            ready.set()
        await (stop or asyncio.Event()).wait()
    finally:
        await server.stop()


async def _work(role: group.GroupRole, stop: asyncio.Event | None) -> None:
    """A headless worker until ``stop``; a group that ends or never forms exits 1."""
    working = asyncio.create_task(group.join(role))
    waits: set[asyncio.Future[Any]] = {working}
    if stop is not None:
        waits.add(asyncio.ensure_future(stop.wait()))
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    ended = working.done()
    for task in waits:
        task.cancel()
    await asyncio.gather(*waits, return_exceptions=True)
    if ended:
        raise StartupFailure(f"the group of node rank {role.node_rank} ended", working.result())


class SimThread:
    """A simulator on its own event loop in a daemon thread (for synchronous callers)."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.url = ""
        self.server: SimServer | None = None
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="vllm-sim", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self.server = SimServer(self.config)
        try:
            self.url = await self.server.start()
        except BaseException as e:
            self._error = e
            self._started.set()
            return
        self._started.set()
        await self._stop.wait()
        await self.server.stop()

    def start(self, timeout: float | None = None) -> str:
        """Start and wait (by default the warm-up plus 30 s) until it listens."""
        self._thread.start()
        if timeout is None:
            timeout = self.config.warmup_seconds + 30.0
        if not self._started.wait(timeout):
            raise TimeoutError("simulator did not start in time")
        if self._error is not None:
            raise self._error
        return self.url

    def close(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    def __enter__(self) -> SimThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SimProcess:
    """``python -m vllm_operator.sim ARGV`` as a child process."""

    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        prefix: Sequence[str] = (),
        stderr: int | IO[Any] | None = None,
    ) -> SimProcess:
        """Start it and wait for its listening line; ``prefix`` e.g. ``["taskset", "-c", "0"]``.

        Raises ``RuntimeError`` (with the exit status) if it exits first.
        """
        cmd = [*prefix, sys.executable, "-m", "vllm_operator.sim", *argv]
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=dict(os.environ if env is None else env),
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def drain() -> None:  # keeps reading so the child never blocks on a full pipe
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=drain, name="vllm-sim-stdout", daemon=True).start()
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise RuntimeError(f"simulator exited with status {proc.wait()}")
            if line.startswith(LISTENING_PREFIX):
                return cls(proc, line[len(LISTENING_PREFIX) :].strip())
        proc.kill()
        proc.wait()
        raise TimeoutError("simulator did not report its address in time")

    def stop(self) -> int:
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
