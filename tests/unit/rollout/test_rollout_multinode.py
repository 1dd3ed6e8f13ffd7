"""Multi-node revisions roll out as LeaderWorkerSet groups, where the operator may run them.

With ``Settings.multi_node`` (``--multi-node``: LeaderWorkerSet installed and granted) a
spec with ``spec.resources.nodes`` > 1 gets one LeaderWorkerSet per revision in place of a
Deployment, gated on the leader's Service and promoted like any revision; the twin of a
stable group is a whole group (a copy of its ``leaderWorkerTemplate``). Without it the
spec is refused with ``MultiNodeUnavailable`` naming the fix, nothing is created, and a
revision that serves keeps serving untouched; so it is with it while the cluster serves no
LeaderWorkerSet (its CRD not installed), until it does. The serving group's disruption
budget counts whole groups.
"""

from __future__ import annotations

import copy
from typing import Any

from rollout_world import T0, World, serving_world, spec, summary

from builders import resource
from vllm_operator.render import labels
from vllm_operator.rollout.actions import Patch
from vllm_operator.rollout.context import Settings
from vllm_operator.rollout.preview import first_revision

TWO_NODES = {
    "engine": {
        "image": "vllm/vllm-openai:v0.22.0",
        "tensorParallelSize": 8,
        "extraArgs": ["--pipeline-parallel-size", "2"],
    },
    "resources": {"gpus": 8, "nodes": 2},
}
MULTI = Settings(bench_image="op:1", job_start_seconds=120, multi_node=True)


def kinds(w: World) -> list[str]:
    return sorted({k for k, _ in w.objects})


def test_a_first_multi_node_revision_creates_nothing_without_lws_and_says_why() -> None:
    w = World(spec(**TWO_NODES))
    p = w.settle()
    assert w.objects == {}
    assert p.actions == ()
    stalled = w.condition("Stalled")
    assert stalled["reason"] == "MultiNodeUnavailable"
    assert "spec.resources.nodes is 2" in stalled["message"]
    assert "install LeaderWorkerSet" in stalled["message"]
    assert "--multi-node" in stalled["message"]
    assert w.events() == ["MultiNodeUnavailable"]  # once per generation


def test_the_serving_revision_is_untouched_by_a_multi_node_edit_without_lws() -> None:
    w = serving_world(spec(image="vllm/vllm-openai:v0.22.0"))
    serving = w.serving()
    before = copy.deepcopy(w.objects)
    w.set_spec(spec(**TWO_NODES))
    w.settle()
    assert w.serving() == serving
    assert w.objects == before
    assert w.condition("Stalled")["reason"] == "MultiNodeUnavailable"


def test_a_multi_node_revision_is_a_leaderworkerset_gated_and_promoted() -> None:
    w = World(spec(**TWO_NODES), MULTI)
    w.settle()
    lws = [o for (k, _), o in w.objects.items() if k == "LeaderWorkerSet"]
    assert len(lws) == 1
    assert "Deployment" not in kinds(w)
    assert lws[0]["spec"]["leaderWorkerTemplate"]["size"] == 2
    revision = lws[0]["metadata"]["labels"][labels.REVISION_LABEL]
    assert w.status["phase"] != "Serving"
    w.ready_all()  # the set's status: one whole group Ready
    w.settle()
    w.job()  # the group is Ready: its benchmark runs, against the candidate Service
    services = [o for (k, _), o in w.objects.items() if k == "Service"]
    (candidate,) = [o for o in services if o["spec"]["selector"].get(labels.REVISION_LABEL)]
    selector = candidate["spec"]["selector"]
    templates = lws[0]["spec"]["leaderWorkerTemplate"]
    leader = templates["leaderTemplate"]["metadata"]["labels"]
    worker = templates["workerTemplate"]["metadata"]["labels"]
    assert all(leader.get(k) == v for k, v in selector.items())  # the leader's API server
    assert not all(worker.get(k) == v for k, v in selector.items())  # never a headless worker
    w.finish_job(summary())
    w.settle()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving", w.status
    assert w.serving() == revision
    (promoted,) = [o for (k, _), o in w.objects.items() if k == "LeaderWorkerSet"]
    assert promoted["metadata"]["labels"][labels.ROLE_LABEL] == labels.ROLE_STABLE


