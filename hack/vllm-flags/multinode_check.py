#!/usr/bin/env python3
"""Run a rendered multi-node group through a release's real vLLM, up to its engine config.

No GPU needed (run by people, never by CI; it needs the flag-recording environment). For one
release: render a VLLMDeployment with ``spec.resources.nodes`` > 1 into its LeaderWorkerSet
with this checkout's operator, then for every pod of one group (leader index 0, workers
1..N-1) do what the kubelet and the container would:

1. the pod's environment: the template's env values plus what LeaderWorkerSet injects
   (``LWS_LEADER_ADDRESS`` = 127.0.0.1 here, the loopback of a one-host run,
   ``LWS_WORKER_INDEX``, ``LWS_GROUP_SIZE``);
2. ``$(VAR)`` expanded in command and args by the embedded kubelet's rule
   (``devcluster.kubelet_launch.expand_vars``);
3. the container's command run for real by ``/bin/sh``: the library-path fix, then (native)
   ``exec vllm serve ...``, or (Ray) ``ray start`` and the wait for the group first.

``vllm`` on PATH is ``multinode_stage.py`` in the release's environment: vLLM's own parser
(built by its ``main()``), serve's ``validate``, the serve path (API server or
``run_headless``) and ``create_engine_config`` on a config-only stand-in model, CPU platform
forced. ``ray`` and ``python3`` (the Ray scripts' wait programs) are recorders that succeed:
Ray itself is not started (its GPU bundles cannot be placed here), and what is checked is
the command line Ray gets and the config vLLM builds with ``distributed_executor_backend``
ray (``ray`` importable: ``--ray-path``). Each pod's result is checked against the group's
intent (nnodes, node_rank, master address/port, headless, TP, PP, backend); the report is
Markdown on stdout, exit status 1 on any mismatch.

    .venv/bin/python hack/vllm-flags/multinode_check.py \\
        --python /work/tmp/vllm-flags-env/bin/python --src /work/tmp/v22 0.22.0
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from devcluster.kubelet_launch import expand_vars
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.engine import multinode, ray_group
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import revision_hash
from vllm_operator.render.leaderworkerset import render_leaderworkerset

HERE = Path(__file__).resolve().parent
LEADER_ADDRESS = "127.0.0.1"
RECORDER = """#!/bin/sh
printf '%s\\n' "{name} $*" >> "{log}"
"""
# The Ray scripts run ``python3 -c PROGRAM ARG``: the program (a constant of engine.ray_group,
# checked by its own tests) is logged by name, the argument as given.
PY_RECORDER = """#!/bin/sh
printf '%s\\n' "python3 $1 <wait program> $3" >> "{log}"
"""


def render(version: str, nodes: int, gpus: int, tp: int, pp: int) -> dict[str, Any]:
    """The LeaderWorkerSet this checkout renders for a ``nodes`` x ``gpus`` revision."""
    body = {
        "apiVersion": "vllm-operator.dev/v1alpha1",
        "kind": "VLLMDeployment",
        "metadata": {"name": "group", "namespace": "default"},
        "spec": {
            "model": {"name": "meta-llama/Llama-3.1-405B-Instruct"},
            "engine": {
                "image": f"vllm/vllm-openai:v{version}",
                "tensorParallelSize": tp,
                "extraArgs": ["--pipeline-parallel-size", str(pp)],
            },
            "resources": {"gpus": gpus, "nodes": nodes},
        },
    }
    vd = parse_vllm_deployment(body)
    launch = plan_launch(vd.spec)
    return render_leaderworkerset(vd, launch, revision_hash(vd.spec, launch), 1)


def pod_env(container: dict[str, Any], index: int, nodes: int) -> dict[str, str]:
    env = {
        "LWS_LEADER_ADDRESS": LEADER_ADDRESS,
        "LWS_WORKER_INDEX": str(index),
        "LWS_GROUP_SIZE": str(nodes),
    }
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = expand_vars(item["value"], env)
    return env


def run_pod(
    container: dict[str, Any], index: int, nodes: int, opts: argparse.Namespace, work: Path
) -> dict[str, Any]:
    """Run one pod's command; its argv as run, the stage's JSON and the recorders' log."""
    env = pod_env(container, index, nodes)
    argv = [expand_vars(a, env) for a in (*container["command"], *container["args"])]
    pod = work / f"pod-{index}"
    bin_dir = pod / "bin"
    bin_dir.mkdir(parents=True)
    log = pod / "calls.log"
    (bin_dir / "ray").write_text(RECORDER.format(name="ray", log=log))
    (bin_dir / "python3").write_text(PY_RECORDER.format(log=log))
    (bin_dir / "vllm").write_text(
        f'#!/bin/sh\nexec "{opts.python}" "{HERE / "multinode_stage.py"}" "$@"\n'
    )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    paths = [str(opts.src), str(HERE), *([str(opts.ray_path)] if opts.ray_path else [])]
    full = {
        **env,
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PYTHONPATH": ":".join(paths),
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_LOGGING_LEVEL": "INFO",  # vLLM's own account of the config, in the pod's log
        **(
            {"MULTINODE_HOST_MEMORY_GIB": str(opts.host_memory_gib)} if opts.host_memory_gib else {}
        ),
        "HOME": str(pod),
    }
    proc = subprocess.run(
        argv, env=full, cwd=pod, capture_output=True, text=True, timeout=1800, check=False
    )
    (pod / "stderr.log").write_text(proc.stderr)
    stage = next((json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")), None)
    calls = log.read_text().splitlines() if log.exists() else []
    return {"argv": argv, "rc": proc.returncode, "stage": stage, "calls": calls, "env": env}


def expected(index: int, nodes: int, tp: int, pp: int, backend: str) -> dict[str, Any]:
    want: dict[str, Any] = {"tensor_parallel_size": tp, "pipeline_parallel_size": pp}
    want["world_size"] = tp * pp
    if backend == multinode.NATIVE:
        want.update(nnodes=nodes, node_rank=index, master_addr=LEADER_ADDRESS)
        want.update(master_port=multinode.MASTER_PORT, distributed_executor_backend="mp")
        want["local_world_size"] = tp * pp // nodes
    else:
        want["distributed_executor_backend"] = multinode.RAY
    return want


def judge(result: dict[str, Any], index: int, opts: argparse.Namespace, backend: str) -> list[str]:
    """What differs from the group's intent; empty when the pod is as intended."""
    calls = result["calls"]
    if backend == multinode.RAY and index > 0:
        join = f"ray start --address={LEADER_ADDRESS}:{ray_group.RAY_PORT} --block"
        ok = result["rc"] == 0 and any(c.startswith(join) for c in calls)
        return [] if ok else [f"worker: expected `{join}` (rc {result['rc']}, calls {calls})"]
    stage = result["stage"]
    if stage is None or stage.get("verdict") != "ok":
        return [f"vLLM refused: {stage}"]
    problems = []
    want = expected(index, opts.nodes, opts.tp, opts.pp, backend)
    got = stage["parallel"]
    for key, value in want.items():
        if key in got and got[key] != value:
            problems.append(f"{key}: {got[key]!r}, intended {value!r}")
        elif key not in got and backend == multinode.NATIVE:
            problems.append(f"{key}: missing from ParallelConfig")
    if backend == multinode.NATIVE and stage["headless"] is not (index > 0):
        problems.append(f"headless is {stage['headless']} on pod {index}")
    if backend == multinode.RAY:
        head = f"ray start --head --port={ray_group.RAY_PORT}"
        if not any(c.startswith(head) for c in calls):
            problems.append(f"leader: no `{head}` before vLLM ({calls})")
    return problems


def report(opts: argparse.Namespace) -> int:
    lws = render(opts.version, opts.nodes, opts.gpus, opts.tp, opts.pp)
    group = lws["spec"]["leaderWorkerTemplate"]
    leader = group["leaderTemplate"]["spec"]["containers"][0]
    worker = group["workerTemplate"]["spec"]["containers"][0]
    backend = multinode.RAY if leader["command"] == ray_group.leader_command() else "native"
    print(
        f"## vLLM {opts.version}: {opts.nodes} nodes x {opts.gpus} GPU, TP {opts.tp} x PP {opts.pp}"
    )
    print(f"\nbackend rendered: **{backend}**; sources: `{opts.src}`\n")
    if opts.host_memory_gib:
        print(f"host memory stand-in: {opts.host_memory_gib} GiB (`--host-memory-gib`)\n")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="multinode-") as tmp:
        for index in range(opts.nodes):
            container = leader if index == 0 else worker
            result = run_pod(container, index, opts.nodes, opts, Path(tmp))
            problems = judge(result, index, opts, backend)
            failures += bool(problems)
            role = "leader" if index == 0 else "worker"
            print(f"### pod {index} ({role}): {'OK' if not problems else 'MISMATCH'}\n")
            shown = [*result["argv"][:2], "<entrypoint script>", *result["argv"][3:]]
            print("```\n" + shlex.join(shown) + "\n```\n")
            lws_env = {k: v for k, v in result["env"].items() if k.startswith(("LWS_", "VLLMOP_"))}
            print(f"env: `{json.dumps(lws_env, sort_keys=True)}`\n")
            if result["calls"]:
                print(
                    "ray/python3 calls: "
                    + "; ".join(f"`{c[:120]}`" for c in result["calls"])
                    + "\n"
                )
            if result["stage"] is not None:
                print(
                    "```json\n" + json.dumps(result["stage"], indent=1, sort_keys=True) + "\n```\n"
                )
            for problem in problems:
                print(f"- MISMATCH: {problem}")
            if opts.logs:
                tail = (Path(tmp) / f"pod-{index}" / "stderr.log").read_text()[-3000:]
                shape = f"{opts.nodes}x{opts.gpus}"
                (opts.logs / f"vllm-{opts.version}-{shape}-pod-{index}.log").write_text(tail)
    verdict = f"{failures} pod(s) differ" if failures else "all pods as intended"
    print(f"\n**{opts.version}: {verdict}**\n")
    return 1 if failures else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="the vLLM release, e.g. 0.22.0")
    parser.add_argument("--python", required=True, help="python of the flag-recording env")
    parser.add_argument("--src", type=Path, required=True, help="the release's unpacked wheel")
    parser.add_argument("--ray-path", type=Path, help="a directory where `import ray` works")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=1, help="GPUs per pod")
    parser.add_argument("--tp", type=int, default=1, help="tensorParallelSize")
    parser.add_argument("--pp", type=int, default=2, help="--pipeline-parallel-size")
    parser.add_argument("--logs", type=Path, help="directory for each pod's stderr tail")
    parser.add_argument(
        "--host-memory-gib",
        type=int,
        help="the node's memory as vLLM's host-memory checks see it (a declared stand-in: "
        "0.10/0.11 refuse 4 GiB of swap per tensor-parallel GPU above 70%% of it)",
    )
    opts = parser.parse_args()
    if opts.logs:
        opts.logs.mkdir(parents=True, exist_ok=True)
    sys.exit(report(opts))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
