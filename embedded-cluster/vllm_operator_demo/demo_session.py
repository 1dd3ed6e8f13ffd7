"""The demo's machinery: an embedded cluster, the local kubelet and the real operator.

One context manager starts them in dependency order (API server with the CRD generated in
memory from ``vllm_operator.api``, the kubelet, the operator's kopf registry) and stops them
in reverse, so ``demo``, its tests and anyone scripting a demo share the exact same set-up.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

import httpx

from devcluster.apierrors import ApiError
from devcluster.cluster import DevCluster
from devcluster.kopfrun import OperatorThread
from devcluster.kubelet import Kubelet
from devcluster.pod_address import pod_address
from vllm_operator.api.crd import crd_document
from vllm_operator.api.progress import latest_event
from vllm_operator.api.resource import API_VERSION, KIND, PLURAL
from vllm_operator.api.text import printable
from vllm_operator.config import OperatorConfig
from vllm_operator.handlers.registry import build_registry
from vllm_operator.render import labels
from vllm_operator_demo.lws import lws_crd
from vllm_operator_demo.pods import vllm_images

Obj = dict[str, Any]

DEMO_NODE_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H200-SIM",
    "nvidia.com/gpu.count": "8",
}


class Printer:
    """Progress lines with the time since the demo started, and on a terminal one live
    line below them (rewritten in place, cleared before the next line is printed)."""

    def __init__(self, out: TextIO, *, live: bool | None = None) -> None:
        self.out = out
        self.t0 = time.monotonic()
        isatty = getattr(out, "isatty", None)
        self.live_enabled = bool(isatty and isatty()) if live is None else live
        self._live_width = 0

    def _stamp(self) -> str:
        return f"[{time.monotonic() - self.t0:6.1f}s] "

    def __call__(self, text: str = "", *, stamp: bool = True) -> None:
        self._clear_live()
        prefix = self._stamp() if stamp else ""
        self.out.write(prefix + printable(text) + "\n")  # reasons quote the measured side
        self.out.flush()

    def live(self, text: str) -> None:
        """Show ``text`` on the live line (a terminal only; elsewhere nothing)."""
        if not self.live_enabled:
            return
        if not text:
            self._clear_live()
            self.out.flush()
            return
        width = max(20, shutil.get_terminal_size((100, 24)).columns - 1)
        # one screen line: \r must reach its start
        line = (self._stamp() + printable(text, newlines=False))[:width]
        self.out.write("\r" + line + " " * max(0, self._live_width - len(line)))
        self.out.flush()
        self._live_width = len(line)

    def _clear_live(self) -> None:
        if self._live_width:
            self.out.write("\r" + " " * self._live_width + "\r")
            self._live_width = 0


class Session:
    """DevCluster + CRD + kubelet + the operator, started and stopped together."""

    def __init__(
        self,
        *,
        time_scale: float,
        deadline_scale: float,
        workdir: Path | None,
        printer: Printer,
        multi_node: bool = False,
    ) -> None:
        self.multi_node = multi_node
        self.time_scale = time_scale
        self.deadline_scale = deadline_scale
        self.own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="vllm-operator-demo-"))
        self.say = printer
        self._stack = contextlib.ExitStack()
        self.cluster: DevCluster
        self.kubelet: Kubelet

    def __enter__(self) -> Session:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start(self) -> None:
        # --multi-node: LeaderWorkerSet's API served, the operator's --multi-node on.
        crds = [crd_document(), *([lws_crd()] if self.multi_node else [])]
        self.cluster = self._stack.enter_context(DevCluster(crds=crds))
        self.kubelet = Kubelet(
            self.cluster,
            self.workdir / "kubelet",
            time_scale=self.time_scale,
            deadline_time_scale=self.deadline_scale,
            extra_env={"VLLMOP_SIM_TIME_SCALE": f"{self.time_scale:g}"},
            images=vllm_images(),
            # The one simulated node, labelled as GPU feature discovery labels a GPU node, so
            # pods selecting GPU nodes (examples/: nvidia.com/gpu.present) schedule here and
            # pods asking for another GPU product stay Pending, as in a real cluster.
            node_labels=DEMO_NODE_LABELS,
        )
        self._stack.enter_context(self.kubelet)
        config = OperatorConfig(
            namespaces=("default",),
            metrics_port=None,
            liveness_port=None,
            api_url=self.cluster.url,
            deadline_scale=self.deadline_scale,
            resync_seconds=5.0,
            # A canary (step 4) reads pods' /metrics: each pod is 127.0.0.1 on its own port.
            pod_address=pod_address(self.cluster),
            multi_node=self.multi_node,
        )
        registry = build_registry(config, login=False)
        self._stack.enter_context(OperatorThread(registry, self.cluster, namespaces=["default"]))
        self.say(
            f"embedded API {self.cluster.url}; operator and kubelet running "
            f"(time scale {self.time_scale:g}, pods in {self.workdir / 'kubelet'})"
        )

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        if self.own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def apply(self, doc: Obj) -> Obj:
        """Create, or replace the spec of, one object (like ``kubectl apply``)."""
        meta = doc.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        kind = str(doc.get("kind"))
        plural = PLURAL if kind == KIND else kind
        try:
            current = self.cluster.get(doc["apiVersion"], plural, meta["name"], meta["namespace"])
        except ApiError as exc:
            if exc.code != 404:
                raise
            return self.cluster.create(doc)
        body = dict(current, **{k: v for k, v in doc.items() if k not in ("metadata", "status")})
        return self.cluster.replace(body)

    def resource(self, name: str, namespace: str) -> Obj:
        return self.cluster.get(API_VERSION, PLURAL, name, namespace)

    def bench_progress(self, name: str, namespace: str, revision: str) -> Obj | None:
        """The newest progress event of ``revision``'s running benchmark, read from its
        pod's log as ``kubectl logs --tail`` would; None when there is none yet."""
        selector = ",".join(
            f"{k}={v}"
            for k, v in labels.revision_labels(name, revision, labels.COMPONENT_BENCHMARK).items()
        )
        pods = [
            p
            for p in self.cluster.list("v1", "pods", namespace, label_selector=selector)
            if (p.get("status") or {}).get("phase") == "Running"
        ]
        if not pods:
            return None
        newest = max(pods, key=lambda p: str(p["metadata"].get("creationTimestamp", "")))
        path = self.cluster.path("v1", "pods", newest["metadata"]["name"], namespace, "log")
        try:
            response = httpx.get(
                self.cluster.url + path, params={"tailLines": "20", "container": "bench"}
            )
        except httpx.HTTPError:
            return None
        return latest_event(response.text) if response.status_code == 200 else None