def test_the_twin_of_a_stable_group_is_a_whole_group_removed_after_the_gate() -> None:
    w = serving_world(spec(**TWO_NODES), MULTI)
    old = w.serving()
    doc = spec(**TWO_NODES)
    doc["engine"]["extraArgs"] = [*doc["engine"]["extraArgs"], "--max-num-seqs", "64"]
    doc["gate"] = {"baseline": {"mode": "twin"}}
    w.set_spec(doc)
    w.settle()
    assert w.twins() == [old]
    (twin,) = [
        o
        for (k, _), o in w.objects.items()
        if k == "LeaderWorkerSet" and o["metadata"]["labels"][labels.COMPONENT_LABEL] == "twin"
    ]
    templates = twin["spec"]["leaderWorkerTemplate"]
    assert templates["size"] == 2  # the stable's whole group, as it runs
    leader = templates["leaderTemplate"]["metadata"]["labels"]
    worker = templates["workerTemplate"]["metadata"]["labels"]
    assert leader[labels.COMPONENT_LABEL] == labels.COMPONENT_TWIN  # the twin Service's pod
    assert worker[labels.COMPONENT_LABEL] == labels.COMPONENT_WORKER  # selected by nothing
    assert leader[labels.REVISION_LABEL] == old
    w.ready_all()
    w.settle()
    w.finish_job(summary(), baseline=summary())
    w.settle()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving", w.status
    assert w.serving() != old
    assert w.twins() == []  # the twin group went with the gate
    assert [k for k, _ in w.objects if k == "LeaderWorkerSet"] == ["LeaderWorkerSet"]


AUTOSCALED = {**TWO_NODES, "autoscaling": {"minReplicas": 1, "maxReplicas": 4}}


def _autoscaler(w: World) -> dict[str, Any]:
    return w.objects[("HorizontalPodAutoscaler", "qwen")]


def test_the_autoscaler_scales_the_serving_groups_and_the_operator_leaves_its_count() -> None:
    w = serving_world(spec(**AUTOSCALED), MULTI)
    stable = w.serving()
    assert stable is not None
    assert "Stalled" not in [c["type"] for c in w.status["conditions"]]  # absent = False
    lws_name = f"qwen--{stable}"
    assert _autoscaler(w)["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": lws_name,
    }
    # The HPA scales the set to 3 groups through its scale subresource.
    lws = w.objects[("LeaderWorkerSet", lws_name)]
    lws["spec"]["replicas"] = 3
    lws["status"] = {"replicas": 3, "readyReplicas": 3}
    for _ in range(3):
        p = w.step()
        assert not any(
            isinstance(a, Patch) and a.kind == "LeaderWorkerSet" and "spec" in a.body
            for a in p.actions
        ), p.kinds()
    assert lws["spec"]["replicas"] == 3  # not reset to spec.replicas
    assert w.status["phase"] == "Serving"
    assert "serves (3/3 Ready)" in w.status["message"]

    # A new revision passes its gate: it is scaled to the stable's 3 groups before it
    # serves, and the autoscaler moves to its set with the Service.
    doc = spec(**AUTOSCALED)
    doc["engine"]["extraArgs"] = [*doc["engine"]["extraArgs"], "--max-num-seqs", "64"]
    doc["gate"] = {"baseline": {"mode": "stored"}}
    w.set_spec(doc)
    w.settle()
    (candidate,) = [r for r in w.revisions() if r != stable]
    assert _autoscaler(w)["spec"]["scaleTargetRef"]["name"] == lws_name  # gate: outside
    w.ready_all()
    w.settle()
    w.finish_job(summary())
    w.settle()
    scaled = w.objects[("LeaderWorkerSet", f"qwen--{candidate}")]
    assert scaled["spec"]["replicas"] == 3
    w.ready_all()
    w.settle()
    assert w.serving() == candidate
    assert _autoscaler(w)["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": f"qwen--{candidate}",
    }


def test_the_preview_of_a_multi_node_spec_is_its_leaderworkerset() -> None:
    doc = resource(spec(**TWO_NODES), namespace="ml")
    created = first_revision(doc, T0, MULTI)
    kinds_in_order = [o["kind"] for o in created]
    assert kinds_in_order[:2] == ["Service", "LeaderWorkerSet"]
    assert "Deployment" not in kinds_in_order
    assert first_revision(doc, T0, Settings(bench_image="op:1")) == []  # MultiNodeUnavailable


def _group_pod(w: World, lws_name: str, pod: str, *, node: str | None) -> None:
    """The leader pod of ``lws_name``: bound to ``node`` and running, or Unschedulable."""
    lws = w.objects[("LeaderWorkerSet", lws_name)]
    template = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    when = w.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    running = {
        "phase": "Running",
        "containerStatuses": [
            {"name": "vllm", "ready": True, "state": {"running": {"startedAt": when}}}
        ],
    }
    pending = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "no GPU",
            }
        ],
    }
    w.add_pod(pod, dict(template["metadata"]["labels"]), running if node else pending)
    if node is not None:
        w.objects[("Pod", pod)]["spec"] = {"nodeName": node}


