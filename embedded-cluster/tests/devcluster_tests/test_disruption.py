"""Evictions honour PodDisruptionBudgets; HorizontalPodAutoscalers are served (autoscaling/v2)."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster import DevCluster
from devcluster.apierrors import ApiError
from devcluster.disruption import selector_text

APP = {"app": "web"}


def _deployment(cluster: DevCluster, replicas: int) -> dict[str, Any]:
    return cluster.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": APP},
                "template": {
                    "metadata": {"labels": APP},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
            },
        }
    )


def _pod(cluster: DevCluster, name: str, owner: dict[str, Any], ready: bool = True) -> None:
    """A pod of ``owner`` as its controller would create it, Ready or not."""
    ref = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": APP, "ownerReferences": [ref]},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
    )
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}
    cluster.patch("v1", "pods", name, {"status": status}, subresource="status")


def _pdb(cluster: DevCluster, name: str = "web", **spec: Any) -> None:
    cluster.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": APP}, **spec},
        }
    )


def _evict(cluster: DevCluster, pod: str) -> Any:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}}
    return cluster.request(
        "POST", cluster.path("v1", "pods", pod, subresource="eviction"), body=body
    )


def _pods(cluster: DevCluster) -> list[str]:
    return sorted(p["metadata"]["name"] for p in cluster.list("v1", "pods", "default"))


def test_eviction_beyond_max_unavailable_is_refused(devcluster: DevCluster) -> None:
    owner = _deployment(devcluster, 3)
    for name in ("a", "b", "c"):
        _pod(devcluster, name, owner)
    _pdb(devcluster, maxUnavailable=1)
    assert _evict(devcluster, "a")["status"] == "Success"
    assert _pods(devcluster) == ["b", "c"]
    with pytest.raises(ApiError) as refused:
        _evict(devcluster, "b")
    assert refused.value.code == 429
    assert refused.value.reason == "TooManyRequests"
    assert "disruption budget" in refused.value.message
    assert _pods(devcluster) == ["b", "c"]
    status = devcluster.get("policy/v1", "poddisruptionbudgets", "web")["status"]
    assert (status["currentHealthy"], status["desiredHealthy"], status["expectedPods"]) == (2, 2, 3)
    assert status["disruptionsAllowed"] == 0
    # The controller's replacement becomes Ready: one disruption is allowed again.
    _pod(devcluster, "d", owner)
    assert _evict(devcluster, "b")["status"] == "Success"


def test_min_available_percentage_and_expressions(devcluster: DevCluster) -> None:
    owner = _deployment(devcluster, 4)
    for name in ("a", "b", "c", "d"):
        _pod(devcluster, name, owner)
    devcluster.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {
                "selector": {
                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]
                },
                "minAvailable": "50%",
            },
        }
    )
    _evict(devcluster, "a")
    _evict(devcluster, "b")
    with pytest.raises(ApiError) as refused:
        _evict(devcluster, "c")
    assert refused.value.code == 429


@pytest.mark.parametrize(("policy", "allowed"), [("AlwaysAllow", True), (None, False)])
def test_a_pod_that_is_not_ready_under_an_exhausted_budget(
    devcluster: DevCluster, policy: str | None, allowed: bool
) -> None:
    owner = _deployment(devcluster, 2)
    _pod(devcluster, "a", owner)
    _pod(devcluster, "b", owner, ready=False)
    extra = {"unhealthyPodEvictionPolicy": policy} if policy else {}
    _pdb(devcluster, maxUnavailable=0, **extra)
    if allowed:
        _evict(devcluster, "b")
        assert _pods(devcluster) == ["a"]
    else:
        with pytest.raises(ApiError) as refused:
            _evict(devcluster, "b")
        assert refused.value.code == 429
    with pytest.raises(ApiError) as healthy:
        _evict(devcluster, "a")  # Ready, and the budget allows no disruption
    assert healthy.value.code == 429


def test_no_budget_evicts_and_two_budgets_is_an_error(devcluster: DevCluster) -> None:
    owner = _deployment(devcluster, 2)
    _pod(devcluster, "a", owner)
    _pod(devcluster, "b", owner)
    _evict(devcluster, "a")
    assert _pods(devcluster) == ["b"]
    _pdb(devcluster, "one", maxUnavailable=1)
    _pdb(devcluster, "two", maxUnavailable=1)
    with pytest.raises(ApiError) as refused:
        _evict(devcluster, "b")
    assert refused.value.code == 500
    with pytest.raises(ApiError) as missing:
        _evict(devcluster, "nope")
    assert missing.value.code == 404


def test_selector_text() -> None:
    selector = {
        "matchLabels": {"b": "2", "a": "1"},
        "matchExpressions": [
            {"key": "t", "operator": "NotIn", "values": ["x", "y"]},
            {"key": "e", "operator": "Exists"},
            {"key": "g", "operator": "DoesNotExist"},
        ],
    }
    assert selector_text(selector) == "a=1,b=2,t notin (x,y),e,!g"


def test_hpa_is_served_with_discovery(devcluster: DevCluster) -> None:
    hpa = devcluster.create(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1,
                "maxReplicas": 3,
            },
        }
    )
    assert hpa["metadata"]["uid"]
    listing = devcluster.request("GET", "/apis/autoscaling/v2")
    names = {r["name"] for r in listing["resources"]}
    assert {"horizontalpodautoscalers", "horizontalpodautoscalers/status"} <= names
    pods = devcluster.request("GET", "/api/v1")
    assert "pods/eviction" in {r["name"] for r in pods["resources"]}
