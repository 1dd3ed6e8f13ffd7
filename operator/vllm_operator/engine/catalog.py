"""The vLLM command-line flags this project knows, with the versions that have them.

One table, read by the engine policy (what the operator may pass to ``vllm serve``) and
by the simulator (what its emulated ``vllm serve`` accepts). Sources: vLLM's released code
of 0.10.2, 0.12.0, 0.16.0, 0.17.0, 0.22.0 and 0.33.0 as summarised in
``shared/docs/vllm-facts.md``.

Reading the table:
- ``since``: first version known to have the flag; ``None`` means every version this
  project supports (0.10.2 and newer) has it.
- ``removed_in``: first version known NOT to have it. For removals found between two
  checked releases ("by 0.12.0") this is the later release: versions in between are given
  the benefit of the doubt.
- ``replacement``: what to write instead, shown in the error.
- ``conflicts``: the spec field that already controls this flag; setting it in
  ``extraArgs`` as well is a contradiction (the policy reports it).

Only the flags the operator emits or polices, and those the simulator must understand, are
listed: a real vLLM accepts many more. The policy lets unknown flags through to vLLM (it is
the judge of its own CLI); the simulator rejects them, like an older vLLM would.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.engine.version import Version, v


@dataclass(frozen=True)
class Flag:
    """One ``vllm serve`` flag and its life across versions."""

    name: str
    aliases: tuple[str, ...] = ()
    takes_value: bool = True
    choices: tuple[str, ...] = ()
    since: Version | None = None
    removed_in: Version | None = None
    replacement: str = ""
    conflicts: str = ""
    source: str = ""

    def exists_in(self, version: Version) -> bool:
        """Whether ``vllm serve`` of ``version`` accepts this flag."""
        if self.since is not None and version < self.since:
            return False
        return not (self.removed_in is not None and version >= self.removed_in)

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


# The oldest release whose flags were checked; older versions are refused by the policy.
OLDEST_SUPPORTED = v("0.10.2")
NEWEST_CHECKED = v("0.33.0")

FLAGS: tuple[Flag, ...] = (
    # Server and model identity.
    Flag("--host", conflicts="(operator-managed)"),
    Flag("--port", conflicts="spec.service.port"),
    Flag("--served-model-name", conflicts="spec.model.servedModelName"),
    Flag("--revision", conflicts="spec.model.revision"),
    Flag("--api-key"),
    Flag("--download-dir"),
    Flag("--trust-remote-code", takes_value=False),
    Flag("--dtype"),
    Flag("--quantization", aliases=("-q",)),
    Flag("--kv-cache-dtype"),
    Flag("--seed"),
    # Sizing.
    Flag("--tensor-parallel-size", aliases=("-tp",), conflicts="spec.engine.tensorParallelSize"),
    Flag("--pipeline-parallel-size", aliases=("-pp",)),
    Flag("--max-model-len", conflicts="spec.engine.maxModelLen"),
    Flag("--gpu-memory-utilization", conflicts="spec.engine.gpuMemoryUtilization"),
    Flag("--max-num-seqs"),
    Flag("--max-num-batched-tokens"),
    Flag("--enable-prefix-caching", takes_value=False),
    Flag("--enable-chunked-prefill", takes_value=False),
    # Compilation and CUDA graphs.
    Flag(
        "--enforce-eager",
        takes_value=False,
        conflicts="spec.engine.performanceMode",
        source="vllm-facts: turns off torch.compile and CUDA graphs in 0.12-0.33",
    ),
    Flag(
        "--performance-mode",
        choices=("balanced", "interactivity", "throughput"),
        since=v("0.17.0"),
        conflicts="spec.engine.performanceMode",
        source="vLLM PR #34936, first released in 0.17.0; absent in 0.16.0",
    ),
    Flag(
        "--optimization-level",
        aliases=("-O",),
        choices=("0", "1", "2", "3"),
        since=v("0.12.0"),
        source="vllm-facts: -O0..-O3 / --optimization-level exist since 0.12.0",
    ),
    Flag("--compilation-config", aliases=("-cc",)),
    Flag(
        "--cudagraph-capture-sizes",
        since=v("0.16.0"),
        source="vllm-facts: --cuda-graph-sizes renamed by 0.16.0",
    ),
    Flag(
        "--max-cudagraph-capture-size",
        since=v("0.12.0"),
        source="vllm-facts: replaces --max-seq-len-to-capture by 0.12.0",
    ),
    Flag("--structured-outputs-config", since=v("0.12.0")),
    Flag("--runner", since=v("0.12.0")),
    Flag("--convert", since=v("0.12.0")),
    Flag("--hf-overrides"),
    # Logging.
    Flag("--enable-log-requests", takes_value=False),
    Flag(
        "--disable-log-requests",
        takes_value=False,
        removed_in=v("0.17.0"),
        replacement="drop it: request logging is off by default; --enable-log-requests turns it on",
        source="vllm-facts: removed in 0.17.0",
    ),
    Flag("--disable-log-stats", takes_value=False),
    # Removed or renamed flags.
    Flag(
        "--guided-decoding-backend",
        removed_in=v("0.12.0"),
        replacement="--structured-outputs-config",
        source="vllm-facts: --guided-decoding-* became --structured-outputs-config by 0.12.0",
    ),
    Flag(
        "--max-seq-len-to-capture",
        removed_in=v("0.12.0"),
        replacement="--max-cudagraph-capture-size",
        source="vllm-facts: renamed by 0.12.0",
    ),
    Flag(
        "--rope-scaling",
        removed_in=v("0.12.0"),
        replacement="--hf-overrides '{\"rope_scaling\": ...}'",
        source="vllm-facts: removed by 0.12.0",
    ),
    Flag(
        "--rope-theta",
        removed_in=v("0.12.0"),
        replacement="--hf-overrides '{\"rope_theta\": ...}'",
        source="vllm-facts: removed by 0.12.0",
    ),
    Flag(
        "--task",
        removed_in=v("0.16.0"),
        replacement="--runner / --convert",
        source="vllm-facts: removed by 0.16.0",
    ),
    Flag(
        "--cuda-graph-sizes",
        removed_in=v("0.16.0"),
        replacement="--cudagraph-capture-sizes",
        source="vllm-facts: renamed by 0.16.0",
    ),
    Flag(
        "--logits-processor-pattern",
        removed_in=v("0.17.0"),
        replacement="drop it (removed in 0.17.0)",
        source="vllm-facts: removed in 0.17.0",
    ),
    Flag(
        "--swap-space",
        removed_in=v("0.33.0"),
        replacement="drop it (removed by 0.33.0)",
        source="vllm-facts: removed by 0.33.0",
    ),
    Flag(
        "--disable-frontend-multiprocessing",
        takes_value=False,
        removed_in=v("0.33.0"),
        replacement="drop it (removed by 0.33.0)",
        source="vllm-facts: removed by 0.33.0",
    ),
)

_BY_SPELLING: dict[str, Flag] = {s: f for f in FLAGS for s in f.spellings}


def lookup(spelling: str) -> Flag | None:
    """The flag for ``--name``, ``--name=value`` or an alias such as ``-tp``; ``None`` if unknown.

    ``-O3`` (a value glued to a short option) is recognised as ``-O``.
    """
    name = spelling.split("=", 1)[0]
    found = _BY_SPELLING.get(name)
    if found is None and name.startswith("-O") and not name.startswith("--"):
        found = _BY_SPELLING.get("-O")
    return found


def flags_of(version: Version) -> tuple[Flag, ...]:
    """The catalogued flags that ``vllm serve`` of ``version`` accepts."""
    return tuple(f for f in FLAGS if f.exists_in(version))
