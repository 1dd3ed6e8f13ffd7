"""``rollout.canary.analysis.prometheus``: a Prometheus read instead of the vLLM pods.

Apart from ``canary.py`` so the canary's spec stays one readable module; re-exported there.
"""

from __future__ import annotations

from pydantic import Field

from vllm_operator.api.base import APIModel

LABEL_NAME_PATTERN = r"^[a-zA-Z_][a-zA-Z0-9_]*$"


class PrometheusSource(APIModel):
    """A Prometheus that scrapes the vLLM pods, read instead of the pods themselves."""

    url: str = Field(
        max_length=2048,
        pattern=r"^https?://[^\s?#]+$",
        description=(
            "Base URL of the Prometheus HTTP API (http:// or https://, no query), e.g. "
            "http://prometheus-operated.monitoring:9090; the operator sends GET "
            "<url>/api/v1/query with an instant query at every read of a step (the values "
            "of Prometheus's last scrape before each: hold a step for several scrape "
            "intervals). Anyone who may edit this resource chooses where the operator "
            "connects: see docs/security.md."
        ),
    )
    pod_label: str = Field(
        default="pod",
        max_length=128,
        pattern=LABEL_NAME_PATTERN,
        description="The label naming the pod on the scraped series (kube-prometheus: pod).",
    )
    namespace_label: str = Field(
        default="namespace",
        max_length=128,
        pattern=LABEL_NAME_PATTERN,
        description="The label naming the pod's namespace on the scraped series.",
    )
    timeout_seconds: int = Field(
        default=10,
        ge=1,
        le=30,
        description="How long one query may take before the step waits and says so.",
    )
