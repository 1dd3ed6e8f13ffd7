"""What ``vllm-operator render`` prints: the first revision of a VLLMDeployment.

Before any revision is stable the first one serves directly, so the preview is its
Deployment at ``spec.replicas``, the serving Service selecting it and the candidate Service
(which the operator keeps for later revisions).
"""

from __future__ import annotations

from typing import Any

from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.render.deployment import render_deployment
from vllm_operator.render.revision import revision_hash
from vllm_operator.render.services import render_candidate_service, render_serving_service


def render_all(vd: VLLMDeployment) -> list[dict[str, Any]]:
    """Deployment, serving Service and candidate Service; raises ``SpecErrors``."""
    revision = revision_hash(vd.spec)
    return [
        render_deployment(vd, revision, vd.spec.replicas),
        render_serving_service(vd, revision),
        render_candidate_service(vd, revision),
    ]
