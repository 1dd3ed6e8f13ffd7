"""The Helm chart, rendered by Helm's own engine (helm-python-sdk), for several value sets.

Each value set is a way platform teams install it (cluster-wide, namespace-only, with
monitoring, with the benchmark NetworkPolicy). Every manifest must pass kubernetes-validate
for the oldest supported and the newest known Kubernetes, no workload may run as root or
escalate privileges, and the chart must ship exactly the generated CRD.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import kubernetes_validate
import pytest
import yaml

from vllm_operator.api.crd import CRD_FILENAME

# Module fixtures computed once: all of its tests in one worker (conftest.py).
pytestmark = pytest.mark.xdist_group("chart-render")

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "vllm-operator"
KUBE_VERSIONS = ("1.30", kubernetes_validate.latest_version())

VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "namespace-only": {"operator": {"scope": "namespaces", "namespaces": ["team-a", "team-b"]}},
    "namespace-only-release-namespace": {"operator": {"scope": "namespaces"}},
    "monitoring": {
        "metrics": {
            "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
            "vllmPodMonitor": {"enabled": True},
        },
        "dashboards": {"enabled": True},
    },
    "network-policy": {
        "networkPolicy": {"benchmark": {"enabled": True, "namespaces": ["llm"], "ports": [8000]}}
    },
    "everything-namespaced": {
        "operator": {
            "scope": "namespaces",
            "namespaces": ["llm"],
            "benchImage": "registry.example/vllm-operator:bench",
            "extraArgs": ["--resync-seconds=120"],
            "allowedSecrets": ["llm/hf-token", "llm/vllm-*"],
            "extraEnv": [{"name": "EXTRA", "value": "1"}],
        },
        "image": {"digest": "sha256:" + "0" * 64},
        "imagePullSecrets": [{"name": "regcred"}],
        "metrics": {"vllmPodMonitor": {"enabled": True}, "serviceMonitor": {"enabled": True}},
        "networkPolicy": {"benchmark": {"enabled": True}},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "system-cluster-critical",
        "serviceAccount": {"annotations": {"example.com/role": "x"}},
    },
}

# prometheus-operator kinds are CRDs kubernetes-validate does not know: a small schema with
# the fields this chart relies on (from monitoring.coreos.com/v1) stands in for them.
_MONITOR_ENDPOINT = {
    "type": "object",
    "required": ["port"],
    "properties": {
        "port": {"type": "string", "minLength": 1},
        "path": {"type": "string", "pattern": "^/"},
        "interval": {"type": "string", "pattern": "^([0-9]+(ms|s|m|h))+$"},
        "scrapeTimeout": {"type": "string", "pattern": "^([0-9]+(ms|s|m|h))+$"},
    },
    "additionalProperties": False,
}
_NAMESPACE_SELECTOR = {
    "type": "object",
    "properties": {
        "any": {"type": "boolean"},
        "matchNames": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "additionalProperties": False,
}


def _monitor_schema(kind: str, endpoints_key: str) -> dict[str, Any]:
    spec_props: dict[str, Any] = {
        "selector": {
            "type": "object",
            "required": ["matchLabels"],
            "properties": {"matchLabels": {"type": "object", "minProperties": 1}},
        },
        "namespaceSelector": _NAMESPACE_SELECTOR,
        endpoints_key: {"type": "array", "minItems": 1, "items": _MONITOR_ENDPOINT},
    }
    if kind == "PodMonitor":
        spec_props["podTargetLabels"] = {"type": "array", "items": {"type": "string"}}
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"const": kind},
            "metadata": {"type": "object", "required": ["name", "namespace"]},
            "spec": {
                "type": "object",
                "required": ["selector", endpoints_key],
                "properties": spec_props,
                "additionalProperties": False,
            },
        },
    }


MONITOR_SCHEMAS = {
    "ServiceMonitor": _monitor_schema("ServiceMonitor", "endpoints"),
    "PodMonitor": _monitor_schema("PodMonitor", "podMetricsEndpoints"),
}


def render(values: dict[str, Any], namespace: str = "vllm-system") -> list[dict[str, Any]]:
    chart = helm_python.Chart.load(CHART)
    rendered = chart.render(values, name="vo", namespace=namespace)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    name: str = request.param
    return name, render(VALUE_SETS[name])


def test_lint_reports_no_errors_or_warnings() -> None:
    report = helm_python.lint(CHART, strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_lint_with_each_value_set(name: str) -> None:
    report = helm_python.lint(CHART, VALUE_SETS[name], namespace="vllm-system")
    assert report["errors"] == []


def test_every_manifest_validates(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    name, docs = rendered
    assert any(d["kind"] == "Deployment" for d in docs), name
    for doc in docs:
        if doc["kind"] in MONITOR_SCHEMAS:
            jsonschema.validate(doc, MONITOR_SCHEMAS[doc["kind"]])
            continue
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def _pod_specs(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for doc in docs:
        spec = doc.get("spec", {})
        template = spec.get("template") or spec.get("jobTemplate", {}).get("spec", {}).get(
            "template"
        )
        if template:
            found.append((f"{doc['kind']}/{doc['metadata']['name']}", template["spec"]))
    return found


def test_no_workload_runs_as_root_or_escalates(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, docs = rendered
    pods = _pod_specs(docs)
    assert pods
    for where, pod in pods:
        pod_ctx = pod.get("securityContext", {})
        assert pod_ctx.get("runAsNonRoot") is True, where
        assert pod_ctx.get("runAsUser", 1) != 0, where
        assert pod_ctx.get("seccompProfile", {}).get("type") == "RuntimeDefault", where
        assert not pod.get("hostNetwork"), where
        assert not pod.get("hostPID"), where
        for container in pod.get("initContainers", []) + pod["containers"]:
            ctx = container.get("securityContext", {})
            assert ctx.get("allowPrivilegeEscalation") is False, where
            assert not ctx.get("privileged"), where
            assert ctx.get("runAsUser", 1) != 0, where
            assert ctx.get("capabilities", {}).get("drop") == ["ALL"], where
            assert not ctx.get("capabilities", {}).get("add"), where


@pytest.mark.parametrize(
    "values",
    [
        {"securityContext": {"allowPrivilegeEscalation": True}},
        {"securityContext": {"privileged": True}},
        {"podSecurityContext": {"runAsUser": 0}},
        {"podSecurityContext": {"runAsNonRoot": False}},
        {"operator": {"scope": "everywhere"}},
        {"operator": {"namespaces": ["Not_A_Namespace"]}},
        {"operator": {"allowedSecrets": ["no-namespace"]}},
        {"imagePullSecret": []},
        {"metrics": {"service": {"port": 0}}},
    ],
    ids=[
        "escalation",
        "privileged",
        "root-uid",
        "root-allowed",
        "scope",
        "ns",
        "secret-pattern",
        "typo",
        "port",
    ],
)
def test_values_schema_refuses_unsafe_or_wrong_values(values: dict[str, Any]) -> None:
    with pytest.raises(helm_python.HelmValuesError):
        render(values)


def test_chart_crds_are_byte_identical_to_generated() -> None:
    chart = helm_python.Chart.load(CHART)
    (crd,) = chart.crds
    top = (ROOT / "crds" / CRD_FILENAME).read_text(encoding="utf-8")
    assert crd["name"] == f"crds/{CRD_FILENAME}"
    assert crd["data"] == top
    assert (CHART / "crds" / CRD_FILENAME).read_bytes() == (
        ROOT / "crds" / CRD_FILENAME
    ).read_bytes()


def _by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_operator_args_follow_scope_and_image() -> None:
    (cluster,) = _by_kind(render({}), "Deployment")
    args = cluster["spec"]["template"]["spec"]["containers"][0]["args"]
    image = cluster["spec"]["template"]["spec"]["containers"][0]["image"]
    assert args[0] == "run"
    assert "--all-namespaces" in args
    assert f"--bench-image={image}" in args
    (scoped,) = _by_kind(render(VALUE_SETS["namespace-only"]), "Deployment")
    args = scoped["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" not in args
    assert [a for a in args if a.startswith("--namespace=")] == [
        "--namespace=team-a",
        "--namespace=team-b",
    ]
    (pinned,) = _by_kind(render({"image": {"digest": "sha256:" + "1" * 64}}), "Deployment")
    assert pinned["spec"]["template"]["spec"]["containers"][0]["image"].endswith("1" * 64)


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_run_command_accepts_the_rendered_args(name: str) -> None:
    config = pytest.importorskip("vllm_operator.config")
    (deployment,) = _by_kind(render(VALUE_SETS[name]), "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "run"
    parsed = config.config_from_args(args[1:], {}, "vllm-operator run")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert parsed.metrics_port == ports["metrics"]
    assert parsed.liveness_port == ports["health"]
    assert (
        parsed.bench_image == container["image"]
        or VALUE_SETS[name].get("operator", {}).get("benchImage") == parsed.bench_image
    )
    scope = VALUE_SETS[name].get("operator", {})
    allowed = scope.get("allowedSecrets")
    assert parsed.allowed_secrets == (tuple(allowed) if allowed else None)
    if scope.get("scope") == "namespaces":
        assert parsed.namespaces == tuple(scope.get("namespaces") or ["vllm-system"])
    else:
        assert parsed.clusterwide


def test_probes_use_kopf_liveness_endpoint() -> None:
    (deployment,) = _by_kind(render({"operator": {"livenessPort": 8181}}), "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["health"] == 8181
    assert "--liveness-port=8181" in container["args"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}


def test_namespace_only_mode_has_nothing_cluster_wide_but_reading_nodes() -> None:
    docs = render(VALUE_SETS["namespace-only"])
    (cluster_role,) = _by_kind(docs, "ClusterRole")
    assert cluster_role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    (binding,) = _by_kind(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == cluster_role["metadata"]["name"]
    no_nodes = render({**VALUE_SETS["namespace-only"], "rbac": {"nodes": False}})
    kinds = {d["kind"] for d in no_nodes}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding"}
    roles = [r for r in _by_kind(docs, "Role") if not _leader_election(r)]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    (only,) = [
        r
        for r in _by_kind(render(VALUE_SETS["namespace-only-release-namespace"], "ns1"), "Role")
        if not _leader_election(r)
    ]
    assert only["metadata"]["namespace"] == "ns1"


def _leader_election(role: dict[str, Any]) -> bool:
    return str(role["metadata"]["name"]).endswith("-leader-election")


def test_network_policy_allows_only_vllm_and_dns() -> None:
    (policy,) = _by_kind(render(VALUE_SETS["network-policy"]), "NetworkPolicy")
    spec = policy["spec"]
    assert policy["metadata"]["namespace"] == "llm"
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "benchmark"
    assert set(spec["policyTypes"]) == {"Ingress", "Egress"}
    assert spec["ingress"] == []
    to_vllm, to_dns = spec["egress"]
    assert to_vllm["to"][0]["podSelector"]["matchExpressions"] == [
        {"key": "app.kubernetes.io/component", "operator": "In", "values": ["server", "twin"]}
    ]
    assert to_vllm["ports"] == [{"protocol": "TCP", "port": 8000}]
    assert {p["port"] for p in to_dns["ports"]} == {53}
    assert "namespaceSelector" in to_dns["to"][0]


def _rendered_vllm_pod_template() -> dict[str, Any]:
    from vllm_operator.api import parse_vllm_deployment
    from vllm_operator.render import render_all

    example = ROOT / "examples" / "qwen3-30b-a3b-v0.17-throughput.yaml"
    vd = parse_vllm_deployment(yaml.safe_load(example.read_text(encoding="utf-8")))
    (deployment,) = [m for m in render_all(vd) if m["kind"] == "Deployment"]
    template: dict[str, Any] = deployment["spec"]["template"]
    return template


def test_monitors_and_policy_select_the_pods_the_operator_renders() -> None:
    template = _rendered_vllm_pod_template()
    pod_labels = template["metadata"]["labels"]
    port_names = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
    docs = render(VALUE_SETS["monitoring"])
    (pod_monitor,) = _by_kind(docs, "PodMonitor")
    assert pod_monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    for endpoint in pod_monitor["spec"]["podMetricsEndpoints"]:
        assert endpoint["port"] in port_names
    for label in pod_monitor["spec"]["podTargetLabels"]:
        assert label in pod_labels
    (policy,) = _by_kind(render(VALUE_SETS["network-policy"]), "NetworkPolicy")
    vllm_selector = policy["spec"]["egress"][0]["to"][0]["podSelector"]
    assert _selects(vllm_selector, pod_labels)
    # The twin of a stable revision, which a twin-mode gate measures, is reachable too.
    from vllm_operator.render.twin import render_twin_deployment

    revision = pod_labels["vllm-operator.dev/revision"]
    twin = render_twin_deployment("qwen3", "llm", revision, template, 1)
    twin_labels = twin["spec"]["template"]["metadata"]["labels"]
    assert _selects(vllm_selector, twin_labels)
    assert not _selects(vllm_selector, {**twin_labels, "app.kubernetes.io/component": "other"})


def _selects(selector: dict[str, Any], pod_labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels and In-expressions) applied to ``pod_labels``."""
    if not selector.get("matchLabels", {}).items() <= pod_labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        assert expr["operator"] == "In"
        if pod_labels.get(expr["key"]) not in expr["values"]:
            return False
    return True


