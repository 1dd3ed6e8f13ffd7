"""Stand-in for the ``vllm`` executable of one pod of a rendered group (run by people).

``multinode_check.py`` puts a ``vllm`` on PATH that runs this file in the release's
environment (``setup-env.sh``; the release's sources on PYTHONPATH), so the pod's own
entrypoint script execs it with exactly the argv real vLLM would get: ``serve MODEL ...``.
It then does what ``vllm serve`` does up to the point where a GPU is needed:

1. the top-level parser built by vLLM's own ``main()`` (``dump_parser.build_top_parser``,
   the CPU platform forced), ``parse_args`` on the argv, and the serve subcommand's
   ``validate``;
2. ``ServeSubcommand.cmd``'s choice: ``run_headless`` for ``--headless`` (the workers),
   else the API server;
3. ``AsyncEngineArgs.from_cli_args(args).create_engine_config(...)`` as that path calls
   it (``headless=True`` from ``run_headless`` where the release has it), on a config-only
   stand-in model (``engine_stage.LARGE``: 64 heads and 80 layers, so TP 8 x PP 2 divides),
   with the platform's own adjustments off as in the flag recordings;
4. what ``run_headless`` checks next (``data_parallel_size_local`` > 0, and whether this
   node runs headless multiproc workers: ``node_rank_within_dp`` > 0).

It prints one JSON object on the real stdout: the ``ParallelConfig`` fields and properties
the group depends on, or the stage and vLLM's message where it refused.
"""

# ruff: noqa: PLC0415
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import after_parse
import dump_parser
import engine_stage

FIELDS = (
    "world_size",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "data_parallel_size_local",
    "distributed_executor_backend",
    "nnodes",
    "node_rank",
    "master_addr",
    "master_port",
    "local_world_size",
    "nnodes_within_dp",
    "node_rank_within_dp",
)


def _parallel(config: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in FIELDS:
        try:
            value = getattr(config, name)
        except AttributeError:
            continue  # not in this release
        found[name] = value if isinstance(value, (int, str, type(None))) else repr(value)
    return found


def _host_memory() -> int | None:
    """``MULTINODE_HOST_MEMORY_GIB``: the node's memory, where it is set (see ``main``)."""
    value = os.environ.get("MULTINODE_HOST_MEMORY_GIB")
    return None if not value else int(value) << 30


def _stand_in_host_memory(total: int) -> None:
    """vLLM's ``get_cpu_memory`` answers ``total`` wherever a loaded module imported it.

    0.10/0.11's ``CacheConfig.verify_with_parallel_config`` refuses a swap space (4 GiB per
    GPU of tensor parallel) above 70% of the host's memory: 8 GPUs need 32 GiB, more than
    this recording machine has, not more than an 8-GPU node has. Like the stand-in model,
    a declared stand-in for what the real node has.
    """
    for name, module in list(sys.modules.items()):
        if name.startswith("vllm") and callable(getattr(module, "get_cpu_memory", None)):
            module.get_cpu_memory = lambda: total  # type: ignore[attr-defined]


def _create(ns: Any, headless: bool) -> Any:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext

    memory = _host_memory()
    if memory is not None:
        _stand_in_host_memory(memory)
    engine_args = AsyncEngineArgs.from_cli_args(ns)
    kwargs: dict[str, Any] = {"usage_context": UsageContext.OPENAI_API_SERVER}
    if headless:
        kwargs["headless"] = True
    with after_parse._no_platform_hooks():
        return engine_args.create_engine_config(**kwargs)


def check(argv: list[str]) -> dict[str, Any]:
    """What vLLM's serve makes of ``argv`` (``["serve", MODEL, ...]``) up to the GPU."""
    top = dump_parser.build_top_parser()
    try:
        ns = top.parse_args(argv)
        after_parse._serve_validate(ns)
    except (SystemExit, Exception) as exc:
        return {"verdict": "refused", "stage": "parse", "message": after_parse._message(exc)}
    if getattr(ns, "model_tag", None) is not None:
        ns.model = ns.model_tag
    model = ns.model
    ns.model = ns.model_tag = engine_stage.LARGE
    headless = bool(getattr(ns, "headless", False))
    count = getattr(ns, "api_server_count", None)
    path = "run_headless" if headless or (count is not None and count < 1) else "API server"
    out: dict[str, Any] = {"model_given": model, "model_checked": engine_stage.LARGE, "path": path}
    if _host_memory() is not None:
        out["host_memory_gib_stand_in"] = int(os.environ["MULTINODE_HOST_MEMORY_GIB"])
    try:
        config = _create(ns, headless)
    except Exception as exc:
        return {
            **out,
            "verdict": "refused",
            "stage": "engine",
            "message": after_parse._message(exc),
        }
    parallel = _parallel(config.parallel_config)
    out.update(verdict="ok", headless=headless, parallel=parallel)
    if path == "run_headless":
        if parallel.get("data_parallel_size_local", 1) <= 0:
            return {**out, "verdict": "refused", "stage": "run_headless"}
        within = parallel.get("node_rank_within_dp", 0)
        out["runs"] = "MultiprocExecutor workers" if within > 0 else "engine core(s)"
    return out


def main() -> None:
    real = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # vLLM's logs go to stderr; the JSON alone to stdout
    engine_stage.offline()
    engine_stage.write_standins(Path.cwd())
    with contextlib.suppress(Exception):
        import vllm

        print(f"multinode_stage: vllm {vllm.__version__} from {vllm.__file__}", file=sys.stderr)
    result = check(sys.argv[1:])
    real.write(json.dumps(result, sort_keys=True) + "\n")
    real.flush()
    sys.exit(0 if result["verdict"] == "ok" else 3)


if __name__ == "__main__":
    main()
