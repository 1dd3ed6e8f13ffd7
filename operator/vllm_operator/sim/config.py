"""Everything one simulator process runs with, decided once at start-up.

Why a value object: the CLI, the env-var fallback used by rendered pods, and in-process
tests must all produce the same thing, and the server must not read the environment
itself. ``SimConfig.create`` fills the fields that follow from others (profile, limits).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vllm_operator.engine.version import Version, v
from vllm_operator.sim import answers as answers_mod
from vllm_operator.sim import profiles as profiles_mod
from vllm_operator.sim.answers import AnswerBook
from vllm_operator.sim.group import GroupRole
from vllm_operator.sim.noise import Noise
from vllm_operator.sim.profiles import Profile

DEFAULT_VERSION = "0.17.0"
DEFAULT_MAX_MODEL_LEN = 32768


@dataclass(frozen=True)
class Faults:
    """Injected failures. Token counts are "after N tokens were sent"; ``None`` = off.

    ``stall_seconds`` and ``die_after_seconds`` are wall-clock time (not scaled by the time
    scale): a fault is about what a client sees, and tests choose it directly.
    ``die_after_seconds``: the engine dies that long after the server starts listening:
    ``/health`` answers 503 (as vLLM's does once its engine is dead), completions 500, and
    streams in flight are cut. ``crash_after_seconds``: the process exits (status 1) that
    long after listening, as a server killed by a fault or the OOM killer: its kubelet
    restarts the container and every counter starts again from zero.
    """

    error_rate: float = 0.0
    error_status: int = 500
    stall_after_tokens: int | None = None
    stall_seconds: float = 0.0
    truncate_after_tokens: int | None = None
    malformed_after_tokens: int | None = None
    drop_after_tokens: int | None = None
    wrong_usage: bool = False
    die_after_seconds: float | None = None
    # Only on requests marked as live traffic (header ``x-sim-live``): what a benchmark's
    # requests never meet, so a candidate passes its gate and fails its canary.
    live_error_rate: float = 0.0
    live_delay_seconds: float = 0.0  # wall-clock, before the first token (TTFT and E2E)
    # A stream that breaks after its 200 header: vLLM sends an error chunk, then [DONE]; the
    # instrumentator counts a 2xx and the engine no finished request (a non-streaming one
    # answers 500).
    live_stream_error_rate: float = 0.0
    # A request that hangs after its header until the client gives up (at most
    # HANG_LIMIT_SECONDS): no token, no finished request; 2xx when streamed.
    live_hang_rate: float = 0.0
    crash_after_seconds: float | None = None


HANG_LIMIT_SECONDS = 300.0
"""The longest a hung request is held when its client never leaves (wall-clock)."""


KEEP_ALIVE_SECONDS = 5.0
"""vLLM's API server runs uvicorn with ``timeout_keep_alive=VLLM_HTTP_TIMEOUT_KEEP_ALIVE``,
whose default is 5 s (vllm/envs.py)."""


@dataclass(frozen=True)
class SimConfig:
    """One simulator's settings. Build with :meth:`create` unless you set every field."""

    model: str
    profile: Profile
    version: Version = field(default_factory=lambda: v(DEFAULT_VERSION))
    served_model_names: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 0
    api_key: str | tuple[str, ...] | None = None
    """The key (or keys: vLLM's ``--api-key`` takes one or more) that /v1 requires."""
    max_num_seqs: int = 256
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    time_scale: float = 1.0
    warmup_seconds: float = 0.0  # wall-clock, already scaled
    degraded: bool = False
    faults: Faults = field(default_factory=Faults)
    seed: int | None = None
    """Seed of the injected-error and noise draws; None: errors use 0, noise a random one."""
    noise: Noise = field(default_factory=Noise)
    answers: AnswerBook = field(default_factory=AnswerBook)
    ld_library_path: str | None = None  # as the process saw it; None = unset
    ledger_size: int = 10_000
    group: GroupRole | None = None
    """This server's place in a multi-node group (``sim.group``); None: one node."""
    ray_head: tuple[str, int] | None = None
    """The Ray cluster this server's Ray executor runs on (``sim.ray_cluster``: a node
    that leaves fails the engine); None: no Ray cluster, or another backend."""
    keep_alive_seconds: float = KEEP_ALIVE_SECONDS
    """A connection idle this long (wall-clock: no request yet, a request half sent, or
    between requests) is closed, as vLLM's server does; 2,000 idle connections otherwise
    stayed open for over a minute."""

    @property
    def model_names(self) -> tuple[str, ...]:
        """Names clients may put in ``model``; the first is reported in responses."""
        return self.served_model_names or (self.model,)

    @classmethod
    def create(
        cls,
        model: str,
        *,
        version: str | Version = DEFAULT_VERSION,
        mode: str = "default",
        profile: str | Profile | None = None,
        time_scale: float = 1.0,
        warmup_seconds: float | None = None,
        max_num_seqs: int | None = None,
        ttft_ms: float | None = None,
        itl_ms: float | None = None,
        answers_path: Path | None = None,
        answers: AnswerBook | None = None,
        profiles_path: Path | None = None,
        **fields: object,
    ) -> SimConfig:
        """A config with the profile chosen like the CLI does (see :mod:`.profiles`).

        ``warmup_seconds`` is wall-clock (not scaled); by default the profile's warm-up
        times ``time_scale``. ``ttft_ms``/``itl_ms`` replace the profile's timing with
        constants (model milliseconds, still scaled).
        """
        ver = version if isinstance(version, Version) else Version.parse(version)
        if time_scale <= 0:
            raise ValueError("time scale must be > 0")
        keep_alive = fields.get("keep_alive_seconds", KEEP_ALIVE_SECONDS)
        if not isinstance(keep_alive, int | float) or not 0 < keep_alive <= 3600:
            raise ValueError("keep-alive seconds must be > 0 and at most 3600")
        if isinstance(profile, Profile):
            prof = profile
        else:
            table = profiles_mod.load_profiles(profiles_path)
            if profile is None:
                prof = profiles_mod.choose(table, ver, mode)
            elif profile in table:
                prof = table[profile]
            else:
                raise ValueError(f"unknown profile {profile!r}; known: {', '.join(sorted(table))}")
        prof = prof.flat(ttft_ms, itl_ms)
        seqs = max_num_seqs
        if seqs is None:
            seqs = prof.max_num_seqs
            if mode == "throughput" and prof.mode != "throughput":
                seqs *= 2  # throughput mode doubles the default (vllm-facts)
        warmup = prof.warmup_seconds * time_scale if warmup_seconds is None else warmup_seconds
        book = answers if answers is not None else answers_mod.load(answers_path)
        return cls(
            model=model,
            profile=prof,
            version=ver,
            max_num_seqs=seqs,
            time_scale=time_scale,
            warmup_seconds=warmup,
            answers=book,
            **fields,  # type: ignore[arg-type]
        )
