"""Native sidecars on the local kubelet: init containers with ``restartPolicy: Always``.

Kubernetes starts such a container before the pod's main containers and stops it after they
have exited, which is how a Job can carry a helper and still complete. The benchmark Job's
python-tests sandbox is one (``render.job.sandbox_container``). Here each sidecar is a local
process in its own process group, started before the main container and stopped (SIGTERM,
then SIGKILL after the grace period) when the main container has exited. Not emulated: a
sidecar that exits is not restarted (the benchmark then reports its checks as not run).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from devcluster.kubelet_launch import Launch


async def start_sidecars(launches: list[Launch]) -> list[asyncio.subprocess.Process]:
    """Start one process per sidecar launch; logs and termination files are its own."""
    procs = []
    for side in launches:
        side.termination_path.write_text("")
        with side.log_path.open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                *side.argv,
                env=side.env,
                cwd=side.cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        procs.append(proc)
    return procs


async def stop_sidecars(procs: list[asyncio.subprocess.Process], grace: float) -> None:
    """SIGTERM every sidecar's process group, SIGKILL what is left after ``grace`` s."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.returncode is None:
            await proc.wait()
