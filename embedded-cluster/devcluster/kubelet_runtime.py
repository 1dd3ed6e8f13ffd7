"""One pod's life on this machine: its process, probes, restarts and the status it reports.

This is the part of the kubelet that makes rendering mistakes visible: the pod runs the
container's real command and args with its real env, probes hit the real port, a process
that exits becomes ``state.terminated`` with the container's termination message, and an
``Always`` pod that keeps exiting sits in ``CrashLoopBackOff`` with the last message, as a
vLLM pod launched with a wrong flag would. Each instance runs in its own process group so
stopping a pod (or the kubelet) kills everything it started, children included.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from devcluster import hostpaths
from devcluster.kubelet_controllers import rfc3339
from devcluster.kubelet_launch import Launch, LaunchContext, prepare_launch
from devcluster.kubelet_sidecars import Sidecars, is_sidecar

Obj = dict[str, Any]
MESSAGE_LIMIT = 4096
FALLBACK_LINES = 80
FALLBACK_BYTES = 2048


@dataclass(frozen=True)
class RuntimeConfig:
    """Timing and injected faults for one pod."""

    time_scale: float = 1.0  # restart back-off (10 s doubling to 300 s)
    probe_time_scale: float = 1.0  # probe initialDelay and period
    never_ready: bool = False  # readiness always fails (a stuck candidate)
    image_fault: str | None = None  # ImagePullBackOff message; the container never starts
    interrupted: bool = False  # the process's end is reported as SIGINT (exit 130)
    grace_seconds: float = 2.0  # SIGTERM -> SIGKILL


@dataclass
class Instance:
    """The container as ``containerStatuses[0]`` describes it."""

    state: Obj
    last_state: Obj
    restart_count: int = 0
    started: bool = False
    ready: bool = False


def _tail(path: Path, lines: int) -> str:
    """Kubernetes' FallbackToLogsOnError: the last 80 lines or 2048 bytes, the smaller."""
    try:
        data = hostpaths.read_text(path, 64 * 1024)
    except OSError:
        return ""
    text = data.rstrip("\n").splitlines()[-lines:]
    return "\n".join(text)[-FALLBACK_BYTES:]


