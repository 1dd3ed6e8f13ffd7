"""The autoscaler of the serving revision and its PodDisruptionBudget, as manifests.

The autoscaler (an ``autoscaling/v2`` HorizontalPodAutoscaler, or a KEDA ``ScaledObject``
with ``engine: keda``) always targets the Deployment of one revision, the stable one: the
gate's candidate is never scaled by it, and promotion moves ``scaleTargetRef`` in the same
plan that moves the serving Service. A multi-node revision is a LeaderWorkerSet, whose
scale subresource counts groups (``spec.replicas``) and names only the leaders as its pods
(``status.hpaPodSelector``, the CRD's ``labelSelectorPath``): the autoscaler targets the
set, so it adds and removes whole groups, and the HPA's Pods metrics average over the
leaders, the pods that serve the API and export vLLM's metrics (the workers run
``--headless``: no metrics page, and the chart's PodMonitor selects component ``server``
only, so KEDA's sums are of the leaders too). The HPA reads per-pod Pods metrics from the custom
metrics API under the names the Prometheus Adapter rules of docs/autoscaling.md give vLLM's
gauges (``vllm:`` becomes ``vllm_``: ``vllm_num_requests_waiting``,
``vllm_kv_cache_usage_perc``, ``vllm_time_to_first_token_seconds_p95``); KEDA queries
Prometheus directly, selecting the revision's pods by the labels the chart's PodMonitor
copies onto every series (``vllm_operator_dev_deployment``, ``vllm_operator_dev_revision``).

One PodDisruptionBudget per serving revision selects exactly that revision's vLLM pods
(never a candidate's, a twin's or a benchmark's). ``unhealthyPodEvictionPolicy:
AlwaysAllow``: a pod that is not Ready (crash loop, still loading) serves nothing, so a node
drain may always take it; the budget guards only pods that serve.

A multi-node revision (a LeaderWorkerSet) is down as a whole when any one of its pods goes:
vLLM's group cannot lose a member and LeaderWorkerSet recreates the group
(``RecreateGroupOnPodRestart``). So its budget counts groups, not pods (``group_budget``):
it selects every pod of the revision's set (leaders and workers, by LeaderWorkerSet's own
name label, never the twin's) with ``maxUnavailable`` equal to the number of groups the
spec lets go. Each evicted pod breaks at most one group, and a group being recreated has
all its pods unready, which uses the budget up until the group is Ready again; so a drain
never takes more groups than allowed (docs/multi-node.md, "Disruption budgets").
"""

from __future__ import annotations

import math
from typing import Any, Literal

from vllm_operator.api.autoscaling import AutoscalingSpec, AutoscalingTargets, DisruptionSpec
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.render import labels
from vllm_operator.render.leaderworkerset import API_VERSION as LWS_API_VERSION
from vllm_operator.render.names import autoscaler_name, deployment_name, disruption_budget_name

HPA_API_VERSION = "autoscaling/v2"
KEDA_API_VERSION = "keda.sh/v1alpha1"
PDB_API_VERSION = "policy/v1"

TargetKind = Literal["Deployment", "LeaderWorkerSet"]
"""What a revision runs as: what the autoscaler scales (both have a scale subresource)."""

# vLLM's own metrics (vllm/v1/metrics/loggers.py), as Prometheus scrapes them.
VLLM_WAITING = "vllm:num_requests_waiting"
VLLM_KV_CACHE = "vllm:kv_cache_usage_perc"
VLLM_TTFT = "vllm:time_to_first_token_seconds"


def adapter_name(metric: str) -> str:
    """The custom-metrics name of a vLLM metric under the adapter rules of
    docs/autoscaling.md (``vllm:`` becomes ``vllm_``)."""
    return metric.replace(":", "_")


WAITING_METRIC = adapter_name(VLLM_WAITING)
KV_CACHE_METRIC = adapter_name(VLLM_KV_CACHE)
# Prometheus label names the chart's PodMonitor gives the pod labels (podTargetLabels).
PROM_DEPLOYMENT_LABEL = "vllm_operator_dev_deployment"
PROM_REVISION_LABEL = "vllm_operator_dev_revision"
# Window of rate() for the TTFT histogram in KEDA's query.
TTFT_WINDOW = "2m"


