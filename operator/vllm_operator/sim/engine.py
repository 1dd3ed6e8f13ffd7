"""The emulated engine: admission (continuous batching up to max_num_seqs) and timing.

Why this shape: vLLM runs up to ``max_num_seqs`` requests in one batch and queues the rest;
every running request slows every other one a little. The engine keeps that state (running,
waiting, tokens held in the KV cache) and turns the profile's model milliseconds into wall
seconds (``time_scale``). Each request's coroutine then sleeps to absolute deadlines: the
next deadline is the previous *intended* one plus the current inter-token latency, so
scheduling error never accumulates, and sleeping wakes ``EARLY`` before the deadline
because the event loop's timer resolution is 1 ms (epoll rounds timeouts up); this centres
the error on zero instead of biasing every token late by about half a millisecond.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque

from vllm_operator.sim.noise import Noise, NoiseState
from vllm_operator.sim.profiles import Profile

EARLY = 0.0005


class Engine:
    """Batch state of one simulator; all methods run on its event loop."""

    def __init__(
        self,
        profile: Profile,
        *,
        max_num_seqs: int,
        time_scale: float,
        noise: Noise | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.profile = profile
        self.max_num_seqs = max_num_seqs
        noise = noise or Noise()
        self.scale = time_scale / noise.speed / 1000.0  # model ms -> wall seconds
        self.noise = NoiseState(noise, rng or random.Random())
        self.running = 0
        self.kv_tokens = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return sum(1 for f in self._waiting if not f.done())

    def kv_usage(self) -> float:
        return min(1.0, self.kv_tokens / max(1, self.profile.kv_cache_tokens))

    async def admit(self) -> None:
        """Wait for a batch slot (FIFO) and take it."""
        if self.running < self.max_num_seqs and not self._waiting:
            self.running += 1
            self._batch_grew()
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot was handed over just before the cancel
            else:
                self._waiting.remove(fut)
            raise

    def _batch_grew(self) -> None:
        self.noise.on_batch(self.running, asyncio.get_running_loop().time(), self.scale)

    @property
    def stall_until(self) -> float:
        """Loop time until which every running request is stalled (a JIT compile)."""
        return self.noise.stall_until

    def release(self) -> None:
        """Give the slot back; the oldest waiting request takes it over."""
        while self._waiting:
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot passes on: running stays the same
                return
        self.running -= 1

    def ttft(self, prompt_tokens: int) -> float:
        """Wall seconds from admission to the first token."""
        return self.profile.ttft_ms(prompt_tokens) * self.scale

    def itl(self, context_tokens: int) -> float:
        """Wall seconds to the next token, given the batch as it is now."""
        return self.profile.itl_ms_at(self.running, context_tokens) * self.scale


async def sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
    """Sleep until about ``deadline`` (loop time), waking up to ``EARLY`` before it."""
    delay = deadline - loop.time() - EARLY
    if delay > 0:
        await asyncio.sleep(delay)
