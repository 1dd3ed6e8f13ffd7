"""The engine policy's facts that are not flags: modes, library-path fix, owned env, budgets.

Together with ``catalog`` (which flag exists in which vLLM version) these tables are the
only place where vLLM behaviour is encoded; ``policy`` is logic over them. Each row cites
where the fact comes from (``shared/docs/vllm-facts.md`` summarises vLLM's released code),
so a reviewer can re-check it when a new vLLM version lands.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.engine.version import Version, v

# First release with `--performance-mode` (vLLM PR #34936; absent in 0.16.0). Stated once:
# the warnings below quote it, and a test checks it against the recorded parser tables.
PERFORMANCE_MODE_SINCE = v("0.17.0")
_NO_MODE_FLAG = (
    f"has no effect before vLLM {PERFORMANCE_MODE_SINCE} (no --performance-mode flag there): "
    "the pods run vLLM's default compiled mode"
)


@dataclass(frozen=True)
class ModeRow:
    """What one ``spec.engine.performanceMode`` becomes on the command line.

    ``modern`` is emitted on versions >= ``PERFORMANCE_MODE_SINCE``, ``legacy`` before.
    ``compiled`` says whether the pods run torch.compile + CUDA graphs (it sizes probes).
    ``legacy_note`` is the warning given when the mode has no effect on a legacy version.
    """

    mode: str
    modern: tuple[str, ...]
    legacy: tuple[str, ...]
    compiled: bool
    legacy_note: str
    source: str


MODES: dict[str, ModeRow] = {
    row.mode: row
    for row in (
        ModeRow(
            "balanced",
            # vLLM's default; emitted anyway so the pod spec says what it runs.
            modern=("--performance-mode", "balanced"),
            legacy=(),
            compiled=True,
            legacy_note="",  # balanced is what a legacy vLLM does anyway: nothing to warn
            source="vllm-facts: default balanced; compiled + CUDA graphs by default 0.16-0.33",
        ),
        ModeRow(
            "interactivity",
            modern=("--performance-mode", "interactivity"),
            legacy=(),
            compiled=True,
            legacy_note=f"performanceMode interactivity {_NO_MODE_FLAG}",
            source="vllm-facts: captures a CUDA graph for every batch size 1..32 (0.17+)",
        ),
        ModeRow(
            "throughput",
            modern=("--performance-mode", "throughput"),
            legacy=(),
            compiled=True,
            legacy_note=(
                f"performanceMode throughput {_NO_MODE_FLAG}; raise --max-num-seqs / "
                "--max-num-batched-tokens in extraArgs for a similar effect"
            ),
            source="vllm-facts: doubles default max_num_batched_tokens and max_num_seqs (0.17+)",
        ),
        ModeRow(
            "eager",
            modern=("--enforce-eager",),
            legacy=("--enforce-eager",),
            compiled=False,
            legacy_note="",
            source="vllm-facts: --enforce-eager turns off torch.compile and CUDA graphs 0.12-0.33",
        ),
    )
}

# What eager costs, quoted in every warning about it (published study, vLLM 0.17,
# Qwen3-30B-A3B GPTQ-Int4 on one 80 GB GPU; our H200 calibration of 0.22 agrees: 5,473 ms
# vs 471 ms).
EAGER_COST = (
    "torch.compile and CUDA graphs are off: the published study measured medium-prompt "
    "latency 4,602 ms eager vs 886 ms compiled (5x slower) and 8-stream throughput "
    "167 vs 714 tokens/s"
)


@dataclass(frozen=True)
class LibraryPathRow:
    """vLLM versions whose images need ``strip-cuda`` (``first <= version < until``)."""

    first: Version
    until: Version
    fix: str
    source: str

    def covers(self, version: Version) -> bool:
        return self.first <= version < self.until


# The CUDA library-path bug, stated once: the policy's `auto` fix, the simulator's start-up
# failure (sim/startup.py) and the embedded kubelet's image env (devcluster) all read it.
CUBLAS_PATH_BUG = LibraryPathRow(
    first=v("0.16.0"),
    until=v("0.18.0"),
    fix="strip-cuda",
    source=(
        "vllm#35608, vllm-omni#1790, pytorch#174949: 0.16.0/0.17.0 images (CUDA 12.9.1 "
        "toolkit on LD_LIBRARY_PATH next to pip cuBLAS) fail with "
        "CUBLAS_STATUS_INVALID_VALUE; llm-d#1063 shows 0.17.1 images share the base"
    ),
)

# `libraryPathFix: auto` resolves through this table; versions outside every row get "none".
LIBRARY_PATH_FIX_BY_VERSION: tuple[LibraryPathRow, ...] = (CUBLAS_PATH_BUG,)


UNSET_RISK = (
    "libraryPathFix unset also removes /usr/local/nvidia/lib64, where GKE mounts the NVIDIA "
    "driver (vLLM PR #25766; llm-d#1063: 'cannot find -l:libcuda.so.1'); strip-cuda removes "
    "only the CUDA toolkit entries"
)


@dataclass(frozen=True)
class OwnedEnv:
    """An environment variable users may not set in ``spec.engine.env``, and why.

    ``OWNED_ENV`` must name every variable the operator renders into the vLLM container
    itself (render/deployment.py ``_env``), or a spec could add a second entry of that
    name; tests/unit/engine/test_policy.py renders every option and checks it.
    """

    name: str
    message: str
    fix: str


OWNED_ENV: dict[str, OwnedEnv] = {
    row.name: row
    for row in (
        OwnedEnv(
            "VLLM_PORT",
            "vLLM reads VLLM_PORT as an internal port and refuses to start with a Kubernetes "
            "service-link value (vllm-facts: a Service named vllm injects VLLM_PORT=tcp://...)",
            "remove it; the serving port is spec.service.port",
        ),
        OwnedEnv(
            "HF_TOKEN",
            "a Hugging Face token must not be written into the spec",
            "put the token in a Secret and reference it with spec.model.hfTokenSecret",
        ),
        OwnedEnv(
            "HUGGING_FACE_HUB_TOKEN",
            "a Hugging Face token must not be written into the spec",
            "put the token in a Secret and reference it with spec.model.hfTokenSecret",
        ),
        OwnedEnv(
            "VLLM_API_KEY",
            "an API key must not be written into the spec (and the benchmark Job would not "
            "get it, so the gate could not measure)",
            "put the key in a Secret and reference it with spec.engine.apiKeySecret",
        ),
        OwnedEnv(
            "HOME",
            "the container runs as a non-root user whose HOME the operator points at a "
            "writable volume",
            "drop it; caches under HOME live in the pod's home volume",
        ),
        OwnedEnv(
            "USER",
            "the operator sets USER to the container's non-root user (libraries that look the "
            "user up by name need it); a second USER would be a duplicate env entry",
            "drop it; the container's user is fixed by the operator",
        ),
        OwnedEnv(
            "HF_HOME",
            "the operator sets HF_HOME to the weights-cache volume",
            "use spec.model.weightsCache to choose the volume",
        ),
        OwnedEnv(
            "VLLM_CACHE_ROOT",
            "the operator sets VLLM_CACHE_ROOT to the compile-cache volume",
            "use spec.engine.compileCache to choose the volume",
        ),
        OwnedEnv(
            "VLLMOP_LIBRARY_PATH_FIX",
            "the operator sets it from spec.engine.libraryPathFix",
            "set spec.engine.libraryPathFix instead",
        ),
        OwnedEnv(
            "VLLMOP_VLLM_VERSION",
            "the operator sets it to the resolved vLLM version (the simulator emulates it)",
            "set spec.engine.version instead",
        ),
        OwnedEnv(
            "VLLM_OPERATOR_LIBRARY_PATH_FIX",
            "the entrypoint no longer reads this name (it is in vLLM's VLLM_ namespace, and "
            "vLLM warns about it at start); the fix comes from spec.engine.libraryPathFix",
            "remove it and set spec.engine.libraryPathFix instead",
        ),
    )
}

# Start-up budgets (seconds) by whether the pods compile; see docs/probes.md for the
# reasoning: calibration 54 s eager / 112-147 s compiled with dummy weights, real weights
# add their load time, other projects allow 600 s to 3 h, outliers over 30 min (vllm#34399).
WARMUP_BUDGET_EAGER = 900
WARMUP_BUDGET_COMPILED = 1800
