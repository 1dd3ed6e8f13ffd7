"""One builder of test VLLMDeployments: the minimal valid resource, changed per test.

Tests used to write the custom resource by hand, fourteen times over, each a little
different; a change to the minimal spec (a new required field, a new API version) then had
fourteen places to go. Here it has one. ``pyproject.toml`` puts ``tests/`` on pytest's
``pythonpath``, so every test folder imports it as ``builders``.

The literals are the API's as a user writes them (not imported from the operator), so a
test built on them still notices when the operator stops accepting what users write.
"""

from __future__ import annotations

from typing import Any

API_VERSION = "vllm-operator.dev/v1alpha1"
KIND = "VLLMDeployment"
IMAGE = "vllm/vllm-openai:v0.17.0"
MODEL = "Qwen/Qwen3-8B"
MODEL_30B = "Qwen/Qwen3-30B-A3B-Instruct-2507-GPTQ-Int4"


def minimal_spec(model: str = MODEL, image: str = IMAGE, **engine: Any) -> dict[str, Any]:
    """The smallest valid spec: a model and an engine image (plus any ``engine`` fields)."""
    return {"model": {"name": model}, "engine": {"image": image, **engine}}


def resource(
    spec: dict[str, Any] | None = None,
    *,
    name: str = "qwen",
    namespace: str | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    """A VLLMDeployment object around ``spec`` (default: ``minimal_spec()``); ``metadata``
    adds fields after name and namespace (``generation=7``, ``uid="u1"``)."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(metadata)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": meta,
        "spec": minimal_spec() if spec is None else spec,
    }
