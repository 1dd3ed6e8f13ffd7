"""analysis.prometheus.gatewayErrors: a gateway's own failures counted as the candidate's.

A gateway's 503 for no healthy upstream, its timeout or a reset stream never reaches vLLM,
so vLLM's counters cannot show them; the named templates (Istio, Envoy Gateway, Kong) and a
user's own query read them from Prometheus. Their checks, the filled-in query, and how the
count adds to the candidate's requests and errors without following the pod's resets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from vllm_operator.api.canary import CanarySpec
from vllm_operator.api.canary_prometheus import GATEWAY_TEMPLATES, MAX_QUERY, GatewayErrors
from vllm_operator.render import labels, names
from vllm_operator.rollout.canary.metrics import PodCounts, accumulate, increase
from vllm_operator.rollout.canary.reads import GatewayScope, gateway_scope
from vllm_operator.rollout.observed import Observed
from vllm_operator.rollout.views import DeploymentView, PodView

ROUTE = {"mode": "gatewayAPI", "httpRoute": {"name": "llm.route"}}


def _canary(gateway: dict[str, Any], traffic: dict[str, Any] | None = None) -> CanarySpec:
    return CanarySpec.model_validate(
        {
            "steps": [{"weight": 10}],
            "traffic": ROUTE if traffic is None else traffic,
            "analysis": {"prometheus": {"url": "http://p:9090", "gatewayErrors": gateway}},
        }
    )


@pytest.mark.parametrize(
    ("gateway", "error"),
    [
        ({}, "either template or query"),
        ({"template": "istio", "query": "sum(x)"}, "either template or query"),
        ({"template": "nginx"}, "template"),
        ({"query": 'sum(x{a="${pod}"})'}, "unknown placeholder"),
        ({"query": "sum(x)\n"}, "control character"),
        ({"query": "   "}, "empty"),
        ({"query": "x" * (MAX_QUERY + 1)}, "at most 2048"),
    ],
)
def test_a_bad_gateway_query_is_refused_naming_the_field(
    gateway: dict[str, Any], error: str
) -> None:
    with pytest.raises(ValidationError, match=error) as raised:
        _canary(gateway)
    assert "gatewayErrors" in str(raised.value)


def test_gateway_errors_need_the_gateway_api_mode() -> None:
    with pytest.raises(ValidationError, match=r"gatewayErrors needs traffic\.mode gatewayAPI"):
        _canary({"template": "istio"}, traffic={"mode": "replicas"})
    assert _canary({"template": "kong"}).analysis.prometheus is not None


def test_the_templates_are_filled_with_the_canarys_names() -> None:
    istio = GatewayErrors(template="istio").promql("ml", "qwen-candidate", "llm.route")
    assert 'destination_service_name="qwen-candidate"' in istio
    assert 'destination_service_namespace="ml"' in istio
    assert 'response_flags!="-"' in istio  # the proxy's own failures only
    envoy = GatewayErrors(template="envoyGateway").promql("ml", "c", "llm.route")
    assert 'envoy_cluster_name=~"httproute/ml/llm\\\\.route/rule/.*"' in envoy
    kong = GatewayErrors(template="kong").promql("ml", "c", "llm.route")
    assert 'source="kong"' in kong
    assert "httproute[.]ml[.]llm\\\\.route[.]" in kong
    own = GatewayErrors(query='sum(f{svc="${service}",ns="${namespace}"})')
    assert own.promql('m"l', "c", "r") == 'sum(f{svc="c",ns="m\\"l"})'  # quoted, not injected


def test_the_gateways_failures_are_the_candidates_requests_and_errors() -> None:
    counts = PodCounts(finished=100, http_requests=100, http_errors=2, gateway_errors=5)
    assert counts.requests == 105
    assert counts.errors == 7


def test_the_gateways_counter_never_resets_the_pod() -> None:
    """A gateway restart (its counter down) is not a vLLM restart, and a vLLM restart does
    not count the gateway's whole history."""
    last = PodCounts(finished=100, http_requests=100, gateway_errors=40)
    more, reset = increase(last, PodCounts(finished=150, http_requests=150, gateway_errors=3))
    assert not reset
    assert more.finished == 50
    assert more.gateway_errors == 0  # the gateway restarted: nothing negative, no reset
    more, reset = increase(last, PodCounts(finished=20, http_requests=20, gateway_errors=46))
    assert reset  # the pod's counters went down
    assert more.finished == 20
    assert more.gateway_errors == 6  # only the gateway's increase, not its 46
    step = accumulate({}, {}, {"c-0": last})
    step = accumulate(step, {"c-0": last}, {"c-0": PodCounts(finished=130, gateway_errors=52)})
    assert step["c-0"].gateway_errors == 12
    assert PodCounts.from_json(step["c-0"].to_json()).gateway_errors == 12


def test_the_first_candidate_pod_holds_the_gateways_count() -> None:
    body = {
        "spec": {
            "rollout": {
                "canary": {
                    "traffic": ROUTE,
                    "analysis": {
                        "prometheus": {
                            "url": "http://p:9090",
                            "gatewayErrors": {"template": "istio"},
                        }
                    },
                }
            }
        }
    }
    deps = (
        DeploymentView(name="m-c", revision="c", replicas=2, role=labels.ROLE_CANDIDATE),
        DeploymentView(name="m-s", revision="s", replicas=1, role=labels.ROLE_STABLE),
    )
    pods = [
        PodView(name=n, labels={labels.REVISION_LABEL: r})
        for n, r in [("s-0", "s"), ("c-1", "c"), ("c-0", "c")]
    ]
    observed = Observed(body=body | {"metadata": {"name": "m"}}, deployments=deps)
    assert gateway_scope(observed, pods) == GatewayScope(
        service=names.candidate_service_name("m"), route="llm.route", holder="c-0"
    )
    without = {"spec": {"rollout": {"canary": {"traffic": ROUTE}}}}
    assert gateway_scope(Observed(body=without, deployments=deps), pods) is None


def test_docs_show_every_template_as_the_operator_sends_it() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "rollout.md").read_text()
    for name, promql in GATEWAY_TEMPLATES.items():
        row = f"| `{name}` | `{promql.replace('|', chr(92) + '|')}` |"
        assert row in doc, f"docs/rollout.md's gateway table lacks {row}"
