"""A multi-node spec reaches the planner before the planner rolls out groups.

``render.leaderworkerset`` renders the group, but the planner's objects are Deployments
(candidate, twin, promotion, canary): a spec asking for more than one node is refused by
name, nothing is created, and a revision that serves keeps serving untouched.
"""

from __future__ import annotations

import copy

from rollout_world import World, serving_world, spec

TWO_NODES = {
    "engine": {
        "image": "vllm/vllm-openai:v0.22.0",
        "tensorParallelSize": 8,
        "extraArgs": ["--pipeline-parallel-size", "2"],
    },
    "resources": {"gpus": 8, "nodes": 2},
}


def test_a_first_multi_node_revision_creates_nothing_and_says_why() -> None:
    w = World(spec(**TWO_NODES))
    p = w.settle()
    assert w.objects == {}
    assert p.actions == ()
    stalled = w.condition("Stalled")
    assert stalled["reason"] == "InvalidSpec"
    assert "spec.resources.nodes" in stalled["message"]
    assert "does not roll them out yet" in stalled["message"]


def test_the_serving_revision_is_untouched_by_a_multi_node_edit() -> None:
    w = serving_world(spec(image="vllm/vllm-openai:v0.22.0"))
    serving = w.serving()
    before = copy.deepcopy(w.objects)
    w.set_spec(spec(**TWO_NODES))
    w.settle()
    assert w.serving() == serving
    assert w.objects == before
    assert "spec.resources.nodes" in w.condition("Stalled")["message"]
