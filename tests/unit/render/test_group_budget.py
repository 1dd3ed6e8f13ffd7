"""The disruption budget of a multi-node revision counts whole groups, not pods.

A group whose worker is evicted is down (vLLM's group cannot lose a member; LeaderWorkerSet
recreates it), so the budget selects every pod of the serving set, leaders and workers, and
lets go only as many pods as the spec lets go groups: each evicted pod breaks at most one
group. One-node revisions keep their budget as it was (tests/unit/render/
test_autoscaling_manifests.py and the recorded render set).
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from builders import minimal_spec, resource
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.api.autoscaling import DisruptionSpec
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import labels, revision_hash
from vllm_operator.render.autoscaling import LWS_NAME_LABEL, group_budget, render_pdb
from vllm_operator.render.leaderworkerset import render_leaderworkerset
from vllm_operator.render.twin import render_twin_group

KUBERNETES_VERSIONS = ["1.30", kubernetes_validate.latest_version()]


def two_node_resource(replicas: int = 3, **disruption: Any) -> Any:
    spec = minimal_spec(image="vllm/vllm-openai:v0.22.0", tensorParallelSize=8)
    spec["engine"]["extraArgs"] = ["--pipeline-parallel-size", "2"]
    spec["resources"] = {"gpus": 8, "nodes": 2}
    spec["replicas"] = replicas
    if disruption:
        spec["disruption"] = disruption
    return parse_vllm_deployment(resource(spec))


def pods_of(lws: dict[str, Any], groups: int) -> list[dict[str, str]]:
    """The labels of every pod LeaderWorkerSet makes of ``lws``: its templates' labels plus
    the set's name label (LeaderWorkerSet's own, on every pod of every group)."""
    templates = lws["spec"]["leaderWorkerTemplate"]
    name = lws["metadata"]["name"]
    leader = templates["leaderTemplate"]["metadata"]["labels"]
    worker = templates["workerTemplate"]["metadata"]["labels"]
    size = templates["size"]
    found = []
    for _ in range(groups):
        found.append({**leader, LWS_NAME_LABEL: name})
        found += [{**worker, LWS_NAME_LABEL: name} for _ in range(size - 1)]
    return found


def selects(pdb: dict[str, Any], pod: dict[str, str]) -> bool:
    wanted = pdb["spec"]["selector"]["matchLabels"]
    return all(pod.get(k) == v for k, v in wanted.items())


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_group_budget_validates(version: str) -> None:
    vd = two_node_resource(maxUnavailable="25%")
    kubernetes_validate.validate(render_pdb(vd, "abc1234567"), version, strict=True)


def test_the_budget_selects_every_pod_of_the_serving_set_and_no_twin() -> None:
    vd = two_node_resource(replicas=3)
    launch = plan_launch(vd.spec)
    rev = revision_hash(vd.spec, launch)
    lws = render_leaderworkerset(vd, launch, rev, 3)
    pdb = render_pdb(vd, rev)
    pods = pods_of(lws, 3)
    assert len(pods) == 6
    assert all(selects(pdb, p) for p in pods)  # leaders and workers alike
    workers = [p for p in pods if p[labels.COMPONENT_LABEL] == labels.COMPONENT_WORKER]
    assert len(workers) == 3
    # The twin of this revision: its workers carry the same revision and component, but
    # they belong to another set, which the budget never counts.
    twin = render_twin_group(
        vd.metadata.name, "default", rev, lws["spec"]["leaderWorkerTemplate"], 1
    )
    assert not any(selects(pdb, p) for p in pods_of(twin, 1))
    # Nor another revision's set.
    other = render_leaderworkerset(vd, launch, "fedcba9876", 1)
    assert not any(selects(pdb, p) for p in pods_of(other, 1))
    assert pdb["spec"]["maxUnavailable"] == 1  # one group: one pod of it breaks it
    assert "minAvailable" not in pdb["spec"]
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


@pytest.mark.parametrize(
    ("disruption", "groups", "allowed"),
    [
        ({}, 4, 1),
        ({"maxUnavailable": 2}, 4, 2),
        ({"maxUnavailable": 0}, 4, 0),
        ({"maxUnavailable": "25%"}, 4, 1),
        ({"maxUnavailable": "30%"}, 4, 2),  # rounded up, as Kubernetes rounds it
        ({"maxUnavailable": "50%"}, 1, 1),
        ({"minAvailable": 3}, 4, 1),
        ({"minAvailable": 5}, 4, 0),
        ({"minAvailable": "50%"}, 3, 1),  # 2 of 3 must stay (rounded up)
        ({"minAvailable": "100%"}, 3, 0),
        ({"minAvailable": 0}, 3, 3),
    ],
)
def test_group_budget_counts_groups(disruption: dict[str, Any], groups: int, allowed: int) -> None:
    spec = DisruptionSpec.model_validate(disruption)
    assert group_budget(spec, groups) == allowed
    vd = two_node_resource(replicas=groups, **disruption)
    pdb = render_pdb(vd, "abc1234567", groups)
    assert pdb["spec"]["maxUnavailable"] == allowed
    assert "minAvailable" not in pdb["spec"]


def test_the_budget_follows_the_sets_current_groups() -> None:
    vd = two_node_resource(replicas=2, minAvailable=1)
    assert render_pdb(vd, "abc1234567")["spec"]["maxUnavailable"] == 1  # spec.replicas: 2
    assert render_pdb(vd, "abc1234567", 5)["spec"]["maxUnavailable"] == 4