def test_auto_falls_back_to_stored_figures_when_a_second_group_does_not_fit() -> None:
    w = serving_world(spec(**TWO_NODES), MULTI)
    stable = w.serving()
    assert stable is not None
    doc = spec(**TWO_NODES)
    doc["engine"]["extraArgs"] = [*doc["engine"]["extraArgs"], "--max-num-seqs", "64"]
    doc["gate"] = {"baseline": {"mode": "auto"}}
    w.set_spec(doc)
    w.step()
    (cand,) = [r for r in w.revisions() if r != stable]
    _group_pod(w, f"qwen--{cand}", "cand-0", node="gpu-a")  # the candidate group holds GPUs
    w.step()
    assert w.twins() == [stable]  # a twin group is tried
    _group_pod(w, f"qwen--twin-{stable}", "twin-0", node=None)  # no GPUs for a second group
    w.ready(cand, 1)
    w.step()
    assert w.kinds("Job") == []
    w.advance(4000)
    p = w.step()
    assert f"delete LeaderWorkerSet qwen--twin-{stable}" in p.kinds()
    assert f"create Job qwen--gate-{cand}-1" in p.kinds()
    annotations = w.job()["metadata"]["annotations"]
    assert annotations[labels.BASELINE_MODE_ANNOTATION] == "stored"
    assert "was not scheduled" in annotations[labels.BASELINE_REASON_ANNOTATION]
    assert "TwinUnavailable" in w.events()
    assert "was not scheduled" in w.condition("Ready")["message"]  # said in the status
    assert w.serving() == stable


def test_with_multi_node_but_no_lws_crd_nothing_is_created_until_it_is_served() -> None:
    w = World(spec(**TWO_NODES), MULTI)
    w.groups_served = False  # --multi-node, but API discovery finds no LeaderWorkerSet
    p = w.settle()
    assert w.objects == {}  # no candidate Service left behind, nothing half-created
    assert p.actions == ()
    stalled = w.condition("Stalled")
    assert stalled["reason"] == "MultiNodeUnavailable"
    message = stalled["message"]
    assert "leaderworkersets.leaderworkerset.x-k8s.io/v1" in message
    assert "releases/download/v0.10.0/manifests.yaml" in message  # the pinned release
    assert "--multi-node" not in message  # the flag is on: the CRD is the fix
    assert w.events() == ["MultiNodeUnavailable"]  # once per generation
    assert p.requeue_after is not None
    assert p.requeue_after <= 30  # looked at again soon
    w.groups_served = True  # LeaderWorkerSet installed
    w.settle()
    assert [k for k, _ in w.objects if k == "LeaderWorkerSet"] == ["LeaderWorkerSet"]
    assert "Stalled" not in [c["type"] for c in w.status["conditions"]]  # absent = False


def test_a_missing_lws_crd_leaves_the_serving_revision_untouched() -> None:
    w = serving_world(spec(image="vllm/vllm-openai:v0.22.0"), MULTI)
    serving = w.serving()
    before = copy.deepcopy(w.objects)
    w.groups_served = False
    w.set_spec(spec(**TWO_NODES))
    w.settle()
    assert w.serving() == serving
    assert w.objects == before
    assert w.condition("Stalled")["reason"] == "MultiNodeUnavailable"
    assert w.status["phase"] == "Degraded"  # the stable still serves, untouched


def test_the_serving_groups_budget_counts_whole_groups() -> None:
    doc = spec(**TWO_NODES, replicas=3, disruption={"minAvailable": 2})
    w = serving_world(doc, MULTI)
    serving = w.serving()
    (budget,) = [o for (k, _), o in w.objects.items() if k == "PodDisruptionBudget"]
    selector = budget["spec"]["selector"]["matchLabels"]
    lws = w.objects[("LeaderWorkerSet", f"qwen--{serving}")]
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
    on_pod = {**worker, "leaderworkerset.sigs.k8s.io/name": f"qwen--{serving}"}
    assert all(on_pod.get(k) == v for k, v in selector.items())  # workers count too
    assert budget["spec"]["maxUnavailable"] == 1  # 3 groups, 2 must stay: one group may go
    assert "minAvailable" not in budget["spec"]
