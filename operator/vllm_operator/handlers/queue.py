"""A keyed work queue: many triggers, one reconcile at a time per resource.

kopf delivers events of the resource and of its Deployments, Jobs and Pods on separate
streams; each only names the resource to look at. The queue coalesces them (a resource
already queued is not queued twice), never runs one resource's reconcile twice at once
(an event arriving mid-pass marks it dirty and it runs again after), bounds concurrency
with a fixed number of workers, and re-adds a resource after the delay its plan asked for
or after an error (with back-off). Level-triggered: losing an event costs at most one
resync period, never a wrong decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

Key = tuple[str, str]  # (namespace, name)
Worker = Callable[[Key], Awaitable[float | None]]

logger = logging.getLogger(__name__)

ERROR_BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class WorkQueue:
    """Runs ``worker(key)`` for added keys; see the module docstring for the guarantees."""

    def __init__(self, worker: Worker, *, workers: int = 8) -> None:
        self._worker = worker
        self._workers = workers
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._active: set[Key] = set()
        self._dirty: set[Key] = set()
        self._timers: dict[Key, tuple[float, asyncio.TimerHandle]] = {}
        self._failures: dict[Key, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._idle = asyncio.Event()  # set whenever no reconcile is running
        self._idle.set()
        self.known: set[Key] = set()

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._run(), name=f"vllm-operator-worker-{i}")
            for i in range(self._workers)
        ]

    async def stop(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def drain(self, grace: float) -> bool:
        """Graceful stop: take no new key, let the reconciles in flight finish for at most
        ``grace`` seconds, then stop. True when none had to be cancelled."""
        self._closing = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace)
        finished = not self._active
        await self.stop()
        return finished

    def add(self, key: Key) -> None:
        """Reconcile ``key`` as soon as a worker is free (once, however often it is added)."""
        if key in self._active:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: Key, delay: float) -> None:
        """Reconcile ``key`` after ``delay`` seconds (the earliest request wins)."""
        if delay <= 0:
            self.add(key)
            return
        due = time.monotonic() + delay
        current = self._timers.get(key)
        if current is not None:
            if current[0] <= due:
                return
            current[1].cancel()
        handle = asyncio.get_running_loop().call_later(delay, self._fire, key)
        self._timers[key] = (due, handle)

    def _fire(self, key: Key) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def forget(self, key: Key) -> None:
        self.known.discard(key)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer[1].cancel()
        self._failures.pop(key, None)

    def resync(self) -> None:
        for key in list(self.known):
            self.add(key)

    @property
    def idle(self) -> bool:
        return not self._queued and not self._active and not self._dirty

    async def _run(self) -> None:
        while True:
            key = await self._queue.get()
            if self._closing:
                return
            self._queued.discard(key)
            self._active.add(key)
            self._idle.clear()
            delay: float | None
            try:
                delay = await self._worker(key)
                self._failures.pop(key, None)
            except asyncio.CancelledError:
                raise
            except Exception:
                count = self._failures.get(key, 0)
                self._failures[key] = count + 1
                delay = ERROR_BACKOFF[min(count, len(ERROR_BACKOFF) - 1)]
                logger.exception("reconcile of %s/%s failed; retrying in %.1f s", *key, delay)
            finally:
                self._active.discard(key)
                if not self._active:
                    self._idle.set()
            if key in self._dirty:
                self._dirty.discard(key)
                self.add(key)
            if delay is not None:
                self.add_after(key, delay)