def ttft_metric(percentile: int) -> str:
    """The custom-metrics name of one TTFT percentile per pod."""
    return f"{adapter_name(VLLM_TTFT)}_p{percentile}"


def quantity(value: float) -> str:
    """``value`` as a Kubernetes quantity in milli-units where needed (0.8 -> ``800m``)."""
    milli = max(1, round(value * 1000))
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _number(value: float) -> str:
    """A plain decimal for KEDA's string thresholds (no exponent, no trailing zeros)."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def _target_ref(name: str, revision: str, kind: TargetKind) -> dict[str, str]:
    """The revision's Deployment, or its LeaderWorkerSet (a multi-node revision: the same
    name, one replica a group)."""
    api = LWS_API_VERSION if kind == "LeaderWorkerSet" else "apps/v1"
    return {"apiVersion": api, "kind": kind, "name": deployment_name(name, revision)}


def _metadata(vd: VLLMDeployment, name: str, revision: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": vd.metadata.namespace,
        "labels": labels.common_labels(vd.metadata.name),
        "annotations": {labels.REVISION_ANNOTATION: revision},
    }


def _pods_metric(metric: str, average: float) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {
            "metric": {"name": metric},
            "target": {"type": "AverageValue", "averageValue": quantity(average)},
        },
    }


def hpa_metrics(targets: AutoscalingTargets) -> list[dict[str, Any]]:
    """The HPA's Pods metrics for ``targets`` (the HPA scales on the largest proposal)."""
    metrics: list[dict[str, Any]] = []
    if targets.waiting_requests_per_pod is not None:
        metrics.append(_pods_metric(WAITING_METRIC, targets.waiting_requests_per_pod))
    if targets.kv_cache_usage_percent is not None:
        metrics.append(_pods_metric(KV_CACHE_METRIC, targets.kv_cache_usage_percent / 100))
    if targets.ttft is not None:
        metrics.append(_pods_metric(ttft_metric(targets.ttft.percentile), targets.ttft.seconds))
    return metrics


def render_hpa(
    vd: VLLMDeployment, revision: str, kind: TargetKind = "Deployment"
) -> dict[str, Any]:
    """The HorizontalPodAutoscaler scaling the serving ``revision``'s ``kind`` (its
    Deployment, or its LeaderWorkerSet: groups)."""
    spec = _autoscaling(vd)
    return {
        "apiVersion": HPA_API_VERSION,
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(vd, autoscaler_name(vd.metadata.name), revision),
        "spec": {
            "scaleTargetRef": _target_ref(vd.metadata.name, revision, kind),
            "minReplicas": spec.min_replicas,
            "maxReplicas": spec.max_replicas,
            "metrics": hpa_metrics(spec.effective_targets),
        },
    }


def _selector(vd: VLLMDeployment, revision: str) -> str:
    namespace, name = vd.metadata.namespace, vd.metadata.name
    return (
        f'namespace="{namespace}",{PROM_DEPLOYMENT_LABEL}="{name}",'
        f'{PROM_REVISION_LABEL}="{revision}"'
    )


def keda_triggers(vd: VLLMDeployment, revision: str) -> list[dict[str, Any]]:
    """KEDA prometheus triggers: sums divided per pod (AverageValue), TTFT as one value."""
    spec = _autoscaling(vd)
    assert spec.prometheus is not None  # the model requires it for engine keda
    server = spec.prometheus.server_address
    where = _selector(vd, revision)
    targets = spec.effective_targets
    triggers: list[dict[str, Any]] = []

    def add(metric_type: str, query: str, threshold: float, name: str) -> None:
        triggers.append(
            {
                "type": "prometheus",
                "name": name,
                "metricType": metric_type,
                "metadata": {
                    "serverAddress": server,
                    "query": query,
                    "threshold": _number(threshold),
                },
            }
        )

    if targets.waiting_requests_per_pod is not None:
        query = f"sum({VLLM_WAITING}{{{where}}})"
        add("AverageValue", query, targets.waiting_requests_per_pod, "waiting-requests")
    if targets.kv_cache_usage_percent is not None:
        query = f"sum({VLLM_KV_CACHE}{{{where}}})"
        add("AverageValue", query, targets.kv_cache_usage_percent / 100, "kv-cache-usage")
    if targets.ttft is not None:
        q = targets.ttft.percentile / 100
        query = (
            f"histogram_quantile({q}, sum(rate("
            f"{VLLM_TTFT}_bucket{{{where}}}[{TTFT_WINDOW}])) by (le))"
        )
        add("Value", query, targets.ttft.seconds, f"ttft-p{targets.ttft.percentile}")
    return triggers


