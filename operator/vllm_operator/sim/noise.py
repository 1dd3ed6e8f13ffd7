"""Noise a real GPU server has and a quiet simulator lacks: node speed, jitter, JIT stalls.

Why: a gate that only ever sees a perfectly repeatable server cannot be shown to survive the
noise of real hardware. The H200 calibration (``shared/calibration/h200-vllm-0.22.md``,
"The project's own pods and bench on H200s") measured three kinds, each a knob here:

- ``speed``: this server's speed relative to its profile (a slower node: 0.7). Every model
  duration is divided by it.
- ``jitter_percent``: per-request timing noise. Each request draws one factor
  ``exp(N(0, jitter/100))`` applied to its TTFT and every inter-token gap (single-stream
  latency of one server varied by about 1.5% between runs).
- ``jit_stall_ms``: the first time the engine runs a batch in a new size bucket (powers of
  two: 1, 2, 3-4, 5-8, ...), every running request stalls once for that long (model ms), as
  when vLLM JIT-compiled a Triton kernel inside a measured level. ``jit_stall_chance`` is
  the chance that a bucket needs a compile at all, drawn once per start, so stalls land in
  different levels from one start to the next, as they did on the H200. Buckets, not each
  size, are the modelling choice that reproduces the A/A table (at most one stall per
  concurrency level of 1, 2, 4, 8 streams).

- ``ttft_tail_percent`` / ``ttft_tail_ms``: a TTFT tail, as a revision that stalls some
  prefills (a scheduler change, a slower kernel on long prompts) has: that share of
  requests waits ``ttft_tail_ms`` (model ms) more for its first token, the rest are
  untouched. It moves a TTFT p99 without moving the median, what an SLO gate judged on
  shares above a limit must catch (``benchmarks/slo_laptop.py``).

Draws come from one generator seeded by ``--sim-seed`` or, without it, at random per start.
Defaults are quiet: speed 1, no jitter, no stalls, no tail.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Noise:
    """Noise settings of one simulator (see module docstring)."""

    speed: float = 1.0
    jitter_percent: float = 0.0
    jit_stall_ms: float = 0.0
    jit_stall_chance: float = 1.0
    ttft_tail_percent: float = 0.0
    ttft_tail_ms: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.speed <= 100:
            raise ValueError("--sim-speed must be > 0 (1 = the profile's speed)")
        if not 0 <= self.jitter_percent <= 100:
            raise ValueError("--sim-jitter must be 0..100 (percent)")
        if self.jit_stall_ms < 0:
            raise ValueError("--sim-jit-stall-ms must be >= 0")
        if not 0 <= self.jit_stall_chance <= 1:
            raise ValueError("--sim-jit-stall-chance must be 0..1")
        if not 0 <= self.ttft_tail_percent <= 100:
            raise ValueError("--sim-ttft-tail-percent must be 0..100 (percent)")
        if self.ttft_tail_ms < 0:
            raise ValueError("--sim-ttft-tail-ms must be >= 0")


PRESETS: dict[str, dict[str, object]] = {
    "h200-noisy": {
        "version": "0.22.0",
        "profile": "0.22.0-default",
        "jitter": 1.0,
        "jit-stall-ms": 1600.0,
        "jit-stall-chance": 0.5,
    },
}
"""Named knob sets. ``h200-noisy``: the 0.22 compiled profile with the calibration's noise:
1% per-request jitter (one server's single-stream latency moved within 1.5%), a 1.6 s stall
on the first use of a batch-size bucket (dips of 1.3-1.9 s of lost window in the A/A runs:
2 streams 154 vs 367 tok/s warm, 4 streams 268 vs 568, 8 streams 422 vs 816), half of the
buckets needing a compile per start (start 1 dipped at 2 and 4 streams, start 2 at 4 and 8).
"""


def bucket(size: int) -> int:
    """The power-of-two bucket of a batch size (1, 2, 4, 8, ...)."""
    return 1 << max(0, math.ceil(math.log2(max(1, size))))


class NoiseState:
    """The per-start draws and the stall clock of one engine."""

    def __init__(self, noise: Noise, rng: random.Random) -> None:
        self.noise = noise
        # Two streams from one seed: which buckets compile must not depend on how many
        # requests drew their jitter before the bucket was first used.
        self.stall_rng = random.Random(rng.getrandbits(64))
        self.rng = rng
        self._needs_compile: dict[int, bool] = {}
        self.stall_until = 0.0
        self.stalls: list[int] = []
        """Buckets that stalled, in order (for tests and the log)."""

    def request_factor(self) -> float:
        """This request's timing factor (1.0 without jitter)."""
        sigma = self.noise.jitter_percent / 100
        return math.exp(self.rng.gauss(0.0, sigma)) if sigma > 0 else 1.0

    def ttft_tail_ms(self) -> float:
        """Model ms this request's first token waits beyond its TTFT (0 outside the tail)."""
        share = self.noise.ttft_tail_percent / 100
        if share <= 0 or self.noise.ttft_tail_ms <= 0:
            return 0.0
        return self.noise.ttft_tail_ms if self.rng.random() < share else 0.0

    def on_batch(self, size: int, now: float, scale: float) -> None:
        """The engine now runs ``size`` requests: stall if its bucket was never compiled."""
        if self.noise.jit_stall_ms <= 0:
            return
        key = bucket(size)
        if key in self._needs_compile:
            return
        chance = self.noise.jit_stall_chance
        self._needs_compile[key] = chance >= 1 or self.stall_rng.random() < chance
        if self._needs_compile[key]:
            self.stalls.append(key)
            self.stall_until = max(self.stall_until, now) + self.noise.jit_stall_ms * scale
