"""The bytes of prompt text in flight, bounded: memory follows bytes, not request counts.

The benchmark Job's container has 512 MiB. Counting requests alone does not bound it: 2,048
open-loop requests with 131,072-token synthetic prompts reached 1.1 GB at 600 in flight
(each request holds its prompt, its encoded body and the transport's buffers). So a request
starts only when its text fits in ``MAX_BYTES_IN_FLIGHT`` with the others in flight; one
larger than the whole budget starts alone. A request that waits for the budget waits like
one that waits for a slot: the wait counts in its latency (``bench.load.send``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

from vllm_operator.bench.http.request import ChatRequest

MAX_BYTES_IN_FLIGHT = 64 << 20
"""Prompt text of the requests in flight at most (characters; the body repeats it once).
64 MiB is ~80 requests of 131,072 tokens, or every one of 2,048 requests of 4,000 tokens."""


def request_bytes(request: ChatRequest) -> int:
    """How much text ``request`` carries (characters of every turn it sends), at least 1."""
    if request.messages_json is not None:
        return max(1, len(request.messages_json))
    if request.messages is None:
        return max(1, len(request.prompt) + len(request.system or ""))
    return max(1, sum(_text_size(m.get("content")) for m in request.messages))


def _text_size(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(p.get("text", "")) for p in content if isinstance(p, dict))
    return 0


class ByteBudget:
    """An asyncio budget of bytes, granted first come first served (no starvation of a
    large request by a stream of small ones)."""

    def __init__(self, limit: int = MAX_BYTES_IN_FLIGHT) -> None:
        if limit < 1:
            raise ValueError("the byte budget must be >= 1")
        self.limit = limit
        self.in_flight = 0
        self.peak = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    def _grant(self, size: int) -> int:
        return min(size, self.limit)

    def would_wait(self, size: int) -> bool:
        """True when ``acquire(size)`` cannot be granted now."""
        return bool(self._waiters) or self.in_flight + self._grant(size) > self.limit

    async def acquire(self, size: int) -> int:
        """Wait until ``size`` bytes fit (all of the budget for a larger request); returns
        what was granted, to give back with ``release``."""
        granted = self._grant(size)
        if self.would_wait(size):
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((granted, future))
            try:
                await future
            except BaseException:
                if future.done() and not future.cancelled():
                    self.release(granted)  # granted just as we were cancelled
                else:
                    with contextlib.suppress(ValueError):
                        self._waiters.remove((granted, future))
                    self.release(0)  # those behind it may fit now
                raise
        else:
            self._take(granted)
        return granted

    def _take(self, granted: int) -> None:
        self.in_flight += granted
        self.peak = max(self.peak, self.in_flight)

    def release(self, granted: int) -> None:
        """Give back ``granted`` bytes and start the waiters that now fit, in order."""
        self.in_flight -= granted
        while self._waiters:
            size, future = self._waiters[0]
            if future.cancelled():
                self._waiters.popleft()
                continue
            if self.in_flight + size > self.limit:
                break
            self._waiters.popleft()
            self._take(size)
            future.set_result(None)