def render_scaled_object(
    vd: VLLMDeployment, revision: str, kind: TargetKind = "Deployment"
) -> dict[str, Any]:
    """The KEDA ScaledObject scaling the serving ``revision``'s ``kind`` (its Deployment,
    or its LeaderWorkerSet: KEDA scales any kind with a scale subresource)."""
    spec = _autoscaling(vd)
    return {
        "apiVersion": KEDA_API_VERSION,
        "kind": "ScaledObject",
        "metadata": _metadata(vd, autoscaler_name(vd.metadata.name), revision),
        "spec": {
            "scaleTargetRef": _target_ref(vd.metadata.name, revision, kind),
            "minReplicaCount": spec.min_replicas,
            "maxReplicaCount": spec.max_replicas,
            "triggers": keda_triggers(vd, revision),
        },
    }


def render_autoscaler(
    vd: VLLMDeployment, revision: str, kind: TargetKind = "Deployment"
) -> dict[str, Any]:
    """The autoscaler ``spec.autoscaling.engine`` asks for, scaling the serving
    ``revision``'s ``kind`` (what that revision runs as, observed)."""
    if _autoscaling(vd).engine == "keda":
        return render_scaled_object(vd, revision, kind)
    return render_hpa(vd, revision, kind)


# LeaderWorkerSet's label naming the set on every pod of its groups (LeaderWorkerSetNameLabelKey
# in kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go, v0.10.0).
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


def _percent_of(value: str, total: int) -> int:
    """``value`` (``"25%"``) of ``total``, rounded up as Kubernetes' disruption controller
    rounds a budget's percentages (``GetScaledValueFromIntOrPercent(..., roundUp=true)``)."""
    return math.ceil(int(value.removesuffix("%")) * total / 100)


def group_budget(disruption: DisruptionSpec, groups: int) -> int:
    """How many groups of ``groups`` a voluntary disruption may take at once.

    ``maxUnavailable`` counts groups (a percentage of ``groups``, rounded up), default 1;
    ``minAvailable`` is the groups that must stay, so the rest may go (never below 0).
    """
    budget = disruption.budget()
    if "minAvailable" in budget:
        keep = budget["minAvailable"]
        keep = _percent_of(keep, groups) if isinstance(keep, str) else keep
        return max(0, groups - keep)
    allowed = budget["maxUnavailable"]
    return _percent_of(allowed, groups) if isinstance(allowed, str) else allowed


def render_pdb(vd: VLLMDeployment, revision: str, groups: int | None = None) -> dict[str, Any]:
    """The PodDisruptionBudget of the serving ``revision``'s vLLM pods.

    For a multi-node revision, every pod of its LeaderWorkerSet with ``maxUnavailable`` in
    whole groups (``group_budget``); ``groups`` is the set's current replicas (default
    ``spec.replicas``), needed only for a percentage or ``minAvailable``.
    """
    name = vd.metadata.name
    if vd.spec.resources.nodes > 1:
        selector = {
            LWS_NAME_LABEL: deployment_name(name, revision),
            labels.DEPLOYMENT_LABEL: name,
            labels.REVISION_LABEL: revision,
        }
        # Pods, as policy/v1 counts them: one pod per group that may go (see the docstring).
        allowed: dict[str, Any] = {
            "maxUnavailable": group_budget(
                vd.spec.disruption, vd.spec.replicas if groups is None else groups
            )
        }
    else:
        selector, allowed = labels.server_selector(name, revision), vd.spec.disruption.budget()
    return {
        "apiVersion": PDB_API_VERSION,
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": disruption_budget_name(name, revision),
            "namespace": vd.metadata.namespace,
            "labels": labels.revision_labels(name, revision),
            "annotations": {labels.REVISION_ANNOTATION: revision},
        },
        "spec": {
            "selector": {"matchLabels": selector},
            **allowed,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def _autoscaling(vd: VLLMDeployment) -> AutoscalingSpec:
    spec = vd.spec.autoscaling
    if spec is None:
        raise ValueError("spec.autoscaling is not set: no autoscaler to render")
    return spec
