"""The module-scoped real Prometheus of these tests (see ``real_prometheus``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .real_prometheus import Prometheus, start_prometheus


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    with start_prometheus(tmp_path_factory.mktemp("prometheus")) as running:
        yield running
