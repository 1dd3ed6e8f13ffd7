"""Pure rendering: a VLLMDeployment and a revision become Kubernetes manifests (dicts).

No I/O and no ownerReferences (the operator adds them): the same functions serve the
operator and ``vllm-operator render``, so what a user previews is what the cluster gets.
"""

from vllm_operator.render.deployment import render_deployment
from vllm_operator.render.names import (
    candidate_service_name,
    deployment_name,
    job_name,
    serving_service_name,
)
from vllm_operator.render.revision import revision_hash
from vllm_operator.render.services import render_candidate_service, render_serving_service
from vllm_operator.render.stream import render_all

__all__ = [
    "candidate_service_name",
    "deployment_name",
    "job_name",
    "render_all",
    "render_candidate_service",
    "render_deployment",
    "render_serving_service",
    "revision_hash",
    "serving_service_name",
]
