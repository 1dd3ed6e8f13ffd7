"""The vLLM container's entrypoint: fix LD_LIBRARY_PATH, then `exec vllm serve "$@"`.

Why a wrapper at all: the 0.16/0.17 ``vllm/vllm-openai`` images put the CUDA 12.9 toolkit
(``/usr/local/cuda/lib64``) on LD_LIBRARY_PATH, where its ``libcublasLt`` beats the one pip
installed next to PyTorch's ``libcublas`` and bf16/fp16 GEMMs fail with
CUBLAS_STATUS_INVALID_VALUE (vllm#35608). The popular ``unset LD_LIBRARY_PATH`` also drops
``/usr/local/nvidia/lib64``, where GKE mounts the driver (llm-d#1063); ``strip-cuda`` removes
only the toolkit entries.

Why a constant: the script is the same bytes for every spec. The mode comes from the env
variable ``VLLM_OPERATOR_LIBRARY_PATH_FIX`` and every user string (model, flags, values)
arrives as its own argv item after ``sh -c SCRIPT vllm-entrypoint``; the shell never parses
them. The script contains neither ``$(`` nor ``$$``, so the kubelet's ``$(VAR)`` expansion of
container commands cannot alter it.
"""

from __future__ import annotations

FIX_ENV = "VLLM_OPERATOR_LIBRARY_PATH_FIX"
ARGV0 = "vllm-entrypoint"
FIX_MODES = ("strip-cuda", "unset", "none")

SCRIPT = """\
set -eu
fix="${VLLM_OPERATOR_LIBRARY_PATH_FIX:-none}"
case "$fix" in
strip-cuda)
  kept=""
  old_ifs="$IFS"
  IFS=":"
  set -f
  for entry in ${LD_LIBRARY_PATH:-}; do
    case "$entry" in
    "") ;;
    /usr/local/cuda*/lib64 | /usr/local/cuda*/lib64/) ;;
    /usr/local/cuda*/lib | /usr/local/cuda*/lib/) ;;
    /usr/local/cuda*/targets/*/lib | /usr/local/cuda*/targets/*/lib/) ;;
    *) kept="${kept:+$kept:}$entry" ;;
    esac
  done
  set +f
  IFS="$old_ifs"
  if [ -n "$kept" ]; then
    LD_LIBRARY_PATH="$kept"
    export LD_LIBRARY_PATH
  else
    unset LD_LIBRARY_PATH
  fi
  echo "vllm-entrypoint: strip-cuda: LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" >&2
  ;;
unset)
  unset LD_LIBRARY_PATH
  echo "vllm-entrypoint: unset: LD_LIBRARY_PATH cleared" >&2
  ;;
none) ;;
*)
  echo "vllm-entrypoint: unknown VLLM_OPERATOR_LIBRARY_PATH_FIX='$fix'" >&2
  echo "vllm-entrypoint: expected strip-cuda, unset or none" >&2
  exit 64
  ;;
esac
exec vllm serve "$@"
"""


def command() -> list[str]:
    """The container ``command``: the constant script; ``args`` follow as ``"$@"``."""
    return ["/bin/sh", "-c", SCRIPT, ARGV0]


def environment(library_path_fix: str) -> dict[str, str]:
    """The env the script reads; ``library_path_fix`` must already be resolved (no auto)."""
    if library_path_fix not in FIX_MODES:
        raise ValueError(f"library_path_fix must be one of {FIX_MODES}, not {library_path_fix!r}")
    return {FIX_ENV: library_path_fix}
