"""The chart's benchmark NetworkPolicy, judged on rendered objects like a CNI would judge it.

The source is the pod of a Job the operator renders; the destinations are the pods it
renders (candidate, twin), cluster DNS, and what the Job pod must not reach: the operator,
other components, other namespaces, other ports, anything outside the cluster. A small
evaluator applies the policy's selectors and ports (NetworkPolicy semantics: a pod selected
by a policy of a type gets only what some rule of that type admits).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import yaml

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.render import render_all
from vllm_operator.render.job import render_job
from vllm_operator.render.twin import render_twin_deployment

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "vllm-operator"
NS = "llm"
Obj = dict[str, Any]


def _render(values: Obj) -> dict[str, str]:
    rendered: dict[str, str] = helm_python.Chart.load(CHART).render(
        values, name="vo", namespace="vllm-system"
    )
    return rendered


def _docs(values: Obj) -> list[Obj]:
    return [
        d
        for path, text in sorted(_render(values).items())
        if path.endswith(".yaml")
        for d in yaml.safe_load_all(text)
        if d
    ]


def _policies(values: Obj) -> list[Obj]:
    return [d for d in _docs(values) if d["kind"] == "NetworkPolicy"]


def _selects(selector: Obj, labels: dict[str, str]) -> bool:
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        assert expr["operator"] == "In", expr
        if labels.get(expr["key"]) not in expr["values"]:
            return False
    return True


def _peer_admits(peer: Obj, policy_ns: str, ns: str | None, labels: dict[str, str]) -> bool:
    if ns is None:  # outside the cluster: only an ipBlock could admit it
        return "ipBlock" in peer
    if "namespaceSelector" in peer:
        if not _selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": ns}):
            return False
    elif ns != policy_ns:
        return False
    return _selects(peer.get("podSelector", {}), labels)


def _port_admits(rule: Obj, port: int, protocol: str) -> bool:
    ports = rule.get("ports")
    return not ports or any(
        p.get("protocol", "TCP") == protocol and p.get("port") in (None, port) for p in ports
    )


def egress_allowed(
    policies: list[Obj], src: tuple[str, dict[str, str]], dst: tuple[str | None, Obj], port: int
) -> bool:
    """May a pod (namespace, labels) open ``port`` to ``dst`` under ``policies``?"""
    protocol = "UDP" if port == 53 and dst[1].get("udp") else "TCP"
    labels = {k: v for k, v in dst[1].items() if k != "udp"}
    applying = [
        p
        for p in policies
        if p["metadata"]["namespace"] == src[0]
        and "Egress" in p["spec"]["policyTypes"]
        and _selects(p["spec"]["podSelector"], src[1])
    ]
    if not applying:
        return True
    # A rule without ``to`` (or with an empty one) admits every destination, and one without
    # ``ports`` every port: Kubernetes' semantics, which a stricter reading would hide.
    return any(
        _port_admits(rule, port, protocol)
        and (
            not rule.get("to")
            or any(
                _peer_admits(peer, p["metadata"]["namespace"], dst[0], labels)
                for peer in rule["to"]
            )
        )
        for p in applying
        for rule in p["spec"].get("egress", [])
    )


def ingress_allowed(policies: list[Obj], dst: tuple[str, dict[str, str]]) -> bool:
    """May anything connect to the pod ``dst``? (False when a policy admits no ingress.)"""
    applying = [
        p
        for p in policies
        if p["metadata"]["namespace"] == dst[0]
        and "Ingress" in p["spec"]["policyTypes"]
        and _selects(p["spec"]["podSelector"], dst[1])
    ]
    return not applying or any(p["spec"].get("ingress") for p in applying)


def _rendered_pods() -> tuple[dict[str, str], dict[str, str], dict[str, str], int]:
    """Labels of the candidate, its twin and its benchmark Job pod, and the serving port."""
    example = ROOT / "examples" / "qwen3-30b-a3b-v0.17-throughput.yaml"
    raw = yaml.safe_load(example.read_text(encoding="utf-8"))
    raw["metadata"]["namespace"] = NS
    vd = parse_vllm_deployment(raw)
    (deployment,) = [m for m in render_all(vd) if m["kind"] == "Deployment"]
    template = deployment["spec"]["template"]
    candidate = template["metadata"]["labels"]
    revision = candidate["vllm-operator.dev/revision"]
    twin = render_twin_deployment(vd.metadata.name, NS, revision, template, 1)
    job = render_job(vd, revision, 1, image="vllm-operator:dev")
    (port,) = [p["containerPort"] for c in template["spec"]["containers"] for p in c["ports"]]
    return (
        candidate,
        twin["spec"]["template"]["metadata"]["labels"],
        job["spec"]["template"]["metadata"]["labels"],
        port,
    )


def test_on_by_default_where_the_chart_knows_the_namespaces() -> None:
    (policy,) = _policies({"operator": {"scope": "namespaces", "namespaces": [NS]}})
    assert policy["metadata"]["namespace"] == NS
    for version in ("1.30", kubernetes_validate.latest_version()):
        kubernetes_validate.validate(policy, version, strict=True)


def test_cluster_scope_renders_none_and_says_so() -> None:
    """The chart cannot know where VLLMDeployments run in cluster scope: no silent gap."""
    assert _policies({}) == []
    notes = _render({})["vllm-operator/templates/NOTES.txt"]
    assert "no NetworkPolicy limits the benchmark Job pods" in notes
    assert "networkPolicy.benchmark.namespaces" in notes
    listed = _policies({"networkPolicy": {"benchmark": {"namespaces": [NS, "other"]}}})
    assert sorted(p["metadata"]["namespace"] for p in listed) == [NS, "other"]
    assert (
        "no NetworkPolicy"
        not in _render({"networkPolicy": {"benchmark": {"namespaces": [NS]}}})[
            "vllm-operator/templates/NOTES.txt"
        ]
    )
    assert _policies({"networkPolicy": {"benchmark": {"enabled": False, "namespaces": [NS]}}}) == []


def test_the_job_pod_reaches_candidate_twin_and_dns_and_nothing_else() -> None:
    candidate, twin, job, port = _rendered_pods()
    policies = _policies({"networkPolicy": {"benchmark": {"namespaces": [NS], "ports": [port]}}})
    src = (NS, job)
    dns = {"k8s-app": "kube-dns"}
    operator_pod = next(
        d["spec"]["template"]["metadata"]["labels"] for d in _docs({}) if d["kind"] == "Deployment"
    )
    allowed = {
        "candidate": egress_allowed(policies, src, (NS, candidate), port),
        "twin": egress_allowed(policies, src, (NS, twin), port),
        "dns over udp": egress_allowed(policies, src, ("kube-system", {**dns, "udp": "1"}), 53),
        "dns over tcp": egress_allowed(policies, src, ("kube-system", dns), 53),
    }
    assert all(allowed.values()), allowed
    refused = {
        "candidate, another port": egress_allowed(policies, src, (NS, candidate), port + 1),
        "the operator": egress_allowed(policies, src, ("vllm-system", operator_pod), 8080),
        "another benchmark pod": egress_allowed(policies, src, (NS, job), port),
        "a pod of another component": egress_allowed(
            policies, src, (NS, {**candidate, "app.kubernetes.io/component": "other"}), port
        ),
        "vLLM-like pod in another namespace": egress_allowed(
            policies, src, ("other", candidate), port
        ),
        "a DNS look-alike outside kube-system": egress_allowed(policies, src, (NS, dns), 53),
        "the internet or cloud metadata": egress_allowed(policies, src, (None, {}), 80),
    }
    assert not any(refused.values()), refused
    assert not ingress_allowed(policies, src)
    # The evaluator itself: without the policy every one of these would be allowed.
    assert egress_allowed([], src, (None, {}), 80)


def test_an_egress_rule_without_to_admits_everything_and_voids_the_jobs_policy() -> None:
    """Policies add up: a namespace-wide allow-all egress policy beside the chart's opens the
    internet to the Job pod (what docs/security.md warns about), and the evaluator says so."""
    _, _, job, port = _rendered_pods()
    policies = _policies({"networkPolicy": {"benchmark": {"namespaces": [NS], "ports": [port]}}})
    src = (NS, job)
    outside = (None, {})
    assert not egress_allowed(policies, src, outside, 80)
    allow_all = {
        "metadata": {"namespace": NS},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]},
    }
    assert egress_allowed([*policies, allow_all], src, outside, 80)
    assert egress_allowed([*policies, allow_all], src, ("vllm-system", {}), 8080)
    # `to` omitted but ports given: every destination, on those ports only.
    dns_anywhere = {
        "metadata": {"namespace": NS},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"ports": [{"protocol": "TCP", "port": 53}]}],
        },
    }
    assert egress_allowed([*policies, dns_anywhere], src, outside, 53)
    assert not egress_allowed([*policies, dns_anywhere], src, outside, 80)
    # An empty `to` list is the same as none (kubectl and the API treat them alike).
    empty_to = {**allow_all, "spec": {**allow_all["spec"], "egress": [{"to": []}]}}
    assert egress_allowed([*policies, empty_to], src, outside, 443)
    # A policy in another namespace, or one selecting other pods, changes nothing.
    elsewhere = {**allow_all, "metadata": {"namespace": "other"}}
    assert not egress_allowed([*policies, elsewhere], src, outside, 80)


def test_canary_scrape_admits_the_operator_to_the_server_pods_on_the_port_only() -> None:
    candidate, twin, job, port = _rendered_pods()
    values = {
        "networkPolicy": {
            "benchmark": {"enabled": False, "namespaces": [NS], "ports": [port]},
            "canaryScrape": {"enabled": True},
        }
    }
    (policy,) = _policies(values)
    assert policy["metadata"]["namespace"] == NS
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert _selects(policy["spec"]["podSelector"], candidate)
    assert not _selects(policy["spec"]["podSelector"], twin)
    assert not _selects(policy["spec"]["podSelector"], job)
    (rule,) = policy["spec"]["ingress"]
    operator_pod = {"app.kubernetes.io/name": "vllm-operator", "app.kubernetes.io/instance": "vo"}
    (peer,) = rule["from"]
    assert _peer_admits(peer, NS, "vllm-system", operator_pod)
    assert not _peer_admits(peer, NS, NS, operator_pod)  # the operator's namespace only
    assert not _peer_admits(peer, NS, "vllm-system", {"app": "other"})
    assert _port_admits(rule, port, "TCP")
    assert not _port_admits(rule, port + 1, "TCP")


def test_canary_scrape_is_off_by_default() -> None:
    assert [
        p
        for p in _policies({"networkPolicy": {"benchmark": {"namespaces": [NS]}}})
        if p["metadata"]["name"].endswith("canary-scrape")
    ] == []
