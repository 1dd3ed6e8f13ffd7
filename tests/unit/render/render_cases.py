"""Shared builders for the render tests: the examples and a small valid resource.

A plain module (not conftest) so tests import it by a name no other folder uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def base_resource() -> dict[str, Any]:
    return {
        "apiVersion": "vllm-operator.dev/v1alpha1",
        "kind": "VLLMDeployment",
        "metadata": {"name": "qwen", "namespace": "ml"},
        "spec": {
            "model": {"name": "Qwen/Qwen3-30B-A3B-Instruct-2507-GPTQ-Int4"},
            "engine": {"image": "vllm/vllm-openai:v0.17.0", "performanceMode": "throughput"},
        },
    }


def load_example(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    assert isinstance(loaded, dict)
    return loaded
