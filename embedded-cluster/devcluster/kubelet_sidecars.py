"""Native sidecars on the local kubelet: init containers with ``restartPolicy: Always``.

Kubernetes starts such a container before the pod's main containers, restarts it when it
exits while they run (its ``restartCount`` grows, its ``lastState`` says how it ended) and
stops it after they have exited, which is how a Job can carry a helper and still complete.
The benchmark Job's python-tests sandbox is one (``render.job.sandbox_container``); a mesh's
proxy (``kubelet_faults.Faults.mesh_sidecars``) is another. Here each sidecar is a local
process in its own process group, started before the main container, restarted after the
kubelet's back-off (10 s doubling to 300 s, time-scaled) when it exits on its own, and
stopped (SIGTERM, then SIGKILL after the grace period) when the main container has exited.
The pod reports each in ``initContainerStatuses``; the pod is Ready only while every
sidecar runs, as Kubernetes counts a native sidecar's readiness.

``crash_sidecar`` is the test seam: it kills a running sidecar's process group from any
process (the rollout tests host the kubelet in a child process), as the OOM killer or a
crash would; the kubelet then sees it exit and restarts it. Each sidecar's pid is written to
``<pod dir>/sidecars/<container>.pid`` for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devcluster import hostpaths
from devcluster.kubelet_controllers import rfc3339
from devcluster.kubelet_launch import Launch

Obj = dict[str, Any]
PID_DIR = "sidecars"


def is_sidecar(container: Obj) -> bool:
    """A native sidecar: an init container that Kubernetes keeps running."""
    return container.get("restartPolicy") == "Always"


@dataclass
class Sidecar:
    """One sidecar container and the instance of it that runs now."""

    container: Obj
    launch: Launch
    proc: asyncio.subprocess.Process | None = None
    restart_count: int = 0
    state: Obj = field(default_factory=lambda: {"waiting": {"reason": "PodInitializing"}})
    last_state: Obj = field(default_factory=dict)
    started_at: float = 0.0

    @property
    def name(self) -> str:
        return str(self.container.get("name") or "sidecar")

    @property
    def running(self) -> bool:
        return "running" in self.state

    def status(self) -> Obj:
        return {
            "name": self.name,
            "image": self.container.get("image", ""),
            "imageID": "",
            "ready": self.running,
            "started": self.running,
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }


class Sidecars:
    """A pod's native sidecars: started with its main container, restarted when they exit
    on their own, stopped after it."""

    def __init__(
        self,
        poddir: Path,
        *,
        time_scale: float,
        grace_seconds: float,
        on_change: Callable[[], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.poddir = poddir
        self.time_scale = time_scale
        self.grace_seconds = grace_seconds
        self._notify = on_change
        self._clock = clock
        self.sidecars: list[Sidecar] = []
        self._watchers: list[asyncio.Task[None]] = []

    def prepare(self, launches: list[tuple[Obj, Launch]]) -> None:
        self.sidecars = [Sidecar(container, launch) for container, launch in launches]

    @property
    def ready(self) -> bool:
        return all(side.running for side in self.sidecars)

    @property
    def pids(self) -> list[int]:
        return [
            side.proc.pid
            for side in self.sidecars
            if side.proc is not None and side.proc.returncode is None
        ]

    def statuses(self) -> list[Obj]:
        return [side.status() for side in self.sidecars]

    async def start(self) -> None:
        """Start every sidecar, and watch each for an exit of its own."""
        for side in self.sidecars:
            await self._spawn(side)
            self._watchers.append(asyncio.get_running_loop().create_task(self._watch(side)))

    async def stop(self) -> None:
        """SIGTERM every sidecar's process group, SIGKILL what is left after the grace."""
        watchers, self._watchers = self._watchers, []
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        procs = [side.proc for side in self.sidecars if side.proc is not None]
        for proc in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), self.grace_seconds)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.returncode is None:
                await proc.wait()
        for side in self.sidecars:
            if side.proc is not None and side.running:
                side.state = _terminated(side, side.proc.returncode or 0, self._clock())
            side.proc = None

    async def _spawn(self, side: Sidecar) -> None:
        hostpaths.write_text(side.launch.termination_path, "")
        with hostpaths.open_append(side.launch.log_path) as log:
            side.proc = await asyncio.create_subprocess_exec(
                *side.launch.argv,
                env=side.launch.env,
                cwd=side.launch.cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        side.started_at = self._clock()
        pids = hostpaths.inside(self.poddir, PID_DIR, "sidecars")
        pids.mkdir(parents=True, exist_ok=True)
        pid_file = hostpaths.inside(pids, f"{side.name}.pid", "container name")
        hostpaths.write_text(pid_file, str(side.proc.pid))
        side.state = {"running": {"startedAt": rfc3339(side.started_at)}}
        self._notify()

    async def _watch(self, side: Sidecar) -> None:
        """Restart ``side`` each time it exits while the pod runs (cancelled at stop)."""
        while side.proc is not None:
            code = await side.proc.wait()
            side.restart_count += 1
            side.last_state = _terminated(side, code, self._clock())
            delay = min(10.0 * 2 ** (side.restart_count - 1), 300.0)
            side.state = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off {int(delay)}s restarting failed container={side.name}",
                }
            }
            self._notify()
            await asyncio.sleep(delay * self.time_scale)
            await self._spawn(side)


def _terminated(side: Sidecar, code: int, now: float) -> Obj:
    """``state.terminated`` of an instance that ended with ``code`` (-N: signal N)."""
    return {
        "terminated": {
            "exitCode": code if code >= 0 else 128 - code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": rfc3339(side.started_at),
            "finishedAt": rfc3339(now),
        }
    }


def crash_sidecar(kubelet_workdir: Path, namespace: str, pod: str, container: str) -> int:
    """Kill the running instance of sidecar ``container`` of ``pod`` (SIGKILL to its
    process group, as the OOM killer would); the kubelet restarts it. Returns the pid."""
    poddir = (Path(kubelet_workdir) / namespace / pod).resolve()
    pid = int(hostpaths.read_text(poddir / PID_DIR / f"{container}.pid").strip())
    cwd = Path(os.readlink(f"/proc/{pid}/cwd"))  # never a stranger that took a stale pid
    if not hostpaths.within(cwd, poddir):
        raise ProcessLookupError(f"pid {pid} is not sidecar {container} of pod {pod}")
    os.killpg(pid, signal.SIGKILL)
    return pid
