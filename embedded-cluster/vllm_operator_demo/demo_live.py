"""The demo's live users: requests through the serving Service during every step, counted.

A canary is judged on real traffic, and "no request fails because of a switch" is only a
claim until someone sends requests across the switches. The demo therefore keeps a few
users (``live_users.LiveUsers``, in a process of their own) sending small completions
through the serving Service's local proxy for the whole story, from the moment a revision
serves, streamed as chat clients ask for them (so a failure can come after the 200 header, as
vLLM's do), and prints per step how many requests they sent and why any failed: injected by the
simulator under live traffic (step 4's candidate, on purpose) or broken by a traffic switch
(never expected).
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from vllm_operator_demo.live_users import LiveUsers, Sent, services_address

USERS = 2
PAUSE_SECONDS = 0.5
"""Each user's pause between requests: about 4 requests a second in all, enough for a
canary step of 30 s (minRequests 40 per revision, half the traffic each), and little enough
load that the benchmarks of steps 2-3 stay decisive on a loaded 2-core machine (every live
request is proxied by the in-process kubelet the benchmark's requests go through too; at ~70
requests a second step 2's gate ran out of trials there, and at ~8 step 3's)."""


class ServingAddress:
    """Where the serving Service answers on this machine, once the kubelet publishes it
    (the operator creates the Service when a first revision is Ready: before that the
    users wait, as users of a new service do)."""

    def __init__(self, kubelet_workdir: Path, name: str, namespace: str, port: int) -> None:
        self.where = (kubelet_workdir, namespace, name, port)

    def __call__(self) -> str | None:
        return services_address(*self.where)


def _users_process(
    where: tuple[Path, str, str, int], model: str, conn: Connection
) -> None:  # pragma: no cover - runs in the child process
    """The child: live users until told to stop, answering each snapshot request."""
    users = LiveUsers(
        ServingAddress(*where), model=model, users=USERS, pause=PAUSE_SECONDS, stream=True
    )
    with users:
        while True:
            command = conn.recv()
            if command == "stop":
                break
            conn.send(users.snapshot())
    conn.send(users.snapshot())


class LiveUsersProcess:
    """``LiveUsers`` in a process of their own: the demo's operator, API server and kubelet
    (whose Service proxies carry the benchmark's requests too) share one interpreter lock,
    and a client thread there would add its waits to every short request measured (the
    rollout tests host their kubelet in a process of its own for the same reason)."""

    def __init__(self, where: tuple[Path, str, str, int], model: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(
            target=_users_process, args=(where, model, child), name="live-users", daemon=True
        )
        self._last: list[Sent] = []

    def __enter__(self) -> LiveUsersProcess:
        self._process.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._process.is_alive():
            with contextlib.suppress(OSError, EOFError):
                self._conn.send("stop")
                if self._conn.poll(60):
                    self._last = self._conn.recv()
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)

    def snapshot(self) -> list[Sent]:
        """Every request sent so far (after the users stopped: all of them)."""
        if self._process.is_alive():
            with contextlib.suppress(OSError, EOFError):
                self._conn.send("snapshot")
                if self._conn.poll(60):
                    self._last = self._conn.recv()
        return list(self._last)


def live_users(kubelet_workdir: Path, name: str, namespace: str, model: str) -> LiveUsersProcess:
    """The demo's users of the serving Service of ``name`` (port 8000, the spec's default)."""
    return LiveUsersProcess((kubelet_workdir, name, namespace, 8000), model)


@dataclass(frozen=True)
class StepTraffic:
    """What the live users saw during one step."""

    requests: int
    failed: int
    injected: int
    """... of the failed, those the simulator failed on purpose (a live-only fault)."""
    broken: int = 0
    """... of the failed, streams that ended in an error chunk after their 200 header."""

    @property
    def switch_failures(self) -> int:
        """Failed for another reason: the traffic's path broke (a switch, a pod going)."""
        return self.failed - self.injected

    @classmethod
    def of(cls, sent: Sequence[Sent]) -> StepTraffic:
        failed = [s for s in sent if not s.ok]
        injected = sum(1 for s in failed if s.injected)
        return cls(len(sent), len(failed), injected, sum(1 for s in failed if s.broken))

    def line(self, number: int) -> str:
        if not self.requests:
            return f"live users: no requests during step {number} (nothing served yet)"
        text = f"live users: {self.requests} requests during step {number}, {self.failed} failed"
        if self.failed:
            text += (
                f" ({self.broken} streams broken after the 200 header; {self.injected} "
                f"injected by the simulator under live traffic, {self.switch_failures} by a "
                "traffic switch)"
            )
        return text
