"""Graceful shutdown of the work queue: the reconcile in flight finishes, nothing new starts,
and the wait is bounded by the grace period."""

from __future__ import annotations

import asyncio

from vllm_operator.handlers.queue import Key, WorkQueue


async def test_drain_waits_for_the_reconcile_in_flight_and_starts_no_other() -> None:
    started: list[Key] = []
    finished: list[Key] = []
    release, running = asyncio.Event(), asyncio.Event()

    async def worker(key: Key) -> float | None:
        started.append(key)
        running.set()
        await release.wait()
        finished.append(key)
        return None

    queue = WorkQueue(worker, workers=1)
    queue.start()
    queue.add(("ns", "a"))
    await asyncio.wait_for(running.wait(), 5)
    queue.add(("ns", "b"))  # waiting behind "a": must not start once draining
    drain = asyncio.create_task(queue.drain(grace=30))
    await asyncio.sleep(0.05)
    assert not drain.done()  # still waiting for "a"
    release.set()
    assert await drain is True
    assert finished == [("ns", "a")]
    assert started == [("ns", "a")]


async def test_drain_is_bounded_and_cancels_a_reconcile_that_does_not_finish() -> None:
    cancelled = asyncio.Event()

    async def worker(key: Key) -> float | None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return None

    queue = WorkQueue(worker, workers=2)
    queue.start()
    queue.add(("ns", "stuck"))
    await asyncio.sleep(0.01)
    assert await queue.drain(grace=0.1) is False
    assert cancelled.is_set()


async def test_drain_of_an_idle_queue_returns_at_once() -> None:
    async def worker(key: Key) -> float | None:
        return 5.0  # would requeue later: the timer is dropped by the drain

    queue = WorkQueue(worker, workers=1)
    queue.start()
    queue.add(("ns", "a"))
    await asyncio.sleep(0.01)
    assert queue.idle
    assert await asyncio.wait_for(queue.drain(grace=30), 1) is True
