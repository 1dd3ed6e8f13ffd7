"""How fast does the operator react? Prints figures, saves results/rollout_bench.json.

The real operator (``vllm-operator run`` as a subprocess, so its RSS is its own) against the
embedded API server (DevCluster, in this process). This script plays the cluster's
controllers by hand (no simulator: the figures are the operator's reaction times):

1. spec change -> candidate Deployment created: patch the spec of a served resource to a new
   revision, poll (2 ms) until the Deployment of that revision exists. Target p50 <= 200 ms.
2. Job finished -> verdict written: mark the candidate Ready, wait for its benchmark Job,
   give the Job a pod whose termination message is a passing summary, set the Job Complete,
   poll until ``status.lastGate`` names the revision. Target p50 <= 200 ms.
3. 200 VLLMDeployments created at once: time until every one has its candidate Deployment
   (target: all within 60 s), and the operator's peak RSS (VmHWM).

Run: ``.venv/bin/python benchmarks/rollout_bench.py [--rounds 20] [--burst 200]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from devcluster import DevCluster
from vllm_operator.api import parse_spec
from vllm_operator.render import deployment_name, names, revision_hash

ROOT = Path(__file__).resolve().parents[1]
CRD = ROOT / "crds" / "vllm-operator.dev_vllmdeployments.yaml"
API = "vllm-operator.dev/v1alpha1"
RESULTS = ROOT / "benchmarks" / "results" / "rollout_bench.json"

SUMMARY = {
    "schema": "vllm-operator.dev/bench-summary/v1",
    "model": "m",
    "latency": [
        {
            "promptClass": c,
            "requests": 5,
            "medianMs": 100.0,
            "ttftMs": 10.0,
            "outputTokens": 64,
            "e2eTokensPerSecond": 640.0,
            "decodeTokensPerSecond": 700.0,
        }
        for c in ("short", "medium", "long")
    ],
    "concurrency": [
        {
            "concurrency": 1,
            "aggregateTokensPerSecond": 600.0,
            "requestsPerSecond": 9.0,
            "requests": 9,
        }
    ],
    "quality": {"suite": "default", "passed": 13, "total": 13, "failed": []},
}


def spec(max_len: int = 4096) -> dict[str, Any]:
    return {
        "model": {"name": "Qwen/Qwen3-8B"},
        "engine": {
            "image": "vllm/vllm-openai:v0.17.0",
            "performanceMode": "throughput",
            "maxModelLen": max_len,
        },
        "replicas": 1,
    }


def body(name: str, max_len: int = 4096) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "VLLMDeployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec(max_len),
    }


def rev_of(max_len: int) -> str:
    return revision_hash(parse_spec(spec(max_len)))


def wait(cluster: DevCluster, check: Any, timeout: float = 30.0, interval: float = 0.002) -> float:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        try:
            if check():
                return time.perf_counter()
        except Exception:
            pass
        time.sleep(interval)
    raise TimeoutError("condition not met")


def exists(cluster: DevCluster, api: str, plural: str, name: str) -> bool:
    return cluster.exists(api, plural, name)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def figures(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p90_ms": round(pct(ms, 0.9), 1),
        "max_ms": round(max(ms), 1),
    }


def start_operator(kubeconfig: Path, log: Path) -> subprocess.Popen[bytes]:
    """``vllm-operator run`` as a user starts it: the cluster named by a kubeconfig."""
    exe = Path(sys.executable).with_name("vllm-operator")
    argv = [
        str(exe),
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--metrics-port",
        "0",
        "--liveness-port",
        "0",
        "--workers",
        "8",
        "--resync-seconds",
        "120",
        "--log-level",
        "WARNING",
    ]
    env = dict(os.environ, KUBECONFIG=str(kubeconfig))  # kopf's login reads KUBECONFIG
    return subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def spec_change_latency(cluster: DevCluster, rounds: int) -> list[float]:
    cluster.create(body("lat"))
    first = deployment_name("lat", rev_of(4096))
    wait(cluster, lambda: exists(cluster, "apps/v1", "deployments", first))
    out = []
    for i in range(rounds):
        max_len = 8192 + i
        target = deployment_name("lat", rev_of(max_len))
        t0 = time.perf_counter()
        cluster.patch(API, "vllmdeployments", "lat", {"spec": spec(max_len)})
        out.append(
            wait(cluster, lambda t=target: exists(cluster, "apps/v1", "deployments", t)) - t0
        )
    return out


def verdict_latency(cluster: DevCluster, rounds: int) -> list[float]:
    out = []
    for i in range(rounds):
        name, rev = f"job{i}", rev_of(4096)
        cluster.create(body(name))
        dep = deployment_name(name, rev)
        wait(cluster, lambda d=dep: exists(cluster, "apps/v1", "deployments", d))
        cluster.patch(
            "apps/v1",
            "deployments",
            dep,
            {"status": {"replicas": 1, "readyReplicas": 1}},
            subresource="status",
        )
        job_name = names.job_name(name, rev, 1)
        wait(cluster, lambda j=job_name: exists(cluster, "batch/v1", "jobs", j))
        job = cluster.get("batch/v1", "jobs", job_name)
        labels = job["spec"]["template"]["metadata"]["labels"]
        cluster.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{job_name}-x",
                    "namespace": "default",
                    "labels": labels,
                    # The Job controller's ownerReference: the operator reads only the
                    # Job's own pod.
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": job_name,
                            "uid": job["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {"containers": [{"name": "bench", "image": "op"}]},
            }
        )
        cluster.patch(
            "v1",
            "pods",
            f"{job_name}-x",
            {
                "status": {
                    "phase": "Succeeded",
                    "containerStatuses": [
                        {
                            "name": "bench",
                            "ready": False,
                            "restartCount": 0,
                            "image": "op",
                            "imageID": "",
                            "state": {
                                "terminated": {
                                    "exitCode": 0,
                                    "reason": "Completed",
                                    "message": json.dumps(
                                        {
                                            **SUMMARY,
                                            "verdict": "Passed",
                                            "identity": {
                                                "job": job_name,
                                                "revision": rev,
                                                "attempt": 1,
                                            },
                                        }
                                    ),
                                }
                            },
                        }
                    ],
                }
            },
            subresource="status",
        )

        def judged(n: str = name, r: str = rev) -> bool:
            gate = (cluster.get(API, "vllmdeployments", n).get("status") or {}).get("lastGate")
            return bool(gate and gate.get("revision") == r)

        t0 = time.perf_counter()
        cluster.patch(
            "batch/v1",
            "jobs",
            job_name,
            {"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}},
            subresource="status",
        )
        out.append(wait(cluster, judged) - t0)
        gate = cluster.get(API, "vllmdeployments", name)["status"]["lastGate"]
        if gate["outcome"] != "Passed":  # the figure must time the real path to a pass
            raise RuntimeError(f"{name}: the gate said {gate['outcome']}: {gate['reasons']}")
    return out


def burst(cluster: DevCluster, count: int, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    rev = rev_of(4096)
    names = [f"burst-{i:03d}" for i in range(count)]
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: cluster.create(body(n)), names))
    created = time.perf_counter() - t0
    pending = set(names)
    rss_peak = 0.0
    while pending and time.perf_counter() - t0 < 120:
        present = {d["metadata"]["name"] for d in cluster.list("apps/v1", "deployments", "default")}
        pending = {n for n in pending if deployment_name(n, rev) not in present}
        rss_peak = max(rss_peak, peak_rss_mb(proc.pid))
        time.sleep(0.1)
    elapsed = time.perf_counter() - t0
    return {
        "resources": count,
        "created_in_s": round(created, 2),
        "all_candidates_in_s": round(elapsed, 2),
        "missing": len(pending),
        "operator_peak_rss_mb": round(max(rss_peak, peak_rss_mb(proc.pid)), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--burst", type=int, default=200)
    args = parser.parse_args()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / "rollout_bench_operator.log"
    with DevCluster(crds=[CRD]) as cluster:
        proc = start_operator(cluster.write_kubeconfig(log.with_suffix(".kubeconfig")), log)
        try:
            idle_rss = None
            change = spec_change_latency(cluster, args.rounds)
            idle_rss = peak_rss_mb(proc.pid)
            verdict = verdict_latency(cluster, args.rounds)
            many = burst(cluster, args.burst, proc)
        finally:
            proc.terminate()
            proc.wait(10)
    result = {
        "spec_change_to_candidate_deployment": figures(change),
        "job_finished_to_verdict_written": figures(verdict),
        "burst": many,
        "operator_rss_after_warmup_mb": idle_rss,
        "targets": {"p50_ms": 200, "burst_all_within_s": 60},
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
    }
    print(json.dumps(result, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
