"""What the shell must read for a canary before it plans, decided from the raw spec. Pure.

The shell reads outside the cluster's objects only for a canary: the HTTPRoute a gatewayAPI
canary weights, and the step's counts from the pods or from Prometheus. These functions say
which, from the spec as stored (not the parsed model), so an invalid spec reads nothing and
is left to the planner to report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from vllm_operator.api.canary_prometheus import PrometheusSource
from vllm_operator.render import labels, names
from vllm_operator.rollout.observed import Observed
from vllm_operator.rollout.views import PodView


def _raw(observed: Observed, *keys: str) -> object:
    """The stored spec's value at ``keys`` (``rollout``, ``canary``, ...), or None where a
    level is missing or not a mapping."""
    found: object = observed.body.get("spec")
    for key in keys:
        found = found.get(key) if isinstance(found, Mapping) else None
    return found


def route_to_read(observed: Observed) -> str | None:
    """The HTTPRoute the shell must read before planning: the one a gatewayAPI canary
    names, while a candidate exists (its weights may point at it). From the raw spec: an
    invalid spec reads nothing."""
    traffic = _raw(observed, "rollout", "canary", "traffic")
    if not isinstance(traffic, Mapping) or traffic.get("mode") != "gatewayAPI":
        return None
    route = traffic.get("httpRoute")
    name = route.get("name") if isinstance(route, Mapping) else None
    if not isinstance(name, str) or not name:
        return None
    if not any(d.role == labels.ROLE_CANDIDATE for d in observed.deployments):
        return None
    return name


def prometheus_source(observed: Observed) -> PrometheusSource | None:
    """The Prometheus a canary reads its counts from (``analysis.prometheus``), or None: the
    shell reads the pods. From the raw spec, like ``route_to_read``."""
    found = _raw(observed, "rollout", "canary", "analysis", "prometheus")
    if not isinstance(found, Mapping):
        return None
    try:
        return PrometheusSource.model_validate(found)
    except ValidationError:
        return None  # an invalid spec is the planner's to report; it runs no canary


def scrape_port(observed: Observed, name: str) -> int:
    """The port the pods' ``/metrics`` are read on: the serving Service's (vLLM serves its
    metrics on the API port); 0 before that Service is observed."""
    serving = observed.service(names.serving_service_name(name))
    if serving is None or not serving.ports:
        return 0
    return int(serving.ports[0].get("port", 0))


@dataclass(frozen=True)
class GatewayScope:
    """What a gateway's failures are read for (``analysis.prometheus.gatewayErrors``)."""

    service: str
    """The candidate's Service (the route's candidate backend)."""
    route: str
    """The HTTPRoute the canary splits."""
    holder: str
    """The candidate pod whose counts carry the gateway's failures (the first by name)."""


def gateway_scope(observed: Observed, targets: Sequence[PodView]) -> GatewayScope | None:
    """The scope of the gateway's failures for this read, or None: no gatewayErrors asked
    for, no gatewayAPI route, or no candidate pod among ``targets``."""
    source = prometheus_source(observed)
    route = _raw(observed, "rollout", "canary", "traffic", "httpRoute", "name")
    if source is None or source.gateway_errors is None or not isinstance(route, str):
        return None
    candidate = next(
        (
            d.revision
            for d in observed.deployments
            if d.role == labels.ROLE_CANDIDATE and not d.deleting
        ),
        None,
    )
    ours = sorted(p.name for p in targets if p.labels.get(labels.REVISION_LABEL) == candidate)
    if candidate is None or not ours:
        return None
    return GatewayScope(names.candidate_service_name(observed.name), route, ours[0])
