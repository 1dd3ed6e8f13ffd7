"""The autoscaler and the disruption budget as manifests: valid for Kubernetes, and aimed
at exactly the serving revision's vLLM pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import labels
from vllm_operator.render.autoscaling import (
    quantity,
    render_autoscaler,
    render_hpa,
    render_pdb,
    render_scaled_object,
)
from vllm_operator.render.revision import revision_hash

KUBERNETES_VERSIONS = ["1.30", kubernetes_validate.latest_version()]
EVERY_TARGET = {
    "waitingRequestsPerPod": 2.5,
    "kvCacheUsagePercent": 80,
    "ttft": {"percentile": 99, "seconds": 1.5},
}


def _with(resource: dict[str, Any], **spec: Any) -> Any:
    resource["spec"].update(spec)
    return parse_vllm_deployment(resource)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_hpa_and_pdb_validate(resource: dict[str, Any], version: str) -> None:
    vd = _with(
        resource,
        autoscaling={"minReplicas": 2, "maxReplicas": 9, "targets": EVERY_TARGET},
        disruption={"maxUnavailable": "25%"},
    )
    for manifest in (render_hpa(vd, "abc1234567"), render_pdb(vd, "abc1234567")):
        kubernetes_validate.validate(manifest, version, strict=True)


def test_hpa_scales_on_per_pod_vllm_metrics(resource: dict[str, Any]) -> None:
    vd = _with(resource, autoscaling={"maxReplicas": 4, "targets": EVERY_TARGET})
    hpa = render_hpa(vd, "abc1234567")
    assert hpa["spec"]["scaleTargetRef"]["name"] == f"{vd.metadata.name}--abc1234567"
    metrics = {
        m["pods"]["metric"]["name"]: m["pods"]["target"]["averageValue"]
        for m in hpa["spec"]["metrics"]
    }
    assert all(m["type"] == "Pods" for m in hpa["spec"]["metrics"])
    assert metrics == {
        "vllm_num_requests_waiting": "2500m",
        "vllm_kv_cache_usage_perc": "800m",  # vLLM exports a fraction
        "vllm_time_to_first_token_seconds_p99": "1500m",
    }


def test_no_target_means_the_waiting_queue(resource: dict[str, Any]) -> None:
    vd = _with(resource, autoscaling={"maxReplicas": 4})
    (metric,) = render_hpa(vd, "abc1234567")["spec"]["metrics"]
    assert metric["pods"]["metric"]["name"] == "vllm_num_requests_waiting"
    assert metric["pods"]["target"]["averageValue"] == "5"


def test_keda_scaled_object_queries_only_the_revisions_pods(resource: dict[str, Any]) -> None:
    prom = {"serverAddress": "http://prometheus.monitoring:9090"}
    vd = _with(
        resource,
        autoscaling={
            "maxReplicas": 4,
            "engine": "keda",
            "prometheus": prom,
            "targets": EVERY_TARGET,
        },
    )
    scaled = render_autoscaler(vd, "abc1234567")
    assert scaled == render_scaled_object(vd, "abc1234567")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (1, 4)
    triggers = {t["name"]: t for t in scaled["spec"]["triggers"]}
    assert set(triggers) == {"waiting-requests", "kv-cache-usage", "ttft-p99"}
    where = f'vllm_operator_dev_deployment="{vd.metadata.name}",vllm_operator_dev_revision='
    for trigger in triggers.values():
        assert trigger["metadata"]["serverAddress"] == prom["serverAddress"]
        assert where + '"abc1234567"' in trigger["metadata"]["query"]
    assert triggers["waiting-requests"]["metricType"] == "AverageValue"
    assert triggers["kv-cache-usage"]["metadata"]["threshold"] == "0.8"
    assert triggers["ttft-p99"]["metricType"] == "Value"
    assert triggers["ttft-p99"]["metadata"]["query"].startswith("histogram_quantile(0.99,")


def test_pdb_selects_the_server_pods_of_one_revision(resource: dict[str, Any]) -> None:
    vd = _with(resource)
    rev = revision_hash(vd.spec, plan_launch(vd.spec))
    pdb = render_pdb(vd, rev)
    assert pdb["spec"]["selector"]["matchLabels"] == labels.server_selector(vd.metadata.name, rev)
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert "minAvailable" not in pdb["spec"]
    vd = _with(resource, disruption={"minAvailable": 2})
    assert render_pdb(vd, rev)["spec"]["minAvailable"] == 2


def test_autoscaling_and_disruption_roll_no_revision(resource: dict[str, Any]) -> None:
    spec = parse_vllm_deployment(resource).spec
    before = revision_hash(spec, plan_launch(spec))
    vd = _with(resource, autoscaling={"maxReplicas": 3}, disruption={"maxUnavailable": 2})
    assert revision_hash(vd.spec, plan_launch(vd.spec)) == before


@pytest.mark.parametrize(
    ("value", "text"), [(5, "5"), (0.8, "800m"), (2.5, "2500m"), (0.0001, "1m"), (12.0, "12")]
)
def test_quantity(value: float, text: str) -> None:
    assert quantity(value) == text


LWS_CRD = Path(__file__).parent / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_a_multi_node_revision_is_scaled_through_its_leaderworkersets_scale(
    resource: dict[str, Any], version: str
) -> None:
    vd = _with(resource, autoscaling={"minReplicas": 1, "maxReplicas": 3, "targets": EVERY_TARGET})
    hpa = render_autoscaler(vd, "abc1234567", "LeaderWorkerSet")
    kubernetes_validate.validate(hpa, version, strict=True)
    target = hpa["spec"]["scaleTargetRef"]
    assert target == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": f"{vd.metadata.name}--abc1234567",
    }
    # What that target's scale subresource is, in LWS's own CRD (v0.10.0): replicas are
    # groups, and the pods the HPA averages its Pods metrics over are the leaders.
    crd = yaml.safe_load(LWS_CRD.read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == target["apiVersion"][-2:]]
    assert crd["spec"]["group"] + "/" + served["name"] == target["apiVersion"]
    assert crd["spec"]["names"]["kind"] == target["kind"]
    assert served["subresources"]["scale"] == {
        "labelSelectorPath": ".status.hpaPodSelector",
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
    }
    assert render_hpa(vd, "abc1234567")["spec"]["scaleTargetRef"]["kind"] == "Deployment"


def test_keda_scales_a_leaderworkerset_too(resource: dict[str, Any]) -> None:
    prom = {"serverAddress": "http://prometheus.monitoring:9090"}
    vd = _with(resource, autoscaling={"maxReplicas": 4, "engine": "keda", "prometheus": prom})
    scaled = render_autoscaler(vd, "abc1234567", "LeaderWorkerSet")
    assert scaled["kind"] == "ScaledObject"
    assert scaled["spec"]["scaleTargetRef"]["kind"] == "LeaderWorkerSet"
    assert scaled["spec"]["scaleTargetRef"]["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
