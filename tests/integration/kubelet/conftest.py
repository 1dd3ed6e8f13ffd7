"""Fixtures for the local kubelet tests: a kubelet started on the ``devcluster`` fixture.

Kubelets here run vllm-operator's pods, so they get the vLLM image hooks (the ``vllm`` shim,
the images' environment) unless a test passes ``images=`` itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import DevCluster
from devcluster.kubelet import Kubelet
from vllm_operator_demo.demo_session import DEMO_NODE_LABELS
from vllm_operator_demo.pods import vllm_images


@pytest.fixture
def make_kubelet(devcluster: DevCluster, tmp_path: Path) -> Iterator[Callable[..., Kubelet]]:
    started: list[Kubelet] = []

    def make(**kw: Any) -> Kubelet:
        kw.setdefault("time_scale", 0.01)
        kw.setdefault("images", vllm_images())
        # a GPU node, as the demo's: examples/ select nvidia.com/gpu.present nodes
        kw.setdefault("node_labels", DEMO_NODE_LABELS)
        kubelet = Kubelet(devcluster, tmp_path / f"kubelet{len(started)}", **kw)
        kubelet.start()
        started.append(kubelet)
        return kubelet

    yield make
    for kubelet in started:
        kubelet.stop()


@pytest.fixture
def kubelet(make_kubelet: Callable[..., Kubelet]) -> Kubelet:
    return make_kubelet()
