"""`vllm-operator sim MODEL [vLLM flags] [--sim-* knobs]`: a `vllm serve` stand-in.

Why it parses like vLLM: the operator's worst failure is a flag the running vLLM version
does not know (argparse exits 2, the pod crash-loops). The simulator accepts exactly the
catalogued flags of its emulated version (``engine.catalog.flags_of``) and refuses removed
or unknown ones the same way, naming the replacement for removed ones.

Every ``--sim-*`` knob also reads ``VLLM_SIM_<KNOB>`` (``--sim-time-scale`` ->
``VLLM_SIM_TIME_SCALE``), because rendered pods configure the simulator through container
env; the command line wins. ``--api-key`` falls back to ``VLLM_API_KEY`` as in vLLM.
``LD_LIBRARY_PATH`` feeds the CUBLAS start-up failure of 0.16/0.17 (see :mod:`.startup`).
The environment is read here, in :func:`run`, and nowhere else.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_operator.engine.catalog import flags_of, lookup
from vllm_operator.engine.version import Version
from vllm_operator.sim import profiles
from vllm_operator.sim.config import DEFAULT_MAX_MODEL_LEN, DEFAULT_VERSION, Faults, SimConfig
from vllm_operator.sim.noise import PRESETS, Noise
from vllm_operator.sim.runner import LISTENING_PREFIX, serve
from vllm_operator.sim.startup import StartupFailure

log = logging.getLogger("vllm_operator.sim")

_INT_FLAGS = {
    "--port",
    "--max-num-seqs",
    "--max-model-len",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--max-num-batched-tokens",
    "--seed",
}
_FLOAT_FLAGS = {"--gpu-memory-utilization"}


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("", "0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


@dataclass(frozen=True)
class Knob:
    """One ``--sim-*`` option and its environment fallback."""

    name: str
    kind: Callable[[str], Any]
    default: Any
    help: str

    @property
    def flag(self) -> str:
        return f"--sim-{self.name}"

    @property
    def env(self) -> str:
        return "VLLM_SIM_" + self.name.upper().replace("-", "_")

    @property
    def dest(self) -> str:
        return "sim_" + self.name.replace("-", "_")


KNOBS = (
    Knob("version", str, DEFAULT_VERSION, "vLLM version to emulate (flag set, profile, bugs)"),
    Knob("profile", str, None, "timing profile name (default: from version and launch mode)"),
    Knob("time-scale", float, 1.0, "multiply every modelled duration (0.01 = 100x faster)"),
    Knob("warmup-seconds", float, None, "wall-clock warm-up, replacing the profile's (scaled) one"),
    Knob("degraded", _bool, False, "answer the quality suite wrongly"),
    Knob("error-rate", float, 0.0, "fraction of requests answered with --sim-error-status"),
    Knob("error-status", int, 500, "HTTP status of injected errors"),
    Knob("stall-after-tokens", int, None, "pause each stream once after N tokens"),
    Knob("stall-seconds", float, 0.0, "length of that pause (wall-clock seconds)"),
    Knob("truncate-after-tokens", int, None, "end each stream after N tokens without [DONE]"),
    Knob("malformed-after-tokens", int, None, "send a broken JSON chunk after N tokens"),
    Knob("drop-after-tokens", int, None, "reset the connection after N tokens"),
    Knob("wrong-usage", _bool, False, "report one completion token more than streamed"),
    Knob("die-after-seconds", float, None, "engine dies N s after listening (/health 503)"),
    Knob(
        "seed",
        int,
        None,
        "seed of the injected-error draw (default 0) and of the noise draws (default: random)",
    ),
    Knob(
        "speed",
        float,
        1.0,
        "this server's speed relative to its profile (0.7: 30%% fewer tokens/s)",
    ),
    Knob("jitter", float, 0.0, "per-request timing noise, percent (log-normal sigma)"),
    Knob("jit-stall-ms", float, 0.0, "first use of each batch-size bucket stalls once (model ms)"),
    Knob("jit-stall-chance", float, 1.0, "chance a bucket needs that compile, drawn per start"),
    Knob("preset", str, None, f"named noise knobs: {', '.join(PRESETS)} (docs/bench.md)"),
    Knob("ttft-ms", float, None, "constant TTFT in model ms, replacing the profile's"),
    Knob("itl-ms", float, None, "constant inter-token latency in model ms (no batch effect)"),
    Knob("answers", str, None, "answers YAML (default: the packaged data/answers.yaml)"),
)


class _Parser(argparse.ArgumentParser):
    def exit(self, status: int = 0, message: str | None = None) -> Any:
        if message:
            self._print_message(message, sys.stderr)
        raise _Exit(status)


class _Exit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _dest(name: str) -> str:
    return name.lstrip("-").replace("-", "_")


def build_parser(prog: str, version: Version, env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The full parser: vLLM flags of ``version`` plus the ``--sim-*`` knobs."""
    parser = _Parser(
        prog=prog,
        allow_abbrev=False,
        description=(
            f"Simulate `vllm serve` of vLLM {version}: OpenAI-compatible endpoints, "
            "vLLM's warm-up, metrics and failures, timing from a profile. "
            "Flags follow vllm_operator.engine.catalog for that version."
        ),
        epilog="Every --sim-X knob can also be set with the environment variable VLLM_SIM_X "
        "(upper case, '-' -> '_'); the command line wins.",
    )
    parser.add_argument("model", help="model name or path (as `vllm serve MODEL`)")
    vllm = parser.add_argument_group(f"vLLM {version} flags")
    for flag in flags_of(version):
        kwargs: dict[str, Any] = {"dest": _dest(flag.name), "help": flag.source or "vLLM flag"}
        if not flag.takes_value:
            kwargs["action"] = "store_true"
        else:
            if flag.choices:
                kwargs["choices"] = flag.choices
            if flag.name in _INT_FLAGS:
                kwargs["type"] = int
            elif flag.name in _FLOAT_FLAGS:
                kwargs["type"] = float
            if flag.name == "--served-model-name":
                kwargs["nargs"] = "+"
        vllm.add_argument(*flag.spellings, **kwargs)
    sim = parser.add_argument_group("simulator knobs (env VLLM_SIM_*)")
    for knob in KNOBS:
        default = knob.default
        if knob.env in env:
            try:
                default = knob.kind(env[knob.env])
            except ValueError as e:
                parser.error(f"{knob.env}={env[knob.env]!r}: {e}")
        if knob.kind is _bool:
            sim.add_argument(
                knob.flag, dest=knob.dest, action=argparse.BooleanOptionalAction,
                default=default, help=knob.help,
            )  # fmt: skip
        else:
            sim.add_argument(
                knob.flag, dest=knob.dest, type=knob.kind, default=default, help=knob.help
            )
    return parser


