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

from devcluster.apierrors import ApiError
from devcluster.cluster import DevCluster
from devcluster.kopfrun import OperatorThread
from devcluster.kubelet import Kubelet
from vllm_operator.api.crd import crd_document
from vllm_operator.api.resource import API_VERSION, KIND, PLURAL
from vllm_operator.config import OperatorConfig
from vllm_operator.handlers.registry import build_registry
from vllm_operator_demo.pods import vllm_images

Obj = dict[str, Any]

DEMO_NODE_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H200-SIM",
    "nvidia.com/gpu.count": "8",
}


class Printer:
    """Progress lines with the time since the demo started."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.t0 = time.monotonic()

    def __call__(self, text: str = "", *, stamp: bool = True) -> None:
        prefix = f"[{time.monotonic() - self.t0:6.1f}s] " if stamp else ""
        self.out.write(prefix + text + "\n")
        self.out.flush()


class Session:
    """DevCluster + CRD + kubelet + the operator, started and stopped together."""

    def __init__(
        self,
        *,
        time_scale: float,
        deadline_scale: float,
        workdir: Path | None,
        printer: Printer,
    ) -> None:
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
        self.cluster = self._stack.enter_context(DevCluster(crds=[crd_document()]))
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
