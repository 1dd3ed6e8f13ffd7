"""`vllm-operator sim MODEL [vLLM flags] [--sim-* knobs]`: a `vllm serve` stand-in.

Why it parses like vLLM: the operator's worst failure is a flag the running vLLM version
does not know (argparse exits 2, the pod crash-loops). The simulator reads its vLLM
arguments with ``engine.argv`` over the table recorded from the real parser of its
``--sim-version`` (``engine.flagdata``): it accepts exactly what that `vllm serve` accepts
and refuses the rest with vLLM's own argparse line and exit status 2 (followed by one
``[sim]`` line saying when the flag went or came, and what replaces it).

Every ``--sim-*`` knob also reads ``VLLMOP_SIM_<KNOB>`` (``--sim-time-scale`` ->
``VLLMOP_SIM_TIME_SCALE``), because rendered pods configure the simulator through container
env; the command line wins. The prefix is outside ``VLLM_``, vLLM's own namespace (vLLM
warns about unknown ``VLLM_*`` variables); the old ``VLLM_SIM_<KNOB>`` names are still read
when the new one is absent, with a warning. The emulated version is never a silent guess:
``--sim-version``, else ``VLLMOP_SIM_VERSION``, else ``VLLMOP_VLLM_VERSION`` (the version the
operator resolved and renders into every vLLM pod), else the old ``VLLM_SIM_VERSION``, else
the version a ``--sim-preset`` was calibrated on, else ``DEFAULT_VERSION`` with a warning
naming the variable to set. ``--api-key`` falls back to ``VLLM_API_KEY`` as in vLLM.
``LD_LIBRARY_PATH`` feeds the CUBLAS start-up failure of 0.16/0.17 (see ``sim/startup.py``).
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

from vllm_operator.booleans import parse_bool
from vllm_operator.commands.parsing import Parser
from vllm_operator.engine import argv as vllm_argv
from vllm_operator.engine import catalog, extra_args, flagdata
from vllm_operator.engine.version import Version
from vllm_operator.errors import VLLMOperatorError
from vllm_operator.sim import profiles
from vllm_operator.sim.config import (
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_VERSION,
    KEEP_ALIVE_SECONDS,
    Faults,
    SimConfig,
)
from vllm_operator.sim.group import role_from
from vllm_operator.sim.noise import PRESETS, Noise
from vllm_operator.sim.ray_cluster import executor_head
from vllm_operator.sim.runner import LISTENING_PREFIX, serve
from vllm_operator.sim.startup import StartupFailure

log = logging.getLogger("vllm_operator.sim")


def _bool(text: str) -> bool:
    """A boolean knob's variable (``booleans.parse_bool``); blank is its default, off."""
    return False if not text.strip() else parse_bool(text)


ENV_PREFIX = "VLLMOP_SIM_"
LEGACY_ENV_PREFIX = "VLLM_SIM_"  # the names before 0.2, in vLLM's namespace: still read
# The vLLM version the operator resolved for the pod (render/deployment.py).
OPERATOR_VERSION_ENV = "VLLMOP_VLLM_VERSION"


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
        return ENV_PREFIX + self.name.upper().replace("-", "_")

    @property
    def legacy_env(self) -> str:
        return LEGACY_ENV_PREFIX + self.name.upper().replace("-", "_")

    def from_env(self, env: Mapping[str, str]) -> tuple[str, str] | None:
        """``(variable, value)`` set for this knob, the new name first."""
        for name in (self.env, self.legacy_env):
            if name in env:
                return name, env[name]
        return None

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
    Knob("live-error-rate", float, 0.0, "like error-rate, only on requests with x-sim-live"),
    Knob(
        "live-delay-seconds",
        float,
        0.0,
        "wall-clock delay before the first token, only on requests with x-sim-live",
    ),
    Knob(
        "live-stream-error-rate",
        float,
        0.0,
        "fraction of x-sim-live streams that break after one token (error chunk, [DONE])",
    ),
    Knob(
        "live-hang-rate",
        float,
        0.0,
        "fraction of x-sim-live requests held after the header until the client leaves",
    ),
    Knob("crash-after-seconds", float, None, "the process exits (status 1) N s after listening"),
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
    Knob("ttft-tail-percent", float, 0.0, "share of requests whose TTFT gets --sim-ttft-tail-ms"),
    Knob("ttft-tail-ms", float, 0.0, "extra TTFT of that share (model ms): a TTFT tail"),
    Knob("preset", str, None, f"named noise knobs: {', '.join(PRESETS)} (docs/bench.md)"),
    Knob("ttft-ms", float, None, "constant TTFT in model ms, replacing the profile's"),
    Knob("itl-ms", float, None, "constant inter-token latency in model ms (no batch effect)"),
    Knob("answers", str, None, "answers YAML (default: the packaged data/answers.yaml)"),
    Knob(
        "keep-alive-seconds",
        float,
        KEEP_ALIVE_SECONDS,
        "close a connection idle this long, wall-clock (vLLM's default: 5)",
    ),
)


