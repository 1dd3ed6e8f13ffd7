"""What the handlers of one simulator share: its config, engine, ledger, timing and metrics.

A module of its own so that the routes (:mod:`.server`) and the generation loop
(:mod:`.streaming`) both depend on it, and not on each other.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from vllm_operator.sim.config import SimConfig
from vllm_operator.sim.engine import Engine
from vllm_operator.sim.ledger import Ledger, TimingStats
from vllm_operator.sim.metrics import SimMetrics


@dataclass
class LiveFaults:
    """The faults only live traffic meets, changed at run time by ``POST /sim/live-faults``
    (a canary test turns a failure on in the middle of a step)."""

    error_rate: float = 0.0
    delay_seconds: float = 0.0
    stream_error_rate: float = 0.0
    hang_rate: float = 0.0
    metrics_status: int = 200  # not 200: GET /metrics answers it (a scrape that fails)


class SimState:
    """Everything the handlers of one simulator share."""

    def __init__(self, config: SimConfig, *, wall: Callable[[], float] = time.time) -> None:
        self.config = config
        self.wall = wall
        self.engine = Engine(
            config.profile,
            max_num_seqs=config.max_num_seqs,
            time_scale=config.time_scale,
            noise=config.noise,
            rng=random.Random(config.seed),  # None: a fresh draw per start
        )
        self.ledger = Ledger(config.ledger_size)
        self.timing = TimingStats()
        engine = self.engine
        self.metrics = SimMetrics(
            config.model_names[0],
            running=lambda: float(engine.running),
            waiting=lambda: float(engine.waiting),
            kv_usage=engine.kv_usage,
        )
        self.rng = random.Random(0 if config.seed is None else config.seed)
        self.created = int(wall())
        self.dead = False  # the engine died (fault): /health 503, completions 500
        faults = config.faults
        self.live = LiveFaults(
            error_rate=faults.live_error_rate,
            delay_seconds=faults.live_delay_seconds,
            stream_error_rate=faults.live_stream_error_rate,
            hang_rate=faults.live_hang_rate,
        )
        self.crash: Callable[[], None] = lambda: None
        """Ends the server as a crash does (the runner sets it: a process exits)."""
