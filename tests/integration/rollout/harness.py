"""The rollout under test: DevCluster + the local kubelet + the real operator in kopf.

``Rollout`` starts the three, applies VLLMDeployments and waits on conditions (never fixed
sleeps). The kubelet runs every rendered vLLM pod as the simulator and every benchmark Job
as the real ``vllm-operator bench``, time-scaled so a whole rollout takes seconds.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

import builders
from devcluster import DevCluster, OperatorThread
from devcluster.kubelet_faults import Faults
from devcluster.pod_address import pod_address
from vllm_operator.config import OperatorConfig
from vllm_operator.handlers.registry import Runtime, build_registry, configure
from vllm_operator.kube.client import Kube, api_client_for
from vllm_operator.metrics import OperatorMetrics
from vllm_operator.render import labels, names
from vllm_operator.rollout.results import parse_summary
from vllm_operator_demo.demo_reports import report_summary
from vllm_operator_demo.live_users import services_address

from .kubelet_child import GPU_PRODUCT, run_kubelet  # noqa: F401 - tests read GPU_PRODUCT here

ROOT = Path(__file__).resolve().parents[3]
CRD = ROOT / "crds" / "vllm-operator.dev_vllmdeployments.yaml"
API = builders.API_VERSION
SIM_TIME_SCALE = "0.01"

Obj = dict[str, Any]


def resource(
    name: str = "qwen",
    *,
    image: str = "vllm/vllm-openai:v0.17.0",
    mode: str = "throughput",
    sim_env: Mapping[str, str] | None = None,
    **spec: Any,
) -> Obj:
    env = {"VLLMOP_SIM_TIME_SCALE": SIM_TIME_SCALE, **(sim_env or {})}
    body = builders.minimal_spec(
        builders.MODEL_30B,
        image,
        performanceMode=mode,
        env=[{"name": k, "value": v} for k, v in sorted(env.items())],
    )
    body["model"]["servedModelName"] = "qwen3-30b-a3b"
    body |= {
        "replicas": 1,
        "gate": {"iterations": 3, "concurrency": [1, 4], "timeoutSeconds": 120},
    }
    for key, value in spec.items():
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return builders.resource(body, name=name, namespace="default")


def _reap(workdir: Path) -> None:
    """Kill processes this test's kubelet left behind (by pid, found by working directory).

    A safety net: the kubelet should stop every pod process itself.
    """
    root = str(workdir.resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd.startswith(root):
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)


class KubeletProcess:
    """``Kubelet`` hosted in a child process (start/stop like the in-process one)."""

    def __init__(
        self, url: str, workdir: Path, faults: Faults | None, ca_pem: bytes | None = None
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._ready = ctx.Event()
        self._stop = ctx.Event()
        self._proc = ctx.Process(
            target=run_kubelet,  # a module of its own: the child imports only that
            args=((url, ca_pem), str(workdir), faults, self._ready, self._stop),
            daemon=True,
        )

    def start(self) -> None:
        self._proc.start()
        # Only bounds the wait: a spawned interpreter importing the kubelet can take tens of
        # seconds on two cores shared with the other test workers.
        if not self._ready.wait(120):
            raise RuntimeError("kubelet process did not start within 120 s")

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._proc.join(timeout)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)


class Rollout:
    """One DevCluster, one kubelet, one operator (restartable)."""

    def __init__(
        self,
        workdir: Path,
        *,
        faults: Faults | None = None,
        tls: bool = False,
        crds: tuple[Path, ...] = (),
        **config: Any,
    ) -> None:
        self.workdir = workdir
        # tls: HTTPS, as a real cluster: kopf's login and the operator's client (through a
        # kubeconfig, as `vllm-operator run --kubeconfig`) verify the server's CA. Off by
        # default: the benchmark-sensitive scenarios keep the kubelet's loop, which also
        # proxies the benchmark, free of TLS work on a loaded 2-core machine.
        self.cluster = DevCluster(crds=[CRD, *crds], tls=tls).start()
        self.kubeconfig = self.cluster.write_kubeconfig(workdir / "kubeconfig")
        self.kubelet = KubeletProcess(
            self.cluster.url, workdir / "kubelet", faults, self.cluster.ca_pem
        )
        self.kubelet.start()
        defaults: dict[str, Any] = {
            "bench_image": "ghcr.io/vllm-operator/vllm-operator:test",
            "deadline_scale": 0.02,
            "job_start_seconds": 60,
            "resync_seconds": 2.0,
            "workers": 4,
            "metrics_port": None,
            "liveness_port": None,
            # A canary reads pods' /metrics: here each pod is 127.0.0.1 on a port of its own.
            "pod_address": pod_address(self.cluster),
        }
        self.config = OperatorConfig(**{**defaults, **config})
        self.prometheus = CollectorRegistry()
        self.metrics = OperatorMetrics(self.prometheus)
        self.operator: OperatorThread | None = None
        self.runtime: Runtime | None = None
        self.kube: Kube | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def start_operator(self) -> None:
        assert self.operator is None
        self.kube = Kube(api_client_for(kubeconfig=str(self.kubeconfig)))

        def keep(runtime: Runtime) -> None:
            self.runtime = runtime

        registry = build_registry(
            self.config, kube=self.kube, metrics=self.metrics, login=False, runtime_out=keep
        )
        self.operator = OperatorThread(
            registry, self.cluster, settings=lambda s: configure(s, self.config), posting=False
        ).start()

    def stop_operator(self) -> None:
        if self.operator is not None:
            self.operator.stop()
            self.operator = None
        if self.kube is not None:
            self.kube.close()
            self.kube = None

    def close(self) -> None:
        self.stop_operator()
        self.kubelet.stop(timeout=5)
        self.cluster.stop()
        _reap(self.workdir)

    # -- resources ------------------------------------------------------------------------
    def apply(self, body: Obj) -> Obj:
        name = body["metadata"]["name"]
        if not self.cluster.exists(API, "vllmdeployments", name):
            return self.cluster.create(copy.deepcopy(body))
        current = self.cluster.get(API, "vllmdeployments", name)
        return (
            self.cluster.patch(API, "vllmdeployments", name, {"spec": body["spec"]})
            if current
            else current
        )

    def annotate(self, name: str, key: str, value: str | None) -> None:
        self.cluster.patch(
            API, "vllmdeployments", name, {"metadata": {"annotations": {key: value}}}
        )

    def get(self, name: str = "qwen") -> Obj:
        return self.cluster.get(API, "vllmdeployments", name)

    def status(self, name: str = "qwen") -> Obj:
        return self.get(name).get("status") or {}

    def judged_figures(self, name: str = "qwen") -> Obj:
        """The figures of the newest verdict's benchmark (wire form) as its pod left them:
        status keeps only their digest, and the local kubelet keeps each pod's termination
        message (what the operator read) and log after the Job is deleted."""
        record = self.status(name)["history"][0]
        job = names.job_name(name, record["revision"], record.get("attempt") or 1)
        folder = self.workdir / "kubelet" / "default"
        for pod in sorted(folder.glob(f"{job}-*"), reverse=True):
            message = pod / "fs" / "dev" / "termination-log"
            found = parse_summary(message.read_text()) if message.is_file() else None
            log = pod / "logs" / "bench.log"
            if found is None and log.is_file():
                found = report_summary(log.read_text(errors="replace"))
            if found is not None:
                return found.to_wire()
        raise AssertionError(f"no summary from Job {job} under {folder}")

    def wait(self, predicate: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = predicate()
            except Exception as exc:  # objects may not exist yet
                last = exc
            else:
                if last:
                    return last
            time.sleep(0.05)
        raise TimeoutError(
            f"{what or predicate} not met in {timeout}s; status={self.status_or_none()} last={last}"
        )

    def status_or_none(self, name: str = "qwen") -> Obj | None:
        try:
            return self.status(name)
        except Exception:
            return None

    def wait_phase(
        self, phase: str, name: str = "qwen", timeout: float = 60.0, gate: str | None = None
    ) -> Obj:
        def reached() -> Obj | None:
            st = self.status(name)
            if st.get("phase") != phase:
                return None
            if gate is not None and (st.get("lastGate") or {}).get("outcome") != gate:
                return None
            return st

        result: Obj = self.wait(reached, timeout, f"{name} phase {phase}")
        return result

    def objects(self, api: str, plural: str, name: str = "qwen") -> list[Obj]:
        return self.cluster.list(
            api, plural, "default", label_selector=f"{labels.DEPLOYMENT_LABEL}={name}"
        )

    def names(self, api: str, plural: str, name: str = "qwen") -> list[str]:
        return sorted(o["metadata"]["name"] for o in self.objects(api, plural, name))

    def service_address(self, name: str = "qwen", port: int = 8000) -> str | None:
        """Where the kubelet's proxy of a Service listens (for live traffic)."""
        return services_address(self.workdir / "kubelet", "default", name, port)

    def serving_revision(self, name: str = "qwen") -> str | None:
        if not self.cluster.exists("v1", "services", name):
            return None
        svc = self.cluster.get("v1", "services", name)
        rev = svc["spec"]["selector"].get(labels.REVISION_LABEL)  # none: a canary shares it
        return None if rev is None else str(rev)

    def selector_changes(self, name: str = "qwen") -> list[tuple[str, int]]:
        """Every revision the serving Service selected, with that revision's Ready pods then.

        Versions of the Service and of every Deployment are ordered by resourceVersion (one
        counter for the whole store), so "Ready at that moment" is exact.
        """
        svc_versions = self.cluster.history("v1", "services", name)
        changes: list[tuple[str, int]] = []
        for version in svc_versions:
            rev = version["spec"]["selector"].get(labels.REVISION_LABEL)
            if rev is None:
                continue  # shared by a canary: both revisions
            if changes and changes[-1][0] == rev:
                continue
            at = int(version["metadata"]["resourceVersion"])
            dep_versions = self.cluster.history(
                "apps/v1", "deployments", names.deployment_name(name, rev)
            )
            before = [d for d in dep_versions if int(d["metadata"]["resourceVersion"]) <= at]
            ready = (before[-1].get("status") or {}).get("readyReplicas", 0) if before else 0
            changes.append((rev, int(ready or 0)))
        return changes
