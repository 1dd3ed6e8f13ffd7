"""How fast does the operator react? Prints figures, saves results/rollout_bench.json.

The real operator (``vllm-operator run`` as a subprocess, so its RSS is its own) against the
embedded API server (DevCluster, in this process). This script plays the cluster's
controllers by hand (no simulator: the figures are the operator's reaction times):

1. spec change -> candidate Deployment created: patch the spec of a served resource to a new
   revision, poll (2 ms) until the Deployment of that revision exists. Target p50 <= 200 ms.
2. Job finished -> verdict written: mark the candidate Ready, wait for its benchmark Job,
   give the Job a pod whose termination message is a passing summary, set the Job Complete,
   poll until ``status.lastGate`` names the revision. Target p50 <= 200 ms.
3. Bursts (``--burst 1000,5000``), each against a fresh cluster and operator: that many
   VLLMDeployments created at once; time until every one has its candidate Deployment
   (targets: 1,000 within 15 s, 5,000 within 60 s), the operator's peak RSS (VmHWM), and
   the API requests the operator made, counted by the embedded API server per client
   (kopf's watches, the ``kubernetes`` client): LIST requests per reconcile (target 0:
   the reconcile reads watch caches), all requests per reconcile during the burst, and
   requests per minute at rest (every resource waiting on its candidate, resync 30 s),
   measured once the operator has made no request for 5 s (``all_writes_done_in_s``).

Run under the shared lock (``flock /tmp/vllmop-heavy.lock``):
``.venv/bin/python benchmarks/rollout_bench.py [--rounds 20] [--burst 1000,5000]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from devcluster import DevCluster
from vllm_operator.api import parse_spec
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import deployment_name, names, revision_hash

ROOT = Path(__file__).resolve().parents[1]
CRD = ROOT / "crds" / "vllm-operator.dev_vllmdeployments.yaml"
API = "vllm-operator.dev/v1alpha1"
RESULTS = ROOT / "benchmarks" / "results" / "rollout_bench.json"
# The operator's clients, by User-Agent: kopf's watches and the ``kubernetes`` package.
OPERATOR_AGENTS = ("kopf", "OpenAPI-Generator")
CACHED_PLURALS = ("vllmdeployments", "deployments", "services", "jobs", "pods")
# The resync of the burst runs: every resource is reconciled at least this often, so the
# at-rest window sees reconciles (the production default is 300 s).
RESYNC_SECONDS = 30.0

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
    parsed = parse_spec(spec(max_len))
    return revision_hash(parsed, plan_launch(parsed))


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


def start_operator(
    kubeconfig: Path, log: Path, *, metrics_port: int = 0, resync: float = 120
) -> subprocess.Popen[bytes]:
    """``vllm-operator run`` as a user starts it: the cluster named by a kubeconfig."""
    exe = Path(sys.executable).with_name("vllm-operator")
    argv = [
        str(exe),
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--metrics-port",
        str(metrics_port),
        "--liveness-port",
        "0",
        "--workers",
        "8",
        "--resync-seconds",
        str(resync),
        "--log-level",
        "WARNING",
    ]
    env = dict(os.environ)
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


def operator_counts(cluster: DevCluster) -> Counter[str]:
    """Requests the operator made so far, "list deployments" -> n (kopf's and its client's)."""
    counts: Counter[str] = Counter()
    for key, n in list(cluster.server.request_counts.items()):
        agent, _, call = key.partition(" ")
        if agent in OPERATOR_AGENTS:
            counts[call] += n
    return counts


def of_action(counts: Counter[str], action: str) -> int:
    return sum(n for call, n in counts.items() if call.split(" ")[0] == action)


def not_watches(counts: Counter[str]) -> int:
    return sum(n for call, n in counts.items() if not call.startswith("watch "))


def reconciles(metrics_url: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    for line in text.splitlines():
        if line.startswith("vllm_operator_reconciliations_total "):
            return float(line.split()[1])
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def candidates_present(cluster: DevCluster) -> set[str]:
    """Deployment names in the store, read on the cluster's loop (no HTTP: polling 5,000
    objects over the API would load the server the operator is being measured against)."""
    store = cluster.semantics.store
    return cluster.call(
        lambda: {o["metadata"]["name"] for o in store.select(("apps", "deployments"), "default")}
    )


def burst(count: int, rest_seconds: float, log: Path) -> dict[str, Any]:
    """``count`` VLLMDeployments created at once against a fresh cluster and operator."""
    rev = rev_of(4096)
    names = [f"burst-{i:05d}" for i in range(count)]
    wanted = {deployment_name(n, rev) for n in names}
    port = free_port()
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    with DevCluster(crds=[CRD]) as cluster:
        kubeconfig = cluster.write_kubeconfig(log.with_suffix(".kubeconfig"))
        proc = start_operator(kubeconfig, log, metrics_port=port, resync=RESYNC_SECONDS)
        try:
            # Started once kopf watches every cached kind and the metrics answer.
            wait(
                cluster,
                lambda: (
                    all(f"watch {k}" in operator_counts(cluster) for k in CACHED_PLURALS)
                    and reconciles(metrics_url) >= 0
                ),
                timeout=60,
                interval=0.05,
            )
            counts0, passes0 = operator_counts(cluster), reconciles(metrics_url)
            cpu0, own0 = cpu_seconds(proc.pid), cpu_seconds(os.getpid())
            t0 = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda n: cluster.create(body(n)), names))
            created = time.perf_counter() - t0
            missing = len(wanted)
            rss_peak = 0.0
            while time.perf_counter() - t0 < max(120.0, count * 0.1):
                missing = len(wanted - candidates_present(cluster))
                rss_peak = max(rss_peak, peak_rss_mb(proc.pid))
                if not missing:
                    break
                time.sleep(0.2)
            elapsed = time.perf_counter() - t0
            cpu1, own1 = cpu_seconds(proc.pid), cpu_seconds(os.getpid())
            counts1, passes1 = operator_counts(cluster), reconciles(metrics_url)
            # Settled: the queue has drained the passes the burst's events asked for (each
            # resource's second status write, "waiting for candidate: 0/1 Ready", comes
            # after its Deployment's event): no request for 5 s.
            last, quiet_since = not_watches(operator_counts(cluster)), time.perf_counter()
            while time.perf_counter() - t0 < max(180.0, count * 0.1):
                time.sleep(0.5)
                now_count = not_watches(operator_counts(cluster))
                if now_count != last:
                    last, quiet_since = now_count, time.perf_counter()
                elif time.perf_counter() - quiet_since >= 5.0:
                    break
            settled = quiet_since - t0
            # At rest: every resource waits on a candidate nobody runs (no kubelet here), so
            # nothing changes; the resync reconciles each one every RESYNC_SECONDS.
            counts2, passes2 = operator_counts(cluster), reconciles(metrics_url)
            time.sleep(rest_seconds)
            counts3, passes3 = operator_counts(cluster), reconciles(metrics_url)
            rss_peak = max(rss_peak, peak_rss_mb(proc.pid))
        finally:
            proc.terminate()
            proc.wait(10)
    during, rest = counts1 - counts0, counts3 - counts2
    burst_passes, rest_passes = passes1 - passes0, passes3 - passes2
    per_minute = 60.0 / rest_seconds
    return {
        "resources": count,
        "created_in_s": round(created, 2),
        "all_candidates_in_s": round(elapsed, 2),
        "all_writes_done_in_s": round(settled, 2),
        "missing": missing,
        "operator_peak_rss_mb": round(rss_peak, 1),
        # Until all candidates exist: the operator's CPU, and this process's (the embedded
        # API server, the creates and the polling) on the same shared cores.
        "operator_cpu_s": round(cpu1 - cpu0, 1),
        "api_server_process_cpu_s": round(own1 - own0, 1),
        "burst": {
            "reconciles": int(burst_passes),
            "list_requests": of_action(during, "list"),
            "list_requests_per_reconcile": round(of_action(during, "list") / burst_passes, 4)
            if burst_passes
            else None,
            "api_requests_per_reconcile": round(not_watches(during) / burst_passes, 2)
            if burst_passes
            else None,
            "requests": dict(sorted(during.items())),
        },
        "at_rest": {
            "window_s": rest_seconds,
            "resync_seconds": RESYNC_SECONDS,
            "reconciles_per_minute": round((passes3 - passes2) * per_minute, 1),
            "api_requests_per_minute": round(not_watches(rest) * per_minute, 1),
            "list_requests_per_reconcile": round(of_action(rest, "list") / rest_passes, 4)
            if rest_passes
            else None,
            "requests": dict(sorted(rest.items())),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="latency rounds (0: skip)")
    parser.add_argument(
        "--burst", default="1000,5000", help="resources created at once, comma-separated"
    )
    parser.add_argument(
        "--rest-seconds", type=float, default=60.0, help="window for the at-rest request rate"
    )
    args = parser.parse_args()
    sizes = [int(x) for x in str(args.burst).split(",") if x.strip()]
    log = Path(os.environ.get("TMPDIR", "/tmp")) / "rollout_bench_operator.log"
    result: dict[str, Any] = {}
    if args.rounds > 0:
        with DevCluster(crds=[CRD]) as cluster:
            proc = start_operator(cluster.write_kubeconfig(log.with_suffix(".kubeconfig")), log)
            try:
                change = spec_change_latency(cluster, args.rounds)
                idle_rss = peak_rss_mb(proc.pid)
                verdict = verdict_latency(cluster, args.rounds)
            finally:
                proc.terminate()
                proc.wait(10)
        result["spec_change_to_candidate_deployment"] = figures(change)
        result["job_finished_to_verdict_written"] = figures(verdict)
        result["operator_rss_after_warmup_mb"] = idle_rss
    result["bursts"] = []
    for size in sizes:
        result["bursts"].append(burst(size, args.rest_seconds, log))
        print(json.dumps(result["bursts"][-1], indent=2), flush=True)
    result["targets"] = {
        "p50_ms": 200,
        "all_candidates_within_s": {"1000": 15, "5000": 60},
        "list_requests_per_reconcile": 0,
    }
    result["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    print(json.dumps(result, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