class _Parser(Parser):
    def exit(self, status: int = 0, message: str | None = None) -> Any:
        if message:
            self._print_message(message, sys.stderr)
        raise _Exit(status)


class _Exit(VLLMOperatorError):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


FIRST_START = (
    "First start: like vLLM, the server answers /health and requests only after its "
    "warm-up, simulated from the profile: about 54 s for an eager launch and 115 s with "
    "torch.compile and CUDA graphs (times --sim-time-scale). On a laptop, skip most of it: "
    "`vllm-operator sim my-model --port 8000 --sim-warmup-seconds 2`."
)
"""The warm-up a first start waits through, said in --help (profiles.yaml's warmup_seconds)."""


def build_parser(prog: str, version: Version, env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The ``--sim-*`` knobs (vLLM's own flags are read by ``engine.argv``)."""
    parser = _Parser(
        prog=prog,
        usage=f"{prog} MODEL [--port PORT] [vLLM flags ...] [--sim-* knobs ...]",
        allow_abbrev=False,
        description=(
            f"Simulate `vllm serve` of vLLM {version}: OpenAI-compatible endpoints, "
            "vLLM's warm-up, metrics and failures, timing from a profile. "
            "vLLM flags are accepted exactly as the recorded parser of that release "
            "(vllm_operator/engine/flags) accepts them; --port (default 8000) and --host "
            "are vLLM's. " + FIRST_START
        ),
        epilog="Every --sim-X knob can also be set with the environment variable VLLMOP_SIM_X "
        "(upper case, '-' -> '_'; the old VLLM_SIM_X is read too); the command line wins. "
        f"The version: --sim-version, else VLLMOP_SIM_VERSION, else {OPERATOR_VERSION_ENV} "
        f"(set by the operator in every vLLM pod), else a preset's, else {DEFAULT_VERSION} "
        "with a warning.",
    )
    sim = parser.add_argument_group("simulator knobs (env VLLMOP_SIM_*)")
    for knob in KNOBS:
        default = knob.default
        found = knob.from_env(env)
        if found is not None:
            try:
                default = knob.kind(found[1])
            except ValueError as e:
                parser.error(f"{found[0]}={found[1]!r}: {e}")
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


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(``--sim-*`` knobs and help, vLLM's arguments), each in their original order."""
    booleans = {k.flag for k in KNOBS if k.kind is _bool} | {
        f"--no-sim-{k.name}" for k in KNOBS if k.kind is _bool
    }
    sim: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in ("-h", "--help"):
            sim.append(token)
        elif token.startswith(("--sim-", "--no-sim-")):
            sim.append(token)
            if "=" not in token and token not in booleans and i + 1 < len(argv):
                sim.append(argv[i + 1])
                i += 1
        else:
            rest.append(token)
        i += 1
    return sim, rest


def _refuse(table: flagdata.FlagTable, failure: vllm_argv.ParseFailure, args: list[str]) -> Any:
    """vLLM's own error line and exit status 2, then what the simulator knows about why."""
    sys.stderr.write("usage: vllm serve [model_tag] [options]\n")
    sys.stderr.write(f"{failure.prog}: error: {failure.message}\n")
    notes = []
    if failure.message.startswith("unrecognized arguments:"):
        for token in args:
            if not token.startswith("--"):
                continue
            name = vllm_argv.long_name(token)
            if name in table.by_spelling:
                continue
            why = catalog.why_missing(name, table.version)
            note = catalog.note_for(name)
            close = extra_args.suggestions(table, token)
            parts = [f"{name}: {why or 'not an option'} (this is vLLM {table.version})"]
            if note is not None:
                parts.append(f"instead: {note.replacement}")
            if close:
                parts.append("did you mean " + " or ".join(close) + "?")
            notes.append("; ".join(parts))
    for note_line in notes:
        sys.stderr.write(f"[sim] {note_line}\n")
    raise _Exit(2)


def _read(
    argv: list[str], prog: str, env: Mapping[str, str]
) -> tuple[
    argparse.Namespace, argparse.ArgumentParser, Version, flagdata.FlagTable, vllm_argv.Parsed
]:
    """The knobs and vLLM's reading of its arguments; raise ``_Exit`` like argparse."""
    sim_args, vllm_args = _split(list(argv))
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    env_version, source = version_source(env)
    pre.add_argument("--sim-version", default=env_version if source else None)
    pre.add_argument("--sim-preset", default=_preset_env(env))
    known, _ = pre.parse_known_args(sim_args)
    if known.sim_version is None:  # a preset may name the version it was calibrated on
        preset = PRESETS.get(known.sim_preset or "", {})
        known.sim_version = str(preset.get("version", DEFAULT_VERSION))
    try:
        version = Version.parse(known.sim_version)
    except ValueError as e:
        _Parser(prog=prog).error(str(e))
    parser = build_parser(prog, version, env)
    _apply_preset(parser, sim_args, env)
    args = parser.parse_args(sim_args)
    table = flagdata.table_for(version)
    if table is None:
        parser.error(f"vLLM {version} is older than {flagdata.oldest()}, the oldest recorded")
    parsed = vllm_argv.parse(table, vllm_args)
    if parsed.exception is not None:
        sys.stderr.write(f"{parsed.exception}\n")
        raise _Exit(1)
    if parsed.failure is not None:
        _refuse(table, parsed.failure, vllm_args)
    if parsed.model is None:
        parser.error("the model is required (as `vllm serve MODEL`)")
    return args, parser, version, table, parsed


def config_from_args(argv: list[str], prog: str, env: Mapping[str, str]) -> SimConfig:
    """Parse like ``vllm serve`` of the emulated version; raise ``_Exit`` like argparse."""
    args, parser, version, table, parsed = _read(argv, prog, env)
    assert parsed.model is not None
    after = extra_args.after_parse(parsed, table)
    if after.refusals:
        # vLLM raises after argparse (serve's validate, VllmConfig): a traceback, exit 1
        for refusal in after.refusals:
            sys.stderr.write(f"{refusal.reason}\n")
        raise _Exit(1)
    eager = after.eager
    performance_mode = parsed.value("performance_mode")
    mode = profiles.mode_of(
        enforce_eager=eager,
        optimization_level=None,
        performance_mode=performance_mode if isinstance(performance_mode, str) else None,
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
        live_error_rate=args.sim_live_error_rate,
        live_delay_seconds=args.sim_live_delay_seconds,
        live_stream_error_rate=args.sim_live_stream_error_rate,
        live_hang_rate=args.sim_live_hang_rate,
        crash_after_seconds=args.sim_crash_after_seconds,
    )
    served = parsed.value("served_model_name")
    port = parsed.value("port")
    max_len = parsed.value("max_model_len")
    max_seqs = parsed.value("max_num_seqs")
    try:
        noise = Noise(
            speed=args.sim_speed,
            jitter_percent=args.sim_jitter,
            jit_stall_ms=args.sim_jit_stall_ms,
            jit_stall_chance=args.sim_jit_stall_chance,
            ttft_tail_percent=args.sim_ttft_tail_percent,
            ttft_tail_ms=args.sim_ttft_tail_ms,
        )
        return SimConfig.create(
            parsed.model,
            version=version,
            mode=mode,
            profile=args.sim_profile,
            time_scale=args.sim_time_scale,
            warmup_seconds=args.sim_warmup_seconds,
            max_num_seqs=max_seqs if isinstance(max_seqs, int) else None,
            ttft_ms=args.sim_ttft_ms,
            itl_ms=args.sim_itl_ms,
            answers_path=Path(args.sim_answers) if args.sim_answers else None,
            served_model_names=tuple(served) if isinstance(served, list) else (),
            host=parsed.value("host") or "0.0.0.0",
            port=port if isinstance(port, int) else 8000,
            api_key=_api_keys(parsed.value("api_key")) or env.get("VLLM_API_KEY") or None,
            max_model_len=max_len if isinstance(max_len, int) else DEFAULT_MAX_MODEL_LEN,
            degraded=args.sim_degraded,
            faults=faults,
            seed=args.sim_seed,
            noise=noise,
            ld_library_path=env.get("LD_LIBRARY_PATH"),
            keep_alive_seconds=args.sim_keep_alive_seconds,
            group=role_from(parsed),
            ray_head=executor_head(parsed.value("distributed_executor_backend")),
        )
    except ValueError as e:
        parser.error(str(e))


def _api_keys(value: object) -> tuple[str, ...]:
    """``--api-key`` takes one or more keys (nargs "+" in every recorded release)."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return ()


def _preset_env(env: Mapping[str, str]) -> str | None:
    return env.get(ENV_PREFIX + "PRESET") or env.get(LEGACY_ENV_PREFIX + "PRESET")


def version_source(env: Mapping[str, str]) -> tuple[str, str | None]:
    """The emulated version from the environment and the variable it came from (None: default)."""
    for name in (ENV_PREFIX + "VERSION", OPERATOR_VERSION_ENV, LEGACY_ENV_PREFIX + "VERSION"):
        if env.get(name):
            return env[name], name
    return DEFAULT_VERSION, None


def _warn_about_env(argv: list[str], env: Mapping[str, str]) -> None:
    given = any(a == "--sim-version" or a.startswith("--sim-version=") for a in argv)
    preset = any(a == "--sim-preset" or a.startswith("--sim-preset=") for a in argv)
    if not given and not preset and not _preset_env(env):
        version, source = version_source(env)
        if source is None:
            log.warning(
                "no vLLM version given: emulating %s; set VLLMOP_SIM_VERSION (or "
                "--sim-version) to the version of the image this stands in for",
                version,
            )
    legacy = sorted(n for n in env if n.startswith(LEGACY_ENV_PREFIX))
    if legacy:
        log.warning(
            "%s: renamed to %s* (VLLM_* is vLLM's namespace); the old names still work",
            ", ".join(legacy),
            ENV_PREFIX,
        )


def _apply_preset(parser: argparse.ArgumentParser, argv: list[str], env: Mapping[str, str]) -> None:
    """``--sim-preset NAME``: its knobs become defaults; explicit flags and env vars win."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--sim-preset", default=_preset_env(env))
    known, _ = pre.parse_known_args(argv)
    if known.sim_preset is None:
        return
    preset = PRESETS.get(known.sim_preset)
    if preset is None:
        parser.error(f"--sim-preset {known.sim_preset!r}: known presets: {', '.join(PRESETS)}")
    knobs = {k.name: k for k in KNOBS}
    defaults = {
        knobs[n].dest: v for n, v in preset.items() if n in knobs and knobs[n].from_env(env) is None
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
    _warn_about_env(argv, env)

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


def run_parse_only(argv: list[str], prog: str, env: Mapping[str, str]) -> int:
    """Exit status of reading the command line alone (0: vLLM would accept it)."""
    try:
        _read(argv, prog, env)
    except _Exit as e:
        return e.status
    return 0


def main(argv: list[str], prog: str) -> int:
    """Entry point of ``vllm-operator sim`` and ``python -m vllm_operator.sim``."""
    return run(argv, prog, os.environ)
