"""The objects of a VLLMDeployment's current revision once it serves, rendered directly.

A library helper for tools and tests that want the Deployment at ``spec.replicas`` and the
two Services without a rollout. ``vllm-operator render`` does not print this: it prints what
the planner creates for a first revision, one-replica candidate first
(``rollout/preview.py``).
"""

from __future__ import annotations

from typing import Any

from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.render.deployment import render_deployment
from vllm_operator.render.revision import revision_hash
from vllm_operator.render.services import render_candidate_service, render_serving_service


def render_all(vd: VLLMDeployment) -> list[dict[str, Any]]:
    """Deployment (at ``spec.replicas``), serving Service and candidate Service of the
    spec's revision; raises ``SpecErrors``."""
    revision = revision_hash(vd.spec)
    return [
        render_deployment(vd, revision, vd.spec.replicas),
        render_serving_service(vd, revision),
        render_candidate_service(vd, revision),
    ]
