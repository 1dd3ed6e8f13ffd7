"""What the shell reads for a canary, decided in the pure core (``rollout.canary.reads``)."""

from __future__ import annotations

from typing import Any

from builders import minimal_spec, resource
from vllm_operator.render import names
from vllm_operator.rollout import observe
from vllm_operator.rollout.canary import reads as canary_reads


def observed(services: list[dict[str, Any]], rollout: dict[str, Any] | None = None) -> Any:
    body = resource(minimal_spec(), uid="u1")
    if rollout is not None:
        body["spec"]["rollout"] = rollout
    return observe(body, services=services)


def service(name: str, ports: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {}}, "spec": {"ports": ports}}


def test_the_pods_metrics_are_read_on_the_serving_services_port() -> None:
    serving = names.serving_service_name("qwen")
    assert canary_reads.scrape_port(observed([service(serving, [{"port": 8080}])]), "qwen") == 8080
    assert canary_reads.scrape_port(observed([service(serving, [])]), "qwen") == 0
    assert canary_reads.scrape_port(observed([service("other", [{"port": 81}])]), "qwen") == 0


def test_an_invalid_or_missing_canary_reads_nothing() -> None:
    assert canary_reads.prometheus_source(observed([])) is None
    bad = {"canary": {"analysis": {"prometheus": {"url": 7}}}}
    assert canary_reads.prometheus_source(observed([], rollout=bad)) is None
    odd = {"canary": "not a mapping"}
    assert canary_reads.route_to_read(observed([], rollout=odd)) is None
