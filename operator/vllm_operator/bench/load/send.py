"""Sending a workload at one load level: a closed loop of streams, or open-loop arrivals.

Why two loops: a closed loop (each stream sends its next request when the last one ends)
measures what a fixed number of users sustain, but it slows down with the server, so it
never shows what happens when requests keep arriving regardless (users do not wait for each
other). An open loop sends at a request rate whether or not earlier requests finished.

Open loop, and coordinated omission: the arrival times are fixed before the level starts
(``arrivals``), from the workload's seed, the level and the trial, so the candidate and the
baseline of one trial get the same arrivals and the same requests. A request is due at its
intended arrival; its record's ``scheduled_at`` is that time, and the load figures
(``bench.load.figures``) measure TTFT and end-to-end from it, not from when the client got
round to sending it: a client that falls behind (a slow event loop, or every in-flight slot
taken by a server that stopped answering) cannot hide the server's slowness by sending
later. How late each send was is kept (``dispatched_at``) and reported (send lag, achieved
arrival rate), so the client's own share is visible.

Why arrivals are ``round(rate x seconds)`` sorted uniform times: that is a Poisson process
conditioned on its count (given N arrivals in [0, T], Poisson arrival times are N sorted
uniforms). Every trial then asks exactly the rate, so the achieved rate measures the
client, not the luck of the draw (an unconditioned 30 s at 50 requests/s varies by 2.6%).

Bounded: at most ``max_in_flight`` requests and ``max_bytes_in_flight`` of prompt text in
flight (``bench.load.budget``: an arrival waits for a slot and for room, and the wait counts in
its latency; a closed-loop stream waits for room too), at most ``MAX_RUN_REQUESTS`` per
run, and each finished request's chunk times are folded into its run's gap list and
dropped, so a long run keeps a few numbers per request, not one per token.

Every record is stored in its run before it is sent (the runner's rule), so a deadline that
cancels the level still counts the requests in flight (``timeout``).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from array import array
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from vllm_operator.api.workload import MAX_LEVEL_REQUESTS, LoadMode
from vllm_operator.bench.http.request import ChatRequest, RequestRecord
from vllm_operator.bench.load.budget import MAX_BYTES_IN_FLIGHT, ByteBudget, request_bytes
from vllm_operator.bench.load.traffic import Traffic

Clock = Callable[[], float]
SendOne = Callable[[ChatRequest, "LoadRecord"], Awaitable[None]]
"""Send one request into its (already stored) record: the runner's deadline and counting."""

MAX_RUN_REQUESTS = MAX_LEVEL_REQUESTS
"""Requests of one run (server, level, trial) at most: rate x seconds beyond is refused
(by ``api.workload.LoadSpec`` and the CRD before any run; ``arrivals`` checks again)."""

MAX_IN_FLIGHT = 2048
"""Open-loop requests in flight at most; later arrivals wait for a slot (and it shows)."""


@dataclass
class LoadRecord(RequestRecord):
    """A request of a load run: when it was due and what its stream looked like."""

    offset: float = 0.0
    """Intended arrival, seconds from the level's start (``scheduled_at`` is the same time)."""
    dispatched_at: float | None = None
    """When the client started it (clock): later than ``scheduled_at`` when it fell behind."""
    chunks: int = 0
    """Streamed content chunks (their times are folded into the run's gaps, then dropped)."""
    mean_gap: float | None = None
    """Mean gap between its chunks (s): the request's inter-token latency."""
    gap_start: int = -1
    """Where its ``chunks - 1`` gaps start in its run's ``gaps`` (-1: none kept), so the gaps
    above a bound can be counted request by request (``bench.load.tails``)."""

    @property
    def gap_count(self) -> int:
        """Its gaps in the run's ``gaps`` (0 when none were kept)."""
        return self.chunks - 1 if self.gap_start >= 0 else 0


@dataclass
class LoadRun:
    """One server at one level in one trial: its requests in arrival order."""

    server: str
    level: float
    trial: int
    mode: LoadMode
    seconds: float
    asked_rate: float | None = None
    started: float = 0.0
    started_unix: float = 0.0
    ended: float = 0.0
    records: list[LoadRecord] = field(default_factory=list)
    gaps: array[float] = field(default_factory=lambda: array("d"))
    """Every gap between streamed chunks of its completed requests (s), all requests; each
    request's gaps are contiguous from its ``gap_start``."""
    waited_for_slot: int = 0
    """Arrivals that found every in-flight slot taken, or no room in the byte budget, and
    waited."""
    cut_at_max: bool = False
    """True when the run stopped sending at ``MAX_RUN_REQUESTS``."""
    counted: dict[tuple[str, int, int, int], object] = field(
        default_factory=dict, repr=False, compare=False
    )
    """The tail judge's tallies of this run (``bench.load.figures.tally``), by metric and the
    record, completed and gap counts they were built at: the gate asks after every round."""

    @property
    def elapsed(self) -> float:
        """From the level's start to its last answer (at least ``seconds``)."""
        return max(self.seconds, self.ended - self.started)

    @property
    def achieved_rate(self) -> float:
        """Requests started per second over the sending time (later starts stretch it)."""
        starts = [r.dispatched_at for r in self.records if r.dispatched_at is not None]
        if not starts:
            return 0.0
        span = max(self.seconds, max(starts) - self.started)
        return len(starts) / span


