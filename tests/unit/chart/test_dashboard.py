"""The Grafana dashboard queries metrics that exist, with labels that exist.

A dashboard with a misspelt metric shows "No data" forever, and nobody notices until the
night it was needed. Operator metric names are checked against the registry the operator
really builds (``vllm_operator.metrics``), in both directions; vLLM names against the list
vLLM 0.17-0.33 exports (docs/vllm-facts.md); revision labels against the chart's PodMonitor.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "vllm-operator"
DASHBOARD = CHART / "files" / "dashboard.json"

# From docs/vllm-facts.md, "Metrics vLLM exports (0.17-0.33)" (family names).
VLLM_METRICS = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
}
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
METRIC = re.compile(r"\b(vllm_operator_[a-z0-9_]+|vllm:[a-z0-9_]+)")


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def _exprs() -> list[str]:
    return [t["expr"] for p in _dashboard()["panels"] for t in p.get("targets", [])]


def _used(prefix: str) -> set[str]:
    # vllm_operator_dev_* are label names (from the pods' vllm-operator.dev/* labels).
    found = {m for e in _exprs() for m in METRIC.findall(e) if m.startswith(prefix)}
    return {m for m in found if not m.startswith("vllm_operator_dev_")}


def _exposed(families: dict[str, str]) -> set[str]:
    return {name + s for name, kind in families.items() for s in SUFFIXES[kind]}


def test_dashboard_is_well_formed() -> None:
    dash = _dashboard()
    assert dash["uid"] == "vllm-operator"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dash["panels"]:
        assert {"h", "w", "x", "y"} <= panel["gridPos"].keys()
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert panel["description"], panel["title"]
            for target in panel["targets"]:
                assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "namespace", "name"} <= variables


def _operator_families() -> dict[str, str]:
    metrics = pytest.importorskip("vllm_operator.metrics")
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    metrics.OperatorMetrics(registry)
    return {family.name: family.type for family in registry.collect()}


def test_operator_metrics_used_exist_and_all_are_shown() -> None:
    families = _operator_families()
    used = _used("vllm_operator_")
    assert used, "the dashboard shows no operator metric"
    missing = used - _exposed(families)
    assert not missing, f"the dashboard queries metrics the operator does not export: {missing}"
    unshown = {name for name, kind in families.items() if not _exposed({name: kind}) & used}
    assert not unshown, f"operator metrics without a panel: {unshown}"


def test_operator_labels_used_by_variables_exist() -> None:
    metrics = pytest.importorskip("vllm_operator.metrics")
    from prometheus_client import CollectorRegistry

    ops = metrics.OperatorMetrics(CollectorRegistry())
    assert {"namespace", "name", "phase"} <= set(ops.phase._labelnames)
    assert {"namespace", "name", "revision", "prompt_class"} <= set(ops.latency._labelnames)
    assert {"revision", "concurrency"} <= set(ops.throughput._labelnames)
    assert {"outcome", "decided_by"} <= set(ops.verdicts._labelnames)


def test_vllm_metrics_used_exist() -> None:
    used = _used("vllm:")
    for wanted in (
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:request_queue_time_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
    ):
        assert wanted in used
    assert used <= _exposed(VLLM_METRICS), used - _exposed(VLLM_METRICS)


def test_vllm_panels_use_the_pod_monitor_target_labels() -> None:
    rendered = helm_python.Chart.load(CHART).render(
        {"metrics": {"vllmPodMonitor": {"enabled": True}}}, name="vo", namespace="m"
    )
    monitor = yaml.safe_load(rendered["vllm-operator/templates/podmonitor-vllm.yaml"])
    # Prometheus turns label names into [a-zA-Z0-9_].
    target_labels = {
        re.sub(r"[^a-zA-Z0-9_]", "_", label) for label in monitor["spec"]["podTargetLabels"]
    }
    vllm_exprs = [e for e in _exprs() if "vllm:" in e]
    assert vllm_exprs
    for expr in vllm_exprs:
        labels = set(re.findall(r"vllm_operator_dev_[a-z_]+", expr))
        assert labels, expr
        assert labels <= target_labels, expr


def test_chart_configmap_carries_the_dashboard() -> None:
    rendered = helm_python.Chart.load(CHART).render(
        {"dashboards": {"enabled": True}}, name="vo", namespace="m"
    )
    configmap = yaml.safe_load(rendered["vllm-operator/templates/dashboard-configmap.yaml"])
    assert json.loads(configmap["data"]["vllm-operator.json"]) == _dashboard()
