"""The objects of a VLLMDeployment's current revision once it serves, rendered directly.

A library helper for tools and tests that want the Deployment at ``spec.replicas`` and the
two Services without a rollout. ``vllm-operator render`` does not print this: it prints what
the planner creates for a first revision, one-replica candidate first
(``rollout/preview.py``).
"""

from __future__ import annotations

from typing import Any

from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render.deployment import render_deployment
from vllm_operator.render.leaderworkerset import render_leaderworkerset
from vllm_operator.render.revision import revision_hash
from vllm_operator.render.services import render_candidate_service, render_serving_service


def render_all(vd: VLLMDeployment) -> list[dict[str, Any]]:
    """Deployment (at ``spec.replicas``; a LeaderWorkerSet of that many groups for
    ``spec.resources.nodes`` > 1), serving Service and candidate Service of the spec's
    revision; raises ``SpecErrors``: the launch plan's problems, else those of the
    objects."""
    launch = plan_launch(vd.spec)
    revision = revision_hash(vd.spec, launch)
    return [
        (render_leaderworkerset if launch.group is not None else render_deployment)(
            vd, launch, revision, vd.spec.replicas
        ),
        render_serving_service(vd, revision),
        render_candidate_service(vd, revision),
    ]
