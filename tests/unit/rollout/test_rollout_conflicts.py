"""A child name held by an object the resource does not own stalls the rollout, quietly.

Issue 10: a foreign Service at the serving name made the resource loop in Promoting with
30-48 false "Promoted" Events a second; another resource's Service at the candidate name was
benchmarked in place of the candidate. Now: Stalled naming the object and its holder, one
Event, no action, no requeue, and nothing of the stable revision touched.
"""

from __future__ import annotations

from rollout_world import World, spec

from builders import API_VERSION, KIND

V16 = spec(image="vllm/vllm-openai:v0.16.0", mode="eager")
V17 = spec(image="vllm/vllm-openai:v0.17.0")
OTHER = {"apiVersion": API_VERSION, "kind": KIND}


def test_foreign_service_at_the_serving_name_stalls_without_a_hot_loop() -> None:
    w = World(V17)
    w.squat("Service", "qwen")
    w.pass_first_gate()
    p = w.settle()
    assert p.actions == ()
    assert p.requeue_after is None
    assert w.status["phase"] == "Failed"  # nothing serves
    stalled = w.condition("Stalled")
    assert stalled["status"] == "True"
    assert stalled["reason"] == "NameConflict"
    assert "Service qwen is held by no owner" in stalled["message"]
    assert "Promoted" not in w.events()
    assert w.events().count("NameConflict") == 1
    # More passes (resyncs): no action, no Event, the same status.
    before = w.status
    for _ in range(20):
        p = w.step()
        assert (p.actions, p.events, p.requeue_after) == ((), (), None)
    assert w.status == before
    assert w.serving() is None  # the foreign Service was never patched
    assert w.objects[("Service", "qwen")]["spec"]["selector"] == {"app": "other"}
    # The squatter goes away: the next pass promotes.
    del w.objects[("Service", "qwen")]
    w.settle()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"
    assert w.serving() is not None
    assert "Stalled" not in [c["type"] for c in w.status["conditions"]]  # absent = False
    assert w.events().count("Promoted") == 1


def test_candidate_name_held_by_another_resource_keeps_the_stable_revision() -> None:
    w = World(V16)
    w.pass_first_gate()
    w.settle()
    stable = w.serving()
    assert stable is not None
    w.set_spec(V17)
    del w.objects[("Service", "qwen--candidate")]  # replaced by another resource's Service
    w.squat("Service", "qwen--candidate", {**OTHER, "name": "someone", "uid": "uid-9"})
    p = w.settle()
    assert p.actions == ()
    assert w.status["phase"] == "Degraded"  # the stable revision serves
    message = w.condition("Stalled")["message"]
    assert "Service qwen--candidate is held by VLLMDeployment someone (uid uid-9)" in message
    assert w.kinds("Job") == []  # nothing benchmarked the other resource's pods
    assert w.revisions() == [stable]
    assert w.serving() == stable


def test_look_alike_with_our_labels_but_another_owner_is_not_a_child() -> None:
    w = World(V17)
    w.pass_first_gate()
    w.settle()
    serving = w.objects[("Service", "qwen")]
    serving["metadata"]["ownerReferences"][0]["uid"] = "uid-other"  # no longer ours
    p = w.step()
    assert p.actions == ()
    assert w.condition("Stalled")["reason"] == "NameConflict"