def arrivals(rate: float, seconds: float, seed: str) -> list[float]:
    """Arrival offsets (s) of ``round(rate * seconds)`` Poisson arrivals in [0, seconds)."""
    count = round(rate * seconds)
    if count > MAX_RUN_REQUESTS:
        raise ValueError(
            f"{rate:g} requests/s for {seconds:g} s is {count} requests, more than "
            f"{MAX_RUN_REQUESTS} per level: lower secondsPerLevel"
        )
    rng = random.Random(seed)
    return sorted(rng.uniform(0.0, seconds) for _ in range(count))


def arrival_seed(seed: int, level: float, trial: int) -> str:
    """The arrival schedule's seed: same for candidate and baseline, new per level and trial."""
    return f"vllm-operator/arrivals/{seed}/{level:g}/{trial}"


def fold(record: LoadRecord, run: LoadRun) -> None:
    """Move a finished record's chunk times into ``run.gaps`` and its own mean gap."""
    times = record.chunk_times
    record.chunks = len(times)
    if record.ok and len(times) >= 2:
        record.gap_start = len(run.gaps)
        run.gaps.extend(b - a for a, b in itertools.pairwise(times))
        record.mean_gap = (times[-1] - times[0]) / (len(times) - 1)
    record.chunk_times = []


async def closed_loop(
    run: LoadRun,
    traffic: Traffic,
    send_one: SendOne,
    clock: Clock,
    *,
    streams: int,
    first_index: int,
    max_bytes_in_flight: int = MAX_BYTES_IN_FLIGHT,
    started: float | None = None,
) -> None:
    """``streams`` streams, each sending back to back until ``run.seconds`` have passed
    since ``started`` (the clock; now when None: runs loaded together share one).

    Requests are numbered in the order they start (``first_index`` on), so every server
    gets the same requests, the first ones first.
    """
    run.started = clock() if started is None else started
    end = run.started + run.seconds
    sent = 0
    budget = ByteBudget(max_bytes_in_flight)

    async def stream() -> None:
        nonlocal sent
        while clock() < end:
            # take turns: streams of servers loaded together (``bench.load.sweep``) share
            # the event loop, and a transport that answers without waiting never yields
            await asyncio.sleep(0)
            if sent >= MAX_RUN_REQUESTS:
                run.cut_at_max = True
                return
            index = first_index + sent
            sent += 1
            now = clock()
            record = LoadRecord(scheduled_at=now, offset=now - run.started, dispatched_at=now)
            run.records.append(record)
            request = traffic.request(index)
            if budget.would_wait(size := request_bytes(request)):
                run.waited_for_slot += 1
            granted = await budget.acquire(size)
            try:
                await send_one(request, record)
            finally:
                budget.release(granted)
                fold(record, run)

    try:
        # Not a TaskGroup: when one stream gives up (Aborted), the others finish their own
        # request rather than be cancelled and miscounted as timeouts.
        results = await asyncio.gather(*(stream() for _ in range(streams)), return_exceptions=True)
    finally:
        run.ended = clock()
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def open_loop(
    run: LoadRun,
    traffic: Traffic,
    send_one: SendOne,
    clock: Clock,
    *,
    rate: float,
    seed: str,
    first_index: int,
    max_in_flight: int = MAX_IN_FLIGHT,
    max_bytes_in_flight: int = MAX_BYTES_IN_FLIGHT,
    started: float | None = None,
) -> None:
    """Poisson arrivals at ``rate`` for ``run.seconds``, sent whether or not others finished.

    The arrivals are offsets from ``started`` (the clock; now when None): runs loaded
    together (``bench.load.sweep``) share one start, so their arrivals fall at the same
    moments.

    Returns when every sent request has ended. A failure that ends the run (``Aborted``
    from ``send_one``) stops the arrivals, lets the requests in flight finish, and is
    raised; a cancellation (the deadline) cancels them, each marked ``timeout``.
    """
    schedule = arrivals(rate, run.seconds, seed)
    slots = asyncio.Semaphore(max_in_flight)
    budget = ByteBudget(max_bytes_in_flight)
    tasks: set[asyncio.Task[None]] = set()
    failures: list[BaseException] = []
    run.asked_rate = rate

    async def one(request: ChatRequest, granted: int, record: LoadRecord) -> None:
        try:
            await send_one(request, record)
        except Exception as exc:  # Aborted and the like: the run stops after this level
            failures.append(exc)
        finally:
            fold(record, run)
            slots.release()
            budget.release(granted)

    run.started = clock() if started is None else started
    try:
        for n, offset in enumerate(schedule):
            if failures:
                break
            delay = run.started + offset - clock()
            if delay > 0:
                await asyncio.sleep(delay)
            request = traffic.request(first_index + n)
            size = request_bytes(request)
            if slots.locked() or budget.would_wait(size):
                run.waited_for_slot += 1
            await slots.acquire()
            granted = await budget.acquire(size)
            record = LoadRecord(
                scheduled_at=run.started + offset, offset=offset, dispatched_at=clock()
            )
            run.records.append(record)
            task = asyncio.create_task(one(request, granted, record))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        run.ended = clock()
    if failures:
        raise failures[0]
