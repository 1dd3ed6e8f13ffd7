"""Hand-written knowledge about `vllm serve` flags, layered over the recorded tables.

Which flag exists in which release, its spellings, arity and choices come only from the
tables recorded from vLLM's own parser (``flagdata``, ``engine/flags/*.json``). What a
parser cannot say is written here, keyed by the flag's long name or its argparse ``dest``:

- ``NOTES``: why a flag went away and what to write instead (shown when a release refuses
  it; the release where it went is computed from the tables, never typed here);
- ``OWNED``: the settings the spec already controls; setting them again in
  ``extraArgs``, in any spelling vLLM accepts, contradicts the spec;
- ``REQUIRES``: options vLLM's ``validate_parsed_serve_args`` refuses without another,
  right after argparse (the recorded forms' ``after`` verdicts check them per release);
- ``NO_SERVER``: options that leave no HTTP server where the probes and the benchmark
  look (or read flags from a file the operator cannot check): always refused.

Sources: ``shared/docs/vllm-facts.md`` (vLLM's released code, per version).
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.engine import flagdata
from vllm_operator.engine.version import Version


@dataclass(frozen=True)
class Note:
    """Why a flag is gone (or not there yet) and what to write instead."""

    replacement: str
    source: str


NOTES: dict[str, Note] = {
    "--disable-log-requests": Note(
        "drop it: request logging is off by default; --enable-log-requests turns it on",
        "vllm-facts: refused 0.17.0-0.32.0, accepted again in 0.33.0",
    ),
    "--guided-decoding-backend": Note(
        "use --structured-outputs-config '{\"backend\": ...}'",
        "vllm-facts: --guided-decoding-* gone in 0.12.0",
    ),
    "--max-seq-len-to-capture": Note(
        "use --max-cudagraph-capture-size (from 0.11.1)",
        "vllm-facts: gone in 0.11.0",
    ),
    "--rope-scaling": Note(
        "use --hf-overrides '{\"rope_scaling\": ...}'", "vllm-facts: gone in 0.11.1"
    ),
    "--rope-theta": Note(
        "use --hf-overrides '{\"rope_theta\": ...}'", "vllm-facts: gone in 0.11.1"
    ),
    "--task": Note("use --runner / --convert", "vllm-facts: gone in 0.13.0"),
    "--cuda-graph-sizes": Note("use --cudagraph-capture-sizes", "vllm-facts: gone in 0.13.0"),
    "--logits-processor-pattern": Note("drop it", "vllm-facts: gone in 0.17.0"),
    "--swap-space": Note("drop it", "vllm-facts: gone in 0.18.0"),
    "--disable-frontend-multiprocessing": Note("drop it", "vllm-facts: gone in 0.19.0"),
    "--performance-mode": Note(
        "drop it: vLLM before 0.17.0 has no performance modes (use "
        "spec.engine.performanceMode, which emits the flag only where it exists), or "
        "upgrade to vLLM >= 0.17.0",
        "vLLM PR #34936, first released in 0.17.0",
    ),
    "--optimization-level": Note(
        "before 0.12.0 -O3 sets the compilation level (-O is --compilation-config there)",
        "vllm-facts: -O is the optimization level from 0.12.0",
    ),
}

# Flag families that went together: a member with no row of its own borrows the family's.
FAMILIES: dict[str, str] = {"--guided-decoding-": "--guided-decoding-backend"}

# argparse dest -> the spec field that owns it. "(operator-managed)": no field, never settable.
OWNED: dict[str, str] = {
    "host": "(operator-managed)",
    "port": "spec.service.port",
    "model": "spec.model.name",
    "served_model_name": "spec.model.servedModelName",
    "revision": "spec.model.revision",
    "tensor_parallel_size": "spec.engine.tensorParallelSize",
    "max_model_len": "spec.engine.maxModelLen",
    "gpu_memory_utilization": "spec.engine.gpuMemoryUtilization",
    "performance_mode": "spec.engine.performanceMode",
}


@dataclass(frozen=True)
class Requires:
    """``dest`` set (truthy) without ``needs``: vLLM raises ``message`` after argparse."""

    dest: str
    needs: str
    message: str
    source: str


_SERVE_VALIDATE = (
    "validate_parsed_serve_args: vllm/entrypoints/openai/cli_args.py in 0.11.0, 0.17.0, "
    "0.22.0; vllm/entrypoints/common/cli_args.py in 0.33.0"
)
REQUIRES: tuple[Requires, ...] = (
    Requires(
        "enable_log_outputs",
        "enable_log_requests",
        "TypeError: Error: --enable-log-outputs requires --enable-log-requests",
        _SERVE_VALIDATE,
    ),
    Requires(
        "enable_auto_tool_choice",
        "tool_call_parser",
        "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser",
        _SERVE_VALIDATE,
    ),
)


@dataclass(frozen=True)
class NoServer:
    """Why an option cannot run under the operator, and what to do instead."""

    why: str
    fix: str


_TLS = NoServer(
    "makes vLLM serve HTTPS, but the operator's probes and the benchmark Job speak plain "
    "HTTP to the pod, so the revision would never become Ready or be measured",
    "drop it; terminate TLS in front of the Service (an Ingress, Gateway or service mesh)",
)
# argparse dest -> why it is refused. Keyed by dest, so every spelling is covered.
NO_SERVER: dict[str, NoServer] = {
    "uds": NoServer(
        "makes vLLM listen on a Unix socket instead of the TCP port the probes, the Service "
        "and the benchmark use",
        "drop it; vLLM listens on spec.service.port",
    ),
    "headless": NoServer(
        "starts the engine without an API server: nothing answers on the probe port",
        "drop it; for a model that spans nodes set spec.resources.nodes (the operator "
        "then runs the workers headless itself)",
    ),
    "grpc": NoServer(
        "serves gRPC instead of the OpenAI HTTP API the probes and the benchmark use",
        "drop it",
    ),
    "ssl_keyfile": _TLS,
    "ssl_certfile": _TLS,
    "ssl_ca_certs": _TLS,
    "ssl_cert_reqs": _TLS,
    "ssl_ciphers": _TLS,
    "enable_ssl_refresh": _TLS,
    "config": NoServer(
        "makes vLLM read more flags from a YAML file before argparse; the operator cannot "
        "read that file, so a flag in it (eager mode, --host, one this release lacks) would "
        "escape every check here and could crash-loop the pod or break the probes",
        "put those flags in spec.engine.extraArgs, where each is checked against this vLLM "
        "release (the revision hash then covers them too)",
    ),
}


def ignored_config(version: Version) -> NoServer:
    """``--config=FILE`` (one item): vLLM's rewrite loads a YAML file only for ``--config
    FILE``, so argparse stores the path and vLLM ignores the file (read in
    ``FlexibleArgumentParser.parse_args``: ``if "--config" in args``)."""
    return NoServer(
        f"is ignored by vLLM {version}: it reads the YAML file only for --config FILE (two "
        "items), so the flags in the file would silently not apply",
        "put those flags in spec.engine.extraArgs, where each is checked against this vLLM "
        "release (the revision hash then covers them too)",
    )


# Flags whose value decides performance: summarised in status as the revision's key flags.
KEY_DESTS = frozenset(
    {
        "performance_mode",
        "enforce_eager",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "optimization_level",
        "compilation_config",
        "max_num_seqs",
        "max_num_batched_tokens",
        "max_model_len",
        "quantization",
        "kv_cache_dtype",
    }
)


def note_for(name: str) -> Note | None:
    """The note of ``--name`` or of its family."""
    if name in NOTES:
        return NOTES[name]
    for prefix, member in FAMILIES.items():
        if name.startswith(prefix):
            return NOTES[member]
    return None


def why_missing(name: str, version: Version) -> str:
    """Why ``--name`` is not an option of ``version``, from the recorded tables."""
    gone = flagdata.removed_in(name, version)
    if gone is not None:
        return f"removed in vLLM {gone}"
    later = flagdata.added_in(name, version)
    if later is not None:
        return f"added in vLLM {later}"
    return ""
