"""Builders of specs for the engine tests: a valid base spec, changed per test."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from builders import MODEL_30B, minimal_spec
from vllm_operator.api import VLLMDeploymentSpec, parse_spec


def spec_dict(image: str = "vllm/vllm-openai:v0.17.0", **engine: Any) -> dict[str, Any]:
    return minimal_spec(MODEL_30B, image, **engine)


@pytest.fixture
def make_spec() -> Callable[..., VLLMDeploymentSpec]:
    def make(
        image: str = "vllm/vllm-openai:v0.17.0",
        *,
        top: dict[str, Any] | None = None,
        **engine: Any,
    ) -> VLLMDeploymentSpec:
        raw = spec_dict(image, **engine)
        raw.update(top or {})
        return parse_spec(raw)

    return make