class PodRuntime:
    """Runs one pod's first container until stopped; reports through ``status()``."""

    def __init__(
        self,
        pod: Obj,
        poddir: Path,
        *,
        ctx: LaunchContext,
        config: RuntimeConfig,
        probe_client: httpx.AsyncClient,
        on_change: Callable[[], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pod = pod
        self.poddir = poddir
        self.ctx = ctx
        self.config = config
        self._http = probe_client
        self._notify = on_change
        self._clock = clock
        spec = pod.get("spec") or {}
        self.container: Obj = (spec.get("containers") or [{}])[0]
        # Native sidecars (init containers with restartPolicy Always, e.g. the benchmark
        # Job's python-tests sandbox, a mesh's proxy) run beside the main container.
        self.sidecars: list[Obj] = [c for c in spec.get("initContainers") or [] if is_sidecar(c)]
        self._sidecars = Sidecars(
            poddir,
            time_scale=config.time_scale,
            grace_seconds=config.grace_seconds,
            on_change=on_change,
            clock=clock,
        )
        self.restart_policy = str(spec.get("restartPolicy") or "Always")
        self.instance = Instance(state={"waiting": {"reason": "ContainerCreating"}}, last_state={})
        self.scheduled = False
        self.unschedulable: str | None = None
        self.final_phase: str | None = None
        self.launch: Launch | None = None
        self.start_time: float | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None
        self._kill_reason: str | None = None
        self._start_error: str | None = None  # the program could not be executed
        self._started_at = 0.0

    # ---- what the kubelet reads -------------------------------------------------------
    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def address(self) -> str | None:
        if self.launch is None or self.launch.port is None:
            return None
        return f"127.0.0.1:{self.launch.port}"

    def local_port(self, container_port: int | str) -> int | None:
        if self.launch is None:
            return None
        return self.launch.container_ports.get(str(container_port), self.launch.port)

    @property
    def ready(self) -> bool:
        """The pod's readiness: its main container's, and every native sidecar running."""
        return self.instance.ready and "running" in self.instance.state and self._sidecars.ready

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.returncode is None else None

    def status(self) -> Obj:
        conds: list[Obj] = []
        if not self.scheduled:
            conds.append(
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": self.unschedulable or "0/1 nodes are available.",
                }
            )
            return {"phase": "Pending", "conditions": conds, "qosClass": "Burstable"}
        ready = "True" if self.ready else "False"
        conds = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": ready},
            {"type": "Ready", "status": ready},
        ]
        inst = self.instance
        if self.final_phase:
            phase = self.final_phase
        elif inst.restart_count == 0 and "waiting" in inst.state:
            phase = "Pending"
        else:
            phase = "Running"
        cstatus: Obj = {
            "name": self.container.get("name", "main"),
            "image": self.container.get("image", ""),
            "imageID": "",
            "ready": self.instance.ready and "running" in inst.state,
            "started": inst.started,
            "restartCount": inst.restart_count,
            "state": inst.state,
            "lastState": inst.last_state,
        }
        status: Obj = {
            "phase": phase,
            "conditions": conds,
            "containerStatuses": [cstatus],
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "qosClass": "Burstable",
        }
        if self.sidecars:
            status["initContainerStatuses"] = self._sidecars.statuses()
        if self.start_time is not None:
            status["startTime"] = rfc3339(self.start_time)
        return status

    # ---- lifecycle --------------------------------------------------------------------
    def schedule(self) -> None:
        """Bind to the (only) node and start the container task."""
        if self.scheduled:
            return
        self.scheduled = True
        self.unschedulable = None
        self.start_time = self._clock()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"pod {self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._kill()
        await self._stop_sidecars()

    def _set(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self.instance, key, value)
        self._notify()

    async def _run(self) -> None:
        image = str(self.container.get("image", ""))
        if self.config.image_fault is not None:
            self._set(
                state={"waiting": {"reason": "ErrImagePull", "message": self.config.image_fault}}
            )
            await asyncio.sleep(0.05)
            self._set(
                state={
                    "waiting": {
                        "reason": "ImagePullBackOff",
                        "message": f'Back-off pulling image "{image}"',
                    }
                }
            )
            return
        try:
            self.launch = prepare_launch(self.pod, self.poddir, self.ctx)
            self._sidecars.prepare(
                [(c, prepare_launch(self.pod, self.poddir, self.ctx, c)) for c in self.sidecars]
            )
        except (OSError, ValueError, KeyError) as exc:
            self._set(
                state={"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}
            )
            return
        while True:
            code = await self._run_once(self.launch)
            terminated = self._terminated(code)
            if self.restart_policy == "Never" or (self.restart_policy == "OnFailure" and code == 0):
                self.final_phase = "Succeeded" if code == 0 else "Failed"
                self._set(state={"terminated": terminated}, started=False, ready=False)
                return
            count = self.instance.restart_count + 1
            delay = min(10.0 * 2 ** (count - 1), 300.0)
            msg = (
                f"back-off {int(delay)}s restarting failed container="
                f"{self.container.get('name', 'main')} pod={self.name}"
            )
            if terminated.get("message"):
                msg += f": {terminated['message'].strip().splitlines()[-1]}"
            self._set(
                state={"waiting": {"reason": "CrashLoopBackOff", "message": msg}},
                last_state={"terminated": terminated},
                restart_count=count,
                started=False,
                ready=False,
            )
            await asyncio.sleep(delay * self.config.time_scale)

    async def _run_once(self, launch: Launch) -> int:
        previous = launch.log_path.with_suffix(".previous.log")
        if launch.log_path.exists():
            launch.log_path.replace(previous)
        hostpaths.write_text(launch.termination_path, "")  # never through a symlink
        self._kill_reason = None
        self._start_error = None
        await self._start_sidecars()
        with hostpaths.open_append(launch.log_path) as log:
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    *launch.argv,
                    env=launch.env,
                    cwd=launch.cwd,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:  # no such program on this host (or in the image hooks)
                self._started_at = self._clock()
                self._proc = None
                program = launch.argv[0] if launch.argv else ""
                self._start_error = f'exec: "{program}": {exc.strerror or exc}'
                await self._stop_sidecars()
                return 128  # what containerd reports for a container that could not start
        self._started_at = self._clock()
        has_startup = bool(self.container.get("startupProbe"))
        self._set(
            state={"running": {"startedAt": rfc3339(self._started_at)}}, started=not has_startup
        )
        probes = asyncio.get_running_loop().create_task(self._probes(launch))
        try:
            code = await self._proc.wait()
            if self.config.interrupted:
                code = -signal.SIGINT
        finally:
            probes.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probes
            await self._kill()
            await self._stop_sidecars()
        return code

    async def _start_sidecars(self) -> None:
        await self._sidecars.start()

    async def _stop_sidecars(self) -> None:
        await self._sidecars.stop()

    @property
    def sidecar_pids(self) -> list[int]:
        return self._sidecars.pids

    def _terminated(self, code: int) -> Obj:
        assert self.launch is not None
        message = ""
        with contextlib.suppress(OSError):
            message = hostpaths.read_text(self.launch.termination_path)[:MESSAGE_LIMIT]
        policy = self.container.get("terminationMessagePolicy") or "File"
        if not message and code != 0 and policy == "FallbackToLogsOnError":
            message = _tail(self.launch.log_path, FALLBACK_LINES)
        if self._kill_reason and not message:
            message = self._kill_reason
        if self._start_error:
            message = self._start_error
        out: Obj = {
            "exitCode": code if code >= 0 else 128 - code,
            "reason": "StartError" if self._start_error else "Completed" if code == 0 else "Error",
            "startedAt": rfc3339(self._started_at),
            "finishedAt": rfc3339(self._clock()),
        }
        if message:
            out["message"] = message
        return out

    async def _kill(self) -> None:
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        if proc.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), self.config.grace_seconds)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # children that outlived the main process
        if proc.returncode is None:
            await proc.wait()

    # ---- probes -----------------------------------------------------------------------
    async def _check(self, probe: Obj, launch: Launch) -> bool:
        timeout = max(float(probe.get("timeoutSeconds", 1)) * self.config.probe_time_scale, 0.5)
        if "httpGet" in probe:
            get = probe["httpGet"]
            port = self.local_port(get.get("port", "")) or launch.port
            url = f"http://127.0.0.1:{port}{get.get('path', '/')}"
            try:
                resp = await self._http.get(url, timeout=timeout)
            except httpx.HTTPError:
                return False
            return 200 <= resp.status_code < 400
        if "tcpSocket" in probe:
            port = self.local_port(probe["tcpSocket"].get("port", "")) or launch.port
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port), timeout
                )
            except (OSError, TimeoutError):
                return False
            writer.close()
            return True
        return True  # exec probes are not emulated: they pass

    def _period(self, probe: Obj) -> float:
        return max(float(probe.get("periodSeconds", 10)) * self.config.probe_time_scale, 0.02)

    async def _probe_loop(self, probe: Obj, launch: Launch, kind: str) -> None:
        await asyncio.sleep(
            float(probe.get("initialDelaySeconds", 0)) * self.config.probe_time_scale
        )
        failure_threshold = int(probe.get("failureThreshold", 3))
        success_threshold = int(probe.get("successThreshold", 1))
        fails = oks = 0
        while True:
            ok = await self._check(probe, launch)
            if kind == "readiness" and self.config.never_ready:
                ok = False
            fails, oks = (0, oks + 1) if ok else (fails + 1, 0)
            if kind == "startup":
                if ok:
                    self._set(started=True)
                    return
                if fails >= failure_threshold:
                    await self._probe_kill("Startup probe failed")
                    return
            elif kind == "liveness" and fails >= failure_threshold:
                await self._probe_kill("Liveness probe failed")
                return
            elif kind == "readiness":
                if oks >= success_threshold and not self.instance.ready:
                    self._set(ready=True)
                elif fails >= failure_threshold and self.instance.ready:
                    self._set(ready=False)
            await asyncio.sleep(self._period(probe))

    async def _probe_kill(self, reason: str) -> None:
        self._kill_reason = reason
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)

    async def _probes(self, launch: Launch) -> None:
        startup = self.container.get("startupProbe")
        if startup:
            await self._probe_loop(startup, launch, "startup")
            if not self.instance.started:
                return
        tasks = []
        readiness = self.container.get("readinessProbe")
        if readiness:
            tasks.append(self._probe_loop(readiness, launch, "readiness"))
        elif not self.config.never_ready:
            self._set(ready=True)
        liveness = self.container.get("livenessProbe")
        if liveness:
            tasks.append(self._probe_loop(liveness, launch, "liveness"))
        if tasks:
            await asyncio.gather(*tasks)
