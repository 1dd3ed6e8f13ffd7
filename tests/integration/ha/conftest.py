"""An embedded cluster with the local kubelet, and operator replicas as processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rollout.harness import CRD, KubeletProcess, _reap

from devcluster import DevCluster

from .operators import Replicas

# What the rollout harness gives its in-process operator (tests/integration/rollout), as
# flags and environment for `vllm-operator run`.
RUN_ARGS = (
    "--bench-image=ghcr.io/vllm-operator/vllm-operator:test",
    "--job-start-seconds=60",
    "--resync-seconds=2",
    "--workers=4",
)
RUN_ENV = {"VLLM_OPERATOR_DEADLINE_SCALE": "0.02"}


@pytest.fixture
def cluster() -> Iterator[DevCluster]:
    with DevCluster(crds=[CRD], tls=True) as found:
        yield found


@pytest.fixture
def replicas(cluster: DevCluster, tmp_path: Path) -> Iterator[Replicas]:
    found = Replicas(cluster, tmp_path / "operators", args=RUN_ARGS)
    yield found
    found.stop_all()


@pytest.fixture
def kubelet(cluster: DevCluster, tmp_path: Path) -> Iterator[KubeletProcess]:
    found = KubeletProcess(cluster.url, tmp_path / "kubelet", None, cluster.ca_pem)
    found.start()
    yield found
    found.stop(timeout=5)
    _reap(tmp_path / "kubelet")
