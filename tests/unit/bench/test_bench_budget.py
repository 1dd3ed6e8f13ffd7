"""Requests in flight are bounded by the bytes they carry, not only by their count (issue
31: 2,048 held requests with 131,072-token prompts reached 1.1 GB at 600 in flight)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from vllm_operator.api.workload import WorkloadSpec
from vllm_operator.bench.http.request import ChatRequest
from vllm_operator.bench.load.budget import MAX_BYTES_IN_FLIGHT, ByteBudget, request_bytes
from vllm_operator.bench.load.send import LoadRecord, LoadRun, closed_loop, open_loop
from vllm_operator.bench.workload import build_traffic

KB300 = 300_000


class Sized:
    """A Traffic of prompts of ``size`` characters (request 5: ``big`` characters)."""

    def __init__(self, size: int, big: int | None = None) -> None:
        self.size = size
        self.big = big

    def request(self, index: int) -> ChatRequest:
        size = self.big if index == 5 and self.big else self.size
        return ChatRequest(prompt=f"{index:06d}" + "x" * (size - 6), max_tokens=4)

    def describe(self) -> dict[str, Any]:
        return {"kind": "sized"}


class Holder:
    """A send_one that holds each request a moment and records how many bytes were held."""

    def __init__(self) -> None:
        self.held = 0
        self.most_held = 0
        self.most_requests = 0
        self.requests = 0
        self.big_alone: list[bool] = []

    async def __call__(self, request: ChatRequest, record: LoadRecord) -> None:
        size = request_bytes(request)
        self.held += size
        self.requests += 1
        self.most_held = max(self.most_held, self.held)
        self.most_requests = max(self.most_requests, self.requests)
        try:
            if size > 1 << 20:
                self.big_alone.append(self.requests == 1)
            await asyncio.sleep(0.005)
            if size > 1 << 20:
                self.big_alone.append(self.requests == 1)
        finally:
            self.held -= size
            self.requests -= 1


async def test_open_loop_holds_at_most_the_budget_in_flight() -> None:
    clock = asyncio.get_running_loop().time
    holder = Holder()
    run = LoadRun("candidate", 2000, 0, "rate", 0.01)
    await open_loop(
        run, Sized(KB300), holder, clock, rate=2000, seed="s", first_index=0,
        max_bytes_in_flight=1 << 20,
    )  # fmt: skip
    assert len(run.records) == 20
    assert holder.most_held <= 1 << 20
    assert holder.most_requests == 3  # 3 x 300 kB fit in 1 MiB, 4 do not
    assert run.waited_for_slot > 0  # and the waits are counted


async def test_closed_loop_streams_wait_for_room_too() -> None:
    clock = asyncio.get_running_loop().time
    holder = Holder()
    run = LoadRun("candidate", 8, 0, "concurrency", 0.05)
    await closed_loop(
        run, Sized(KB300), holder, clock, streams=8, first_index=0, max_bytes_in_flight=1 << 20
    )
    assert holder.most_held <= 1 << 20
    assert holder.most_requests == 3
    assert run.waited_for_slot > 0


async def test_a_request_larger_than_the_budget_is_sent_alone() -> None:
    clock = asyncio.get_running_loop().time
    holder = Holder()
    run = LoadRun("candidate", 2000, 0, "rate", 0.005)
    traffic = Sized(1000, big=2 << 20)
    await open_loop(
        run, traffic, holder, clock, rate=2000, seed="s", first_index=0,
        max_bytes_in_flight=1 << 20,
    )  # fmt: skip
    assert len(run.records) == 10
    assert holder.big_alone == [True, True]  # nothing started beside it either
    assert holder.most_held == 2 << 20


async def test_the_budget_is_first_come_first_served_and_survives_cancellation() -> None:
    budget = ByteBudget(10)
    assert await budget.acquire(6) == 6
    big = asyncio.create_task(budget.acquire(8))
    await asyncio.sleep(0)
    assert budget.would_wait(1)  # a small one queues behind the big one
    small = asyncio.create_task(budget.acquire(1))
    cancelled = asyncio.create_task(budget.acquire(2))
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.sleep(0)
    budget.release(6)
    assert await big == 8
    assert await small == 1
    assert budget.in_flight == 9
    assert budget.peak == 9
    budget.release(9)
    assert await budget.acquire(50) == 10  # larger than the budget: all of it, alone


def test_the_default_budget_holds_few_requests_of_the_largest_synthetic_prompt() -> None:
    spec = WorkloadSpec.model_validate(
        {
            "synthetic": {"inputTokens": {"mean": 131_072}, "outputTokens": {"mean": 8}},
            "load": {"mode": "rate", "rates": [100]},
        }
    )
    traffic = build_traffic(spec)
    assert traffic is not None
    size = request_bytes(traffic.request(0))
    assert size > 500_000
    # At most ~100 such prompts in flight (each also held once more as its encoded body).
    assert MAX_BYTES_IN_FLIGHT // size < 100


def test_a_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        ByteBudget(0)
