"""The live users the demo and the canary tests run count a broken stream as a failure.

vLLM breaks a generation that fails mid-way after its 200 header: one token, an error chunk,
``[DONE]``. A client that looks only at the status calls that a success; the demo's step 4
(issue 39) fails its canary on exactly those, so its users must see them as failed, and as
injected by the simulator (not a traffic switch's).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from vllm_operator.sim import Faults
from vllm_operator_demo.live_users import LiveUsers, stream_error


def _wait_for(users: LiveUsers, count: int) -> None:
    deadline = time.monotonic() + 60  # bounds the wait only
    while len(users.snapshot()) < count and time.monotonic() < deadline:
        time.sleep(0.05)


async def _sent(address: str, *, stream: bool, count: int) -> LiveUsers:
    """Live users (their own thread and loop) until they sent ``count`` requests."""
    users = LiveUsers(lambda: address, model="sim-model", users=2, stream=stream).start()
    try:
        await asyncio.to_thread(_wait_for, users, count)
    finally:
        await asyncio.to_thread(users.stop)  # the simulator answers on this loop meanwhile
    return users


async def test_streams_broken_after_the_header_are_failed_and_injected(start_sim: Any) -> None:
    async with start_sim(faults=Faults(live_stream_error_rate=1.0)) as sim:
        where = sim.url.removeprefix("http://")
        streamed = (await _sent(where, stream=True, count=10)).snapshot()
        plain = (await _sent(where, stream=False, count=10)).snapshot()
    assert len(streamed) >= 10
    assert all(s.status == 200 for s in streamed)  # the header said 200 every time ...
    assert all(s.broken and not s.ok and s.injected for s in streamed)  # ... all failed
    assert not any(s.switch_failure for s in streamed)
    assert all(s.status == 500 and s.injected and not s.broken for s in plain)  # vLLM: a 500


async def test_a_healthy_stream_is_ok(start_sim: Any) -> None:
    async with start_sim() as sim:
        sent = (await _sent(sim.url.removeprefix("http://"), stream=True, count=5)).snapshot()
    assert sent
    assert all(s.ok and not s.broken for s in sent)


def test_only_an_error_chunk_is_a_stream_error() -> None:
    ok = 'data: {"choices": [{"text": "error"}]}\n\ndata: [DONE]\n\n'
    assert stream_error(ok) is None
    assert stream_error("data: not json\n\n") is None
    broken = 'data: {"choices": []}\n\ndata: {"error": {"message": "x"}}\n\ndata: [DONE]\n\n'
    assert stream_error(broken) == '{"error": {"message": "x"}}'
