"""pytest fixtures for the embedded Kubernetes API and a kopf runner.

Registered as a pytest plugin (entry point ``pytest11``) when this distribution is
installed, so the operator's tests and devcluster's own tests share one definition.

- ``devcluster``: a started ``DevCluster`` (function scope, ~20 ms to start) serving
  HTTPS, as every real cluster does; ``default`` namespace exists. Create objects through
  its helpers, or with any client at ``devcluster.url`` that verifies the server with
  ``devcluster.ca_pem`` (``verify=devcluster.verify`` for httpx).
- ``kubeconfig``: path of a kubeconfig for the devcluster, its CA included
  (``certificate-authority-data``), for kubectl, kopf and the ``kubernetes`` client.
- ``run_operator``: call it with a ``kopf.OperatorRegistry`` to run that operator against
  the devcluster in its own thread; it is stopped at teardown (or stop it yourself).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest

from devcluster.cluster import DevCluster
from devcluster.kopfrun import OperatorThread


@pytest.fixture
def devcluster() -> Iterator[DevCluster]:
    with DevCluster(tls=True) as cluster:
        yield cluster


@pytest.fixture
def kubeconfig(devcluster: DevCluster, tmp_path: Path) -> Path:
    return devcluster.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def run_operator(devcluster: DevCluster) -> Iterator[Callable[..., OperatorThread]]:
    started: list[OperatorThread] = []

    def run(registry: kopf.OperatorRegistry, **kwargs: Any) -> OperatorThread:
        operator = OperatorThread(registry, devcluster, **kwargs).start()
        started.append(operator)
        return operator

    yield run
    for operator in reversed(started):
        operator.stop()
