"""Timing profiles: how fast the emulated vLLM starts, prefills and decodes.

Why a data file: the constants reproduce published measurements and must cite them; code
only evaluates the model described in ``data/profiles.yaml`` (TTFT linear in prompt length,
inter-token latency growing with context length and with the number of running requests).
A profile is chosen from the emulated version and launch mode, as a real vLLM's speed
follows from its version and flags (``--enforce-eager``/``-O0`` -> eager,
``--performance-mode throughput`` -> throughput, otherwise the compiled default).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from vllm_operator.engine.version import Version

MODES = ("eager", "default", "throughput")


@dataclass(frozen=True)
class Profile:
    """One timing profile; durations in model milliseconds unless named ``_seconds``."""

    name: str
    version: Version
    mode: str
    warmup_seconds: float
    ttft_base_ms: float
    ttft_per_prompt_token_ms: float
    itl_ms: float
    itl_per_context_token_ms: float
    batch_points: tuple[tuple[int, float], ...] = ((1, 1.0),)
    max_num_seqs: int = 256
    kv_cache_tokens: int = 500_000
    source: str = ""
    _xs: tuple[int, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        points = tuple(sorted(self.batch_points))
        object.__setattr__(self, "batch_points", points)
        object.__setattr__(self, "_xs", tuple(x for x, _ in points))

    def ttft_ms(self, prompt_tokens: int) -> float:
        """Time from admission to the first token for a prompt of ``prompt_tokens``."""
        return self.ttft_base_ms + self.ttft_per_prompt_token_ms * prompt_tokens

    def batch_factor(self, running: int) -> float:
        """Slow-down of each decode step with ``running`` requests in the batch."""
        pts = self.batch_points
        if running <= pts[0][0] or len(pts) == 1:
            return pts[0][1]
        i = bisect.bisect_right(self._xs, running)
        if i >= len(pts):
            (x0, y0), (x1, y1) = pts[-2], pts[-1]
        else:
            (x0, y0), (x1, y1) = pts[i - 1], pts[i]
        return y0 + (y1 - y0) * (running - x0) / (x1 - x0)

    def itl_ms_at(self, running: int, context_tokens: int) -> float:
        """Gap before the next token of a request with ``context_tokens`` in its KV cache."""
        per_token = self.itl_ms + self.itl_per_context_token_ms * context_tokens
        return per_token * self.batch_factor(running)

    def flat(self, ttft_ms: float | None, itl_ms: float | None) -> Profile:
        """This profile with a fixed TTFT and/or a fixed inter-token latency (test knobs)."""
        out = self
        if ttft_ms is not None:
            out = replace(out, ttft_base_ms=ttft_ms, ttft_per_prompt_token_ms=0.0)
        if itl_ms is not None:
            out = replace(
                out, itl_ms=itl_ms, itl_per_context_token_ms=0.0, batch_points=((1, 1.0),)
            )
        return out


def _parse(name: str, raw: dict[str, Any]) -> Profile:
    mode = str(raw["mode"])
    if mode not in MODES:
        raise ValueError(f"profile {name}: mode {mode!r} is not one of {MODES}")
    points = tuple(
        (int(k), float(val)) for k, val in dict(raw.get("batch_factor", {1: 1.0})).items()
    )
    return Profile(
        name=name,
        version=Version.parse(str(raw["version"])),
        mode=mode,
        warmup_seconds=float(raw["warmup_seconds"]),
        ttft_base_ms=float(raw["ttft_base_ms"]),
        ttft_per_prompt_token_ms=float(raw["ttft_per_prompt_token_ms"]),
        itl_ms=float(raw["itl_ms"]),
        itl_per_context_token_ms=float(raw["itl_per_context_token_ms"]),
        batch_points=points,
        max_num_seqs=int(raw.get("max_num_seqs", 256)),
        kv_cache_tokens=int(raw.get("kv_cache_tokens", 500_000)),
        source=str(raw.get("source", "")),
    )


def load_profiles(path: Path | None = None) -> dict[str, Profile]:
    """All profiles of ``path`` (default: the packaged ``data/profiles.yaml``)."""
    if path is None:
        text = resources.files("vllm_operator.sim").joinpath("data/profiles.yaml").read_text()
    else:
        text = path.read_text()
    raw = yaml.safe_load(text) or {}
    return {str(name): _parse(str(name), body) for name, body in raw.get("profiles", {}).items()}


def mode_of(
    *, enforce_eager: bool, optimization_level: str | None, performance_mode: str | None
) -> str:
    """The profile mode a ``vllm serve`` command line runs in (see vllm-facts)."""
    if enforce_eager or optimization_level == "0":
        return "eager"
    if performance_mode == "throughput":
        return "throughput"
    return "default"


def choose(profiles: dict[str, Profile], version: Version, mode: str) -> Profile:
    """The profile of the newest version <= ``version`` having ``mode``.

    ``throughput`` falls back to a newer ``default`` profile (throughput mode only raises
    batch limits); a version older than every profile takes the oldest one of its mode.
    """

    def newest(m: str) -> Profile | None:
        older = [p for p in profiles.values() if p.mode == m and p.version <= version]
        return max(older, key=lambda p: p.version) if older else None

    best = newest(mode)
    if mode == "throughput":
        fallback = newest("default")
        if fallback is not None and (best is None or fallback.version > best.version):
            best = fallback
    if best is None:
        same_mode = [p for p in profiles.values() if p.mode == mode] or [
            p for p in profiles.values() if p.mode == "default"
        ]
        if not same_mode:
            raise ValueError(f"no simulator profile for mode {mode!r}")
        best = min(same_mode, key=lambda p: p.version)
    return best
