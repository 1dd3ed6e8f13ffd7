"""The revision: a short hash of exactly what the pods run.

A spec change makes a new revision (a new Deployment, a benchmark, a promotion) only when
it changes the pods: model, engine, resources, scheduling, the port, probe sizing. Gate
thresholds, rollout settings, replicas and the Service type do not roll GPUs. The hash is
sha256 over a canonical JSON (sorted keys, defaults filled in, the vLLM version resolved
from the image tag), so it is stable across runs, Python versions and dict ordering.
``RENDER_EPOCH`` is bumped when the operator renders the same spec into different pods.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from vllm_operator.api.spec import VLLMDeploymentSpec
from vllm_operator.engine.version import Version, version_from_image
from vllm_operator.render.names import REVISION_LENGTH

# 2: the vLLM container runs as a non-root user (render/deployment.py RUN_AS_USER).
RENDER_EPOCH = 2

# Top-level spec sections that shape the pod template, and the parts of `service` that do.
POD_SECTIONS = ("model", "engine", "resources", "scheduling", "probes")


def _resolved_version(spec: VLLMDeploymentSpec) -> str | None:
    text = spec.engine.version
    if text is not None:
        try:
            return str(Version.parse(text))
        except ValueError:
            return text
    found = version_from_image(spec.engine.image)
    return str(found) if found is not None else None


def pod_inputs(spec: VLLMDeploymentSpec) -> dict[str, Any]:
    """The pod-affecting part of ``spec`` in canonical (wire, defaults filled) form."""
    wire = spec.model_dump(mode="json", by_alias=True)
    inputs: dict[str, Any] = {section: wire[section] for section in POD_SECTIONS}
    inputs["engine"] = {**inputs["engine"], "version": _resolved_version(spec)}
    if spec.engine.api_key_secret is None:
        # Added after revisions were in use: absent, it must not change their hashes. Set,
        # the reference (not the key) is part of the pods' env, so it makes a new revision.
        del inputs["engine"]["apiKeySecret"]
    inputs["service"] = {"port": spec.service.port}
    inputs["renderEpoch"] = RENDER_EPOCH
    return inputs


def revision_hash(spec: VLLMDeploymentSpec) -> str:
    """10 lowercase hex characters naming what the pods of ``spec`` run."""
    canonical = json.dumps(
        pod_inputs(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:REVISION_LENGTH]
