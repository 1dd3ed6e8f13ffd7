"""The vLLM container's entrypoint: fix LD_LIBRARY_PATH, then `exec vllm serve "$@"`.

Why a wrapper at all: the 0.16/0.17 ``vllm/vllm-openai`` images set
``LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64:...`` (CUDA 12.9.1), where the
toolkit's ``libcublasLt`` beats the one pip installed next to PyTorch's ``libcublas`` and
bf16/fp16 GEMMs fail with CUBLAS_STATUS_INVALID_VALUE (vllm#35608). The popular
``unset LD_LIBRARY_PATH`` also drops ``/usr/local/nvidia/lib64``, where GKE mounts the driver
(vLLM PR #25766, llm-d#1063).

What ``strip-cuda`` removes, exactly: the directories that hold the toolkit's own cuBLAS,
``/usr/local/cuda[-R]/lib64`` and ``/usr/local/cuda[-R]/targets/<triple>/lib`` (``lib64`` is a
link to the latter), where ``R`` is a release such as ``12``, ``12.9`` (digits and dots), with
or without a trailing ``/``. Everything else stays, in order: the driver paths, CUDA's
forward-compatibility driver libraries (``.../compat``, ``.../compat/lib64``), CUPTI
(``.../extras/CUPTI/lib64``), ``stubs`` and any other directory. The simulator's CUBLAS check
(``sim.startup.toolkit_entries``) uses the same rule; a test keeps the two equal.

Why a constant: the script is the same bytes for every spec. The mode comes from the env
variable ``VLLMOP_LIBRARY_PATH_FIX`` and every user string (model, flags, values) arrives as its
own argv item after ``sh -c SCRIPT vllm-entrypoint``; the shell never parses them. The script
contains neither ``$(`` nor ``$$``, so the kubelet's ``$(VAR)`` expansion of container commands
cannot alter it. The variable is outside ``VLLM_``: vLLM warns about every unknown ``VLLM_*``
variable at start (``vllm.envs.validate_environ``) and fails on them when asked to be strict.
"""

from __future__ import annotations

FIX_ENV = "VLLMOP_LIBRARY_PATH_FIX"
ARGV0 = "vllm-entrypoint"
FIX_MODES = ("strip-cuda", "unset", "none")

# The library-path fix every vLLM container runs first: the one-node entrypoint and both
# Ray group scripts (engine/ray_group.py) start with it.
LIBRARY_PATH_FIX = """\
set -eu
fix="${VLLMOP_LIBRARY_PATH_FIX:-none}"
case "$fix" in
strip-cuda)
  kept=""
  old_ifs="$IFS"
  IFS=":"
  set -f
  for entry in ${LD_LIBRARY_PATH:-}; do
    toolkit=no
    case "$entry" in
    /usr/local/cuda/* | /usr/local/cuda-*/*)
      rest="${entry#/usr/local/cuda}"
      release="${rest%%/*}"
      dir="${rest#"$release"}"
      case "${release#-}" in
      *[!0-9.]* | .* | *. | *..*) release=other ;;
      esac
      case "$release" in
      "" | -?*)
        case "$dir" in
        /lib64 | /lib64/) toolkit=yes ;;
        /targets/?*/lib | /targets/?*/lib/)
          triple="${dir#/targets/}"
          triple="${triple%/}"
          triple="${triple%/lib}"
          case "$triple" in
          "" | */*) ;;
          *) toolkit=yes ;;
          esac
          ;;
        esac
        ;;
      esac
      ;;
    esac
    if [ -n "$entry" ] && [ "$toolkit" = no ]; then
      kept="${kept:+$kept:}$entry"
    fi
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
  echo "vllm-entrypoint: unknown VLLMOP_LIBRARY_PATH_FIX='$fix'" >&2
  echo "vllm-entrypoint: expected strip-cuda, unset or none" >&2
  exit 64
  ;;
esac
"""
SCRIPT = LIBRARY_PATH_FIX + 'exec vllm serve "$@"\n'


def command() -> list[str]:
    """The container ``command``: the constant script; ``args`` follow as ``"$@"``."""
    return ["/bin/sh", "-c", SCRIPT, ARGV0]


def environment(library_path_fix: str) -> dict[str, str]:
    """The env the script reads; ``library_path_fix`` must already be resolved (no auto)."""
    if library_path_fix not in FIX_MODES:
        raise ValueError(f"library_path_fix must be one of {FIX_MODES}, not {library_path_fix!r}")
    return {FIX_ENV: library_path_fix}
