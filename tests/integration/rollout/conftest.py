"""The operator on the embedded cluster, started fresh for each rollout scenario."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Rollout


@pytest.fixture
def rollout(tmp_path: Path) -> Iterator[Rollout]:
    r = Rollout(tmp_path)
    r.start_operator()
    yield r
    r.close()
