"""Fixtures of the render tests."""

from __future__ import annotations

from typing import Any

import pytest
from render_cases import base_resource


@pytest.fixture
def resource() -> dict[str, Any]:
    return base_resource()
