"""``rollout.canary.analysis.prometheus``: a Prometheus read instead of the vLLM pods.

Apart from ``canary.py`` so the canary's spec stays one readable module; re-exported there.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

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
    gateway_errors: GatewayErrors | None = Field(
        default=None,
        description=(
            "Also count the failures a gateway or mesh gave itself (timeouts, resets, no "
            "healthy upstream), which vLLM never sees, as the candidate's errors: a named "
            "template or your own query (traffic.mode gatewayAPI)."
        ),
    )


GatewayTemplate = Literal["istio", "envoyGateway", "kong"]
PLACEHOLDERS = ("${namespace}", "${service}", "${route}")
MAX_QUERY = 2048

# Each template counts the failures the gateway or mesh itself gave (timeouts, resets,
# connection failures, no healthy upstream), never the answers vLLM sent through it (those
# vLLM counts itself), so nothing is counted twice. Checked against the projects' sources:
GATEWAY_TEMPLATES: dict[str, str] = {
    # Istio's standard metrics (istio/istio.io content/en/docs/reference/config/metrics,
    # commit 0d3a9e8): istio_requests_total with reporter, destination_service_name,
    # destination_service_namespace, response_code and response_flags (Envoy's
    # %RESPONSE_FLAGS%: "-" when the upstream answered). Per Service: the candidate's own.
    "istio": (
        'sum(istio_requests_total{reporter="source", '
        'destination_service_namespace="${namespace}", destination_service_name="${service}", '
        'response_flags!="-"})'
    ),
    # Envoy Gateway names a route rule's cluster httproute/<ns>/<name>/rule/<n>
    # (envoyproxy/gateway internal/gatewayapi: irRouteDestinationName); every backend of the
    # rule is in that one cluster, so its failures are the rule's, stable's included.
    # Envoy's cluster counters (envoyproxy/envoy docs/root/configuration/upstream/
    # cluster_manager/cluster_stats.rst, commit 02aefdc), exported as
    # envoy_cluster_<stat>{envoy_cluster_name=...}.
    "envoyGateway": (
        'sum({__name__=~"envoy_cluster_upstream_(rq_timeout|rq_rx_reset|'
        'rq_pending_failure_eject|rq_pending_overflow|cx_none_healthy)", '
        'envoy_cluster_name=~"httproute/${namespace}/${route}/rule/.*"})'
    ),
    # Kong's Prometheus plugin: kong_http_requests_total{service, route, code, source,
    # consumer}, source "kong" when Kong answered itself, "service" when the upstream did
    # (Kong/kong kong/plugins/prometheus/exporter.lua, 3.x); the Kong Ingress Controller
    # names a route httproute.<ns>.<name>.<rule>.<match> (Kong/kubernetes-ingress-
    # controller, translator). Per route rule, like Envoy Gateway.
    "kong": (
        'sum(kong_http_requests_total{source="kong", code=~"5..", '
        'route=~"httproute[.]${namespace}[.]${route}[.].*"})'
    ),
}
"""Named PromQL templates of a gateway's own failures; ``${...}`` are filled per canary."""


class GatewayErrors(APIModel):
    """The failures a gateway or mesh gave that never reached vLLM, read from Prometheus."""

    template: GatewayTemplate | None = Field(
        default=None,
        description=(
            "A named query: istio (istio_requests_total with a response flag, to the "
            "candidate's Service), envoyGateway (Envoy's timeouts, resets and connection "
            "failures on the HTTPRoute's rules), kong (kong_http_requests_total answered by "
            "Kong itself with 5xx on the HTTPRoute's rules). See docs/rollout.md."
        ),
    )
    query: str | None = Field(
        default=None,
        max_length=MAX_QUERY,
        description=(
            "Your own PromQL instead of a template: one number, a counter of the gateway's "
            "own failed answers that grows over time (not a rate). ${namespace}, ${service} "
            "(the candidate's Service) and ${route} (traffic.httpRoute.name, regex-escaped: "
            "use it with =~) are filled in."
        ),
    )

    @model_validator(mode="after")
    def _one_of(self) -> GatewayErrors:
        where = "rollout.canary.analysis.prometheus.gatewayErrors"
        if (self.template is None) == (self.query is None):
            raise ValueError(f"{where}: give either template or query, not both or neither")
        if self.query is not None:
            if not self.query.strip() or any(ord(c) < 32 for c in self.query):
                raise ValueError(f"{where}.query: empty, or has a control character")
            rest = self.query
            for placeholder in PLACEHOLDERS:
                rest = rest.replace(placeholder, "")
            if "${" in rest:
                raise ValueError(
                    f"{where}.query: unknown placeholder; use only {', '.join(PLACEHOLDERS)}"
                )
        return self

    def promql(self, namespace: str, service: str, route: str) -> str:
        """The query with the canary's names filled in (quoted for a PromQL string)."""
        text = GATEWAY_TEMPLATES[self.template] if self.template is not None else self.query
        assert text is not None
        route = re.escape(route)  # ${route} stands in regex matchers (route names have dots)
        for placeholder, value in zip(PLACEHOLDERS, (namespace, service, route), strict=True):
            text = text.replace(placeholder, value.replace("\\", "\\\\").replace('"', '\\"'))
        return text


PrometheusSource.model_rebuild()
