"""Operator replicas as real processes (``vllm-operator run``) against a DevCluster.

SIGKILL and SIGTERM need processes: an ``OperatorThread`` cannot be killed mid-write. Each
replica reaches the embedded API through a kubeconfig file, as it would reach a cluster,
and is told its identity through ``POD_NAME`` as the chart does. Their logs go to files
under the test's directory (shown when an assertion fails).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from devcluster import DevCluster

LEASE = ("coordination.k8s.io/v1", "leases", "vllm-operator")
# Short timings keep the test fast; the benchmark measures the defaults (15/10/2).
FAST = ("--lease-duration-seconds=3", "--renew-deadline-seconds=2", "--retry-period-seconds=0.5")


class Replicas:
    """Start, kill and inspect operator processes sharing one Lease."""

    def __init__(
        self,
        cluster: DevCluster,
        workdir: Path,
        *,
        args: Sequence[str] = (),
        timings: Sequence[str] = FAST,
    ) -> None:
        self.cluster = cluster
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig")
        self.args = [*timings, *args]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.metrics_ports: dict[str, int] = {}

    def start(self, name: str, *extra: str, env: dict[str, str] | None = None) -> None:
        command = [
            sys.executable,
            "-m",
            "vllm_operator.commands",
            "run",
            f"--kubeconfig={self.kubeconfig}",
            "--leader-election",
            f"--metrics-port={self._free_port(name)}",
            "--liveness-port=0",
            *self.args,
            *extra,
        ]
        environ = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "POD_NAME": name,
            **(env or {}),
        }
        log = (self.workdir / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(
            command, env=environ, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir
        )
        log.close()

    def _free_port(self, name: str) -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        self.metrics_ports[name] = port
        return port

    def metric(self, name: str, series: str) -> float:
        """One unlabelled series of one replica, from its /metrics."""
        url = f"http://127.0.0.1:{self.metrics_ports[name]}/metrics"
        for line in httpx.get(url, timeout=5).text.splitlines():
            if line.startswith(f"{series} "):
                return float(line.split()[1])
        raise AssertionError(f"{series} not exported by {name}")

    def reconciliations(self, name: str) -> float:
        return self.metric(name, "vllm_operator_reconciliations_total")

    def holder(self) -> str:
        """The replica name holding the Lease ("" when none or no Lease yet)."""
        try:
            spec = self.cluster.get(*LEASE)["spec"]
        except Exception:
            return ""
        holder = spec.get("holderIdentity") or ""
        return str(holder).rsplit("_", 1)[0]

    def lease(self) -> dict[str, Any]:
        return self.cluster.get(*LEASE)

    def wait_leader(self, timeout: float = 30.0, other_than: str = "") -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            holder = self.holder()
            if holder and holder != other_than and self.alive(holder):
                return holder
            time.sleep(0.02)
        raise TimeoutError(f"no leader other than {other_than!r} in {timeout}s\n{self.logs()}")

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> None:
        self.procs[name].send_signal(sig)

    def wait_exit(self, name: str, timeout: float = 30.0) -> int:
        return self.procs[name].wait(timeout)

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(f"--- {n}\n{self.log(n)[-3000:]}" for n in self.procs)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs.values():
            proc.wait(10)