def test_network_policy_lets_the_rendered_job_reach_the_candidate() -> None:
    from vllm_operator.api import parse_vllm_deployment
    from vllm_operator.render import render_candidate_service
    from vllm_operator.render.job import render_job

    example = ROOT / "examples" / "qwen3-30b-a3b-v0.17-throughput.yaml"
    vd = parse_vllm_deployment(yaml.safe_load(example.read_text(encoding="utf-8")))
    template = _rendered_vllm_pod_template()
    revision = template["metadata"]["labels"]["vllm-operator.dev/revision"]
    job = render_job(vd, revision, 1, image="vllm-operator:dev")
    job_pod_labels = job["spec"]["template"]["metadata"]["labels"]
    service = render_candidate_service(vd, revision)
    container_ports = {
        p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c["ports"]
    }
    target = service["spec"]["ports"][0]["targetPort"]
    port = container_ports[target] if isinstance(target, str) else target
    (policy,) = _by_kind(render(VALUE_SETS["network-policy"]), "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= job_pod_labels.items()
    to_vllm = policy["spec"]["egress"][0]
    assert {"protocol": "TCP", "port": port} in to_vllm["ports"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()


def test_service_monitor_selects_the_metrics_service() -> None:
    docs = render(VALUE_SETS["monitoring"])
    (service_monitor,) = _by_kind(docs, "ServiceMonitor")
    (service,) = _by_kind(docs, "Service")
    assert service_monitor["metadata"]["labels"]["release"] == "prometheus"
    assert service_monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    assert service_monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    (configmap,) = _by_kind(docs, "ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_operator_and_benchmark_pods_run_as_the_image_user() -> None:
    from vllm_operator.api import parse_vllm_deployment
    from vllm_operator.render.job import render_job

    dockerfile = (ROOT / "operator" / "Dockerfile").read_text(encoding="utf-8")
    (user,) = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    uid = int(user.split(":")[0])
    assert uid != 0
    example = ROOT / "examples" / "qwen3-30b-a3b-v0.17-throughput.yaml"
    vd = parse_vllm_deployment(yaml.safe_load(example.read_text(encoding="utf-8")))
    job = render_job(vd, "0123456789", 1, image="vllm-operator:dev")
    (deployment,) = _by_kind(render({}), "Deployment")
    for where, pod in _pod_specs([job, deployment]):
        assert pod["securityContext"]["runAsUser"] == uid, where
        for container in pod["containers"]:
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, where
