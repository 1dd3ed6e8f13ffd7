"""The load sweep of a workload: warm-up, paired trials per level, stop at the first breach.

When ``BenchConfig.traffic`` is set (a synthetic or dataset workload), this replaces the
study's latency and concurrency phases (``bench.runner``). Order (docs/bench.md, "Load
levels and SLOs"):

- **Warm-up**: before each level's trials, one discarded run per server at that level,
  ``WARMUP_SECONDS`` at most (the level's own duration if shorter), when ``warmup`` or the
  settling passes are asked for. Every level, not only the first: each rate brings batch
  shapes the lower ones did not (on an H200, two fresh vLLM 0.22 servers warmed at 2
  requests/s only read a TTFT p99 of 1,505 and 1,609 ms in one trial against 64-207 ms in
  the others: Triton JIT compiles at new shapes). Simpler than the study's settling warm-up
  (passes until two agree): a level is itself tens of seconds of the same shapes, and
  sequential trials absorb a trial that was still warming up.
- **Levels in order**, each: ``trials`` paired rounds (every server runs the level for
  ``secondsPerLevel``, all of them at the same moments: see "Together" below), then one more
  round at a time
  while the gate says a figure of this level is undecided (``open_figures``), up to
  ``max_trials`` and the time budget, and only while the rounds that still fit can show the
  level's tail limits met (``can_still_decide``; the last level is exempt: nothing comes
  after it to get the time). Level by level rather than round by round: whether a
  level broke the SLO is only known once its trials are in, and the sweep stops there.
- **Stop at the first breach** (``stopAtFirstBreach``): when the gate (``breached``) says the
  candidate broke a limit at a level, the levels above it are not run; the level is
  recorded (``RunState.load_stopped_at``) and the gate calls the levels above "not
  measured" (a note, not a gap).
- **Together** (issue 40): in each round (and warm-up) the candidate and the baseline twin
  are loaded at the same moments, from one common start, on the same arrival schedule and
  the same requests, each at the level's full rate (or streams). Measured one after the
  other, each in its own window, a burst of someone else's load on a shared machine landed
  in one server's window and not the other's and moved that server's TTFT p99 alone by
  100-200 ms (docs/bench.md, "On a loaded machine"); at the same moments it hits both.
  The order the two are started in still alternates by trial, so whichever the event loop
  serves first at a shared arrival changes sides. Each server gets half of the client's
  in-flight bounds (``MAX_IN_FLIGHT``, ``MAX_BYTES_IN_FLIGHT``), so the Job's memory bound
  holds with two servers loaded at once and one slow server cannot take the other's room.
  On GPUs the two are separate servers on separate cards, so loading them at once changes
  nothing of what each one measures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING

from vllm_operator.api.summary import MAX_TRIALS
from vllm_operator.bench.http.request import ChatRequest
from vllm_operator.bench.load.budget import MAX_BYTES_IN_FLIGHT
from vllm_operator.bench.load.send import (
    MAX_IN_FLIGHT,
    MAX_RUN_REQUESTS,
    LoadRecord,
    LoadRun,
    arrival_seed,
    closed_loop,
    open_loop,
)
from vllm_operator.gate.budget import (
    NEXT_ROUND_FACTOR,
    WARMUP_SECONDS,
    extra_round_fits,
    held_for_later,
)
from vllm_operator.gate.decidable import Observations, short_limits
from vllm_operator.gate.slo import figure

if TYPE_CHECKING:
    from vllm_operator.bench.config import BenchConfig
    from vllm_operator.bench.load.traffic import Traffic
    from vllm_operator.bench.run_state import (
        Breached,
        Clock,
        OpenFigures,
        Progress,
        RunState,
        ServerRun,
    )

Send = Callable[["ServerRun", ChatRequest, LoadRecord], Awaitable[None]]


def first_index(level_number: int, trial: int) -> int:
    """Where the request numbers of a run start: distinct for every level and trial.

    The warm-up of level ``k`` uses ``level_number`` = the number of levels + ``k`` (past
    every measured one).
    """
    return (level_number * (MAX_TRIALS + 1) + trial) * MAX_RUN_REQUESTS


class Sweep:
    """One sweep over ``config.workload.load``'s levels on every server of ``state``."""

    def __init__(  # noqa: PLR0917 - built once by the runner
        self,
        config: BenchConfig,
        traffic: Traffic,
        state: RunState,
        clock: Clock,
        progress: Progress,
        send: Send,
    ) -> None:
        self.config = config
        self.traffic = traffic
        self.state = state
        self.clock = clock
        self.progress = progress
        self.send = send
        self.load = config.workload.load

    async def run(self, open_figures: OpenFigures | None, breached: Breached | None) -> None:
        levels = self.load.levels
        for number, level in enumerate(levels):
            if self.warms_up:
                await self.warmup(level, len(levels) + number)
            for trial in range(self.config.trials):
                await self.round(number, level, trial)
            trial = self.config.trials
            while open_figures is not None and trial < self.config.plan.max_trials:
                if figure(level) not in open_figures(self.state):
                    break
                left = len(levels) - number - 1
                if not self.time_for_round(level, left):
                    self.progress.emit("budget", trial=trial + 1, level=level)
                    break
                if level != levels[-1] and not self.can_still_decide(level, trial, left):
                    self.progress.emit("undecidable", trial=trial + 1, level=level)
                    break
                await self.round(number, level, trial)
                trial += 1
            last = level == levels[-1]
            stop = self.load.stop_at_first_breach and breached is not None and not last
            if stop and breached is not None and breached(self.state, level):
                self.state.load_stopped_at = level
                self.progress.emit("breach", level=level, skipped=len(levels) - number - 1)
                return

    async def warmup(self, level: float, level_number: int) -> None:
        """One discarded run of ``level`` per server, all at the same moments; its requests
        are numbered from ``first_index(level_number, 0)``, past every measured level's."""
        seconds = min(float(self.load.seconds_per_level), WARMUP_SECONDS)
        runs = []
        for server in self.state.servers:
            run = LoadRun(server.role, level, 0, self.load.mode, seconds)
            server.load_warmup.append(run)
            runs.append((server, run))
            self.progress.emit(
                "warmup", server=server.role, level=level, seconds=seconds, mode=self.load.mode
            )
        await self.together(runs, first_index(level_number, 0), seed_trial=-1)

    async def round(self, number: int, level: float, trial: int) -> None:
        """One trial of ``level`` on every server at the same moments; which server is
        started first at each arrival alternates by trial."""
        servers = self.state.servers
        order = servers if trial % 2 == 0 else servers[::-1]
        self.progress.emit("trial", trial=trial + 1, level=level)
        runs = []
        for server in order:
            run = LoadRun(server.role, level, trial, self.load.mode, self.load.seconds_per_level)
            server.load.append(run)
            runs.append((server, run))
        await self.together(runs, first_index(number, trial), seed_trial=trial)
        for server, run in runs:
            done = sum(1 for r in run.records if r.ok)
            self.progress.emit(
                "load",
                server=server.role,
                trial=trial + 1,
                level=level,
                requests=len(run.records),
                completed=done,
            )

    async def together(
        self, runs: list[tuple[ServerRun, LoadRun]], first: int, *, seed_trial: int
    ) -> None:
        """Load every server of ``runs`` at once, from one start (``level``).

        Not a TaskGroup: when one server's run gives up (``Aborted``), the other finishes
        its level rather than have its requests cancelled and miscounted as timeouts; the
        failure is raised after. A cancellation (the deadline) cancels both.
        """
        origin = self.clock()
        share = len(runs)
        jobs: list[Coroutine[object, object, None]] = [
            self.level(server, run, first, seed_trial=seed_trial, origin=origin, share=share)
            for server, run in runs
        ]
        results = await asyncio.gather(*jobs, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def level(
        self,
        server: ServerRun,
        run: LoadRun,
        first: int,
        *,
        seed_trial: int,
        origin: float | None = None,
        share: int = 1,
    ) -> None:
        """``run`` on ``server`` from ``origin`` (the clock; now when None), with
        ``1 / share`` of the client's in-flight bounds."""
        run.started_unix = time.time()

        async def send_one(request: ChatRequest, record: LoadRecord) -> None:
            await self.send(server, request, record)

        room = MAX_BYTES_IN_FLIGHT // share
        if self.load.mode == "rate":
            seed = arrival_seed(self.config.workload.seed, run.level, seed_trial)
            await open_loop(
                run,
                self.traffic,
                send_one,
                self.clock,
                rate=run.level,
                seed=seed,
                first_index=first,
                max_in_flight=MAX_IN_FLIGHT // share,
                max_bytes_in_flight=room,
                started=origin,
            )
        else:
            await closed_loop(
                run,
                self.traffic,
                send_one,
                self.clock,
                streams=int(run.level),
                first_index=first,
                max_bytes_in_flight=room,
                started=origin,
            )

    def time_for_round(self, level: float, levels_left: int = 0) -> bool:
        """Would one more round of ``level`` (``NEXT_ROUND_FACTOR`` x the longest), and then
        the first rounds of the ``levels_left`` levels after it, end before the time budget?"""
        estimate = NEXT_ROUND_FACTOR * self.longest_round(level) + self.later(level, levels_left)
        return self.state.within_budget(
            self.clock(), estimate, self.config.deadline_seconds, self.config.budget_reserve
        )

    @property
    def warms_up(self) -> bool:
        """Does each level start with a discarded warm-up run?"""
        return self.config.warmup > 0 or self.config.settle_max_passes > 0

    def later(self, level: float, levels_left: int) -> float:
        """The later levels' warm-ups and first rounds, each round as long as ``level``'s
        longest so far (``gate.budget.held_for_later``)."""
        warmup = min(float(self.load.seconds_per_level), WARMUP_SECONDS)  # servers at once
        return held_for_later(
            levels_left,
            self.longest_round(level),
            warmup if self.warms_up else 0.0,
            self.config.trials,
        )

    def longest_round(self, level: float) -> float:
        """The longest round of ``level`` so far: its servers run at once, so a round lasts
        as long as its slowest server's run."""
        per_trial: dict[int, float] = {}
        for server in self.state.servers:
            for run in server.load_runs(level):
                per_trial[run.trial] = max(per_trial.get(run.trial, 0.0), run.elapsed)
        return max(per_trial.values(), default=0.0)

    def can_still_decide(self, level: float, trials: int, levels_left: int = 0) -> bool:
        """Can the rounds that still fit in the budget show every tail limit of ``level``
        met (``gate.decidable``, at the requests per trial measured so far)?

        Extra trials go first to the levels that can still be decided: a level that cannot
        pass in the time left gets none, and the levels after it get that time.
        """
        thresholds = self.config.thresholds
        runs = self.state.candidate.load_runs(level)
        if thresholds is None or thresholds.slo is None or not runs:
            return True
        longest = self.longest_round(level)
        elapsed = self.clock() - self.state.started + self.later(level, levels_left)
        reachable = trials
        while (
            longest > 0
            and reachable < self.config.plan.max_trials
            and extra_round_fits(
                elapsed + (reachable - trials) * longest,
                longest,
                self.config.deadline_seconds,
                self.config.budget_reserve,
            )
        ):
            reachable += 1
        synthetic = self.config.workload.synthetic
        per_trial = Observations(
            sum(len(r.records) for r in runs) / len(runs),
            max(synthetic.output_tokens.mean - 1, 0) if synthetic is not None else None,
        )
        confidence = thresholds.confidence_percent / 100
        short = short_limits(
            thresholds.slo.at(level), per_trial, reachable, confidence, self.config.plan
        )
        return not short
