"""Shared builders for the render tests: the examples and a small valid resource.

A plain module (not conftest) so tests import it by a name no other folder uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from builders import MODEL_30B, minimal_spec, resource

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def base_resource() -> dict[str, Any]:
    return resource(minimal_spec(MODEL_30B, performanceMode="throughput"), namespace="ml")


def load_example(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    assert isinstance(loaded, dict)
    return loaded
