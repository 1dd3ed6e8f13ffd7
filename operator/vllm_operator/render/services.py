"""The two Services of a VLLMDeployment: serving (clients) and candidate (the benchmark).

The serving Service is named after the VLLMDeployment and selects exactly one revision, the
stable one; the operator moves its selector on promotion, only once the new revision has
enough Ready pods. The candidate Service always selects the revision under test, so the
benchmark never measures the stable pods by mistake. Both target the named port ``http``.
"""

from __future__ import annotations

from typing import Any

from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.render import labels
from vllm_operator.render.deployment import PORT_NAME
from vllm_operator.render.names import candidate_service_name, serving_service_name


def _service(vd: VLLMDeployment, name: str, revision: str, service_type: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": vd.metadata.namespace,
            "labels": labels.common_labels(vd.metadata.name),
            "annotations": {labels.REVISION_ANNOTATION: revision},
        },
        "spec": {
            "type": service_type,
            "selector": labels.server_selector(vd.metadata.name, revision),
            "ports": [
                {
                    "name": PORT_NAME,
                    "port": vd.spec.service.port,
                    "targetPort": PORT_NAME,
                    "protocol": "TCP",
                }
            ],
        },
    }


def render_serving_service(vd: VLLMDeployment, revision: str) -> dict[str, Any]:
    """The Service clients use, selecting the pods of ``revision``."""
    return _service(vd, serving_service_name(vd.metadata.name), revision, vd.spec.service.type)


def render_candidate_service(vd: VLLMDeployment, revision: str) -> dict[str, Any]:
    """The ClusterIP Service the benchmark Job measures, selecting ``revision``."""
    return _service(vd, candidate_service_name(vd.metadata.name), revision, "ClusterIP")