def _unrecognized(parser: argparse.ArgumentParser, unknown: list[str], version: Version) -> None:
    for token in unknown:
        if not token.startswith("-"):
            continue
        flag = lookup(token)
        if flag is None or flag.exists_in(version):
            continue
        if flag.removed_in is not None and version >= flag.removed_in:
            why = f"removed in vLLM {flag.removed_in}"
            if flag.replacement:
                why += f"; instead: {flag.replacement}"
        else:
            why = f"added in vLLM {flag.since}, this is vLLM {version}"
        parser.error(f"unrecognized arguments: {token} ({why})")
    parser.error(f"unrecognized arguments: {' '.join(unknown)}")


def config_from_args(argv: list[str], prog: str, env: Mapping[str, str]) -> SimConfig:
    """Parse like ``vllm serve`` of the emulated version; raise ``_Exit`` like argparse."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--sim-version", default=env.get("VLLM_SIM_VERSION"))
    pre.add_argument("--sim-preset", default=env.get("VLLM_SIM_PRESET"))
    known, _ = pre.parse_known_args(argv)
    if known.sim_version is None:  # a preset may name the version it was calibrated on
        preset = PRESETS.get(known.sim_preset or "", {})
        known.sim_version = str(preset.get("version", DEFAULT_VERSION))
    try:
        version = Version.parse(known.sim_version)
    except ValueError as e:
        _Parser(prog=prog).error(str(e))
    parser = build_parser(prog, version, env)
    _apply_preset(parser, argv, env)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _unrecognized(parser, unknown, version)
    mode = profiles.mode_of(
        enforce_eager=bool(getattr(args, "enforce_eager", False)),
        optimization_level=getattr(args, "optimization_level", None),
        performance_mode=getattr(args, "performance_mode", None),
    )
    faults = Faults(
        error_rate=args.sim_error_rate,
        error_status=args.sim_error_status,
        stall_after_tokens=args.sim_stall_after_tokens,
        stall_seconds=args.sim_stall_seconds,
        truncate_after_tokens=args.sim_truncate_after_tokens,
        malformed_after_tokens=args.sim_malformed_after_tokens,
        drop_after_tokens=args.sim_drop_after_tokens,
        wrong_usage=args.sim_wrong_usage,
        die_after_seconds=args.sim_die_after_seconds,
    )
    try:
        noise = Noise(
            speed=args.sim_speed,
            jitter_percent=args.sim_jitter,
            jit_stall_ms=args.sim_jit_stall_ms,
            jit_stall_chance=args.sim_jit_stall_chance,
        )
        return SimConfig.create(
            args.model,
            version=version,
            mode=mode,
            profile=args.sim_profile,
            time_scale=args.sim_time_scale,
            warmup_seconds=args.sim_warmup_seconds,
            max_num_seqs=getattr(args, "max_num_seqs", None),
            ttft_ms=args.sim_ttft_ms,
            itl_ms=args.sim_itl_ms,
            answers_path=Path(args.sim_answers) if args.sim_answers else None,
            served_model_names=tuple(getattr(args, "served_model_name", None) or ()),
            host=getattr(args, "host", None) or "0.0.0.0",
            port=8000 if getattr(args, "port", None) is None else args.port,
            api_key=getattr(args, "api_key", None) or env.get("VLLM_API_KEY") or None,
            max_model_len=getattr(args, "max_model_len", None) or DEFAULT_MAX_MODEL_LEN,
            degraded=args.sim_degraded,
            faults=faults,
            seed=args.sim_seed,
            noise=noise,
            ld_library_path=env.get("LD_LIBRARY_PATH"),
        )
    except ValueError as e:
        parser.error(str(e))


def _apply_preset(parser: argparse.ArgumentParser, argv: list[str], env: Mapping[str, str]) -> None:
    """``--sim-preset NAME``: its knobs become defaults; explicit flags and env vars win."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--sim-preset", default=env.get("VLLM_SIM_PRESET"))
    known, _ = pre.parse_known_args(argv)
    if known.sim_preset is None:
        return
    preset = PRESETS.get(known.sim_preset)
    if preset is None:
        parser.error(f"--sim-preset {known.sim_preset!r}: known presets: {', '.join(PRESETS)}")
    knobs = {k.name: k for k in KNOBS}
    defaults = {
        knobs[n].dest: v for n, v in preset.items() if n in knobs and knobs[n].env not in env
    }
    parser.set_defaults(**defaults)


def _setup_logging() -> None:
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            logging.Formatter("%(levelname)s %(asctime)s [sim] %(message)s", "%m-%d %H:%M:%S")
        )
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def run(argv: list[str], prog: str, env: Mapping[str, str]) -> int:
    """:func:`main` with the environment injected (tests pass their own)."""
    try:
        config = config_from_args(argv, prog, env)
    except _Exit as e:
        return e.status
    _setup_logging()

    def listening(url: str) -> None:
        gc.freeze()  # start-up objects never die: keep them out of every later GC pass
        sys.stdout.write(f"{LISTENING_PREFIX}{url}\n")
        sys.stdout.flush()

    async def _serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(config, stop=stop, on_listening=listening)

    try:
        asyncio.run(_serve())
    except StartupFailure as e:
        log.error("EngineCore failed to start. %s", e.log)
        return e.exit_code
    return 0


def main(argv: list[str], prog: str) -> int:
    """Entry point of ``vllm-operator sim`` and ``python -m vllm_operator.sim``."""
    return run(argv, prog, os.environ)
