"""How long is the operator leaderless when its leader dies? Prints figures, saves
ha_takeover.json.

Two ``vllm-operator run --leader-election`` processes with the default timings (lease 15 s,
renew deadline 10 s, retry period 2 s) run against the embedded API (DevCluster) through a
kubeconfig, as two replicas of the chart's Deployment would. Each round waits until the
standby has seen the current holder, waits a random part of a retry period (a kill lands
anywhere between two renewals), SIGKILLs the leader and times, on the monotonic clock,
until the Lease names the other replica; then a fresh replica replaces the dead one, as the
Deployment would. Then the same with SIGTERM (graceful: the leader releases the Lease).
Target (issue 15): p50 of SIGKILL takeovers under 20 s.

Run: ``flock /tmp/vllmop-heavy.lock .venv/bin/python benchmarks/ha_takeover.py [--rounds 10]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from devcluster import DevCluster

RESULTS = Path(__file__).parent / "results" / "ha_takeover.json"
LEASE = ("coordination.k8s.io/v1", "leases", "vllm-operator")
RETRY_PERIOD = 2.0


class Replicas:
    def __init__(self, cluster: DevCluster, workdir: Path) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.count = 0

    def start(self) -> str:
        self.count += 1
        name = f"op-{self.count}"
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "POD_NAME": name}
        with (self.workdir / f"{name}.log").open("wb") as log:
            self.procs[name] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "vllm_operator.commands",
                    "run",
                    f"--kubeconfig={self.kubeconfig}",
                    "--leader-election",
                    "--metrics-port=0",
                    "--liveness-port=0",
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return name

    def holder(self) -> str:
        try:
            spec = self.cluster.get(*LEASE)["spec"]
        except Exception:
            return ""
        return str(spec.get("holderIdentity") or "").rsplit("_", 1)[0]

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")

    def wait(self, what: str, predicate: object, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():  # type: ignore[operator]
                return
            time.sleep(0.01)
        raise TimeoutError(what)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


def _round(replicas: Replicas, standby: str, sig: signal.Signals) -> tuple[float, str]:
    leader = replicas.holder()
    replicas.wait(
        f"{standby} standing by", lambda: f"held by {leader}_" in replicas.log(standby), 60
    )
    time.sleep(random.uniform(0, RETRY_PERIOD))
    replicas.procs[leader].send_signal(sig)
    stopped = time.monotonic()
    replicas.wait("takeover", lambda: replicas.holder() == standby, 60)
    took = time.monotonic() - stopped
    code = replicas.procs[leader].wait(30)
    return took, f"{sig.name} {leader} -> {standby} in {took:.2f} s (exit {code})"


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "p50_s": round(statistics.median(values), 2),
        "max_s": round(max(values), 2),
        "min_s": round(min(values), 2),
        "mean_s": round(statistics.fmean(values), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="SIGKILL takeovers to time")
    parser.add_argument("--graceful-rounds", type=int, default=5, help="SIGTERM handovers")
    args = parser.parse_args()
    killed: list[float] = []
    graceful: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, DevCluster() as cluster:
        replicas = Replicas(cluster, Path(tmp))
        try:
            replicas.start()
            replicas.wait("first leader", lambda: replicas.holder() == "op-1", 60)
            for sig, rounds, into in (
                (signal.SIGKILL, args.rounds, killed),
                (signal.SIGTERM, args.graceful_rounds, graceful),
            ):
                for _ in range(rounds):
                    standby = replicas.start()
                    took, line = _round(replicas, standby, sig)
                    into.append(took)
                    print(line, flush=True)
        finally:
            replicas.stop_all()
    figures = {
        "what": "seconds from the leader's death (SIGKILL) or stop (SIGTERM) to the Lease "
        "naming the standby; default timings",
        "timings": {"lease_duration_s": 15, "renew_deadline_s": 10, "retry_period_s": 2},
        "sigkill": {
            "rounds": len(killed),
            **_summary(killed),
            "all_s": [round(v, 2) for v in killed],
        },
        "sigterm": {
            "rounds": len(graceful),
            **_summary(graceful),
            "all_s": [round(v, 2) for v in graceful],
        },
        "target": "sigkill p50 < 20 s",
        "target_met": statistics.median(killed) < 20,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    print(json.dumps(figures, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
