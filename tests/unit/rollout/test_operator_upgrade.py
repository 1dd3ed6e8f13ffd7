"""An operator upgrade that renders the unchanged spec into other pods rolls nothing by itself.

The world is first deployed by this operator, then rewritten as an earlier operator would
have left it: the stable revision under another hash, with a template this operator no
longer renders (no container security context), and the same spec digest.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from rollout_world import World, serving_world, spec, summary

from vllm_operator.render import labels
from vllm_operator.rollout import Create, Delete, Patch
from vllm_operator.rollout.upgrade import ROLL_ANNOTATION

OLD = "0ld0ld0ld0"
SPEC = spec()


def deployed() -> World:
    return serving_world(SPEC)


def rendered_by_older_operator(w: World) -> str:
    """Rewrite the stable revision as an earlier operator made it; returns today's revision."""
    current = w.serving()
    assert current is not None
    dep = w.objects.pop(("Deployment", f"qwen--{current}"))
    text = json.dumps(dep).replace(current, OLD)
    old = json.loads(text)
    del old["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    w.objects[("Deployment", f"qwen--{OLD}")] = old
    svc = w.objects[("Service", "qwen")]
    svc["spec"]["selector"][labels.REVISION_LABEL] = OLD
    # The serving revision's disruption budget is named and selects by its revision too.
    budget = w.objects.pop(("PodDisruptionBudget", f"qwen--{current}"))
    w.objects[("PodDisruptionBudget", f"qwen--{OLD}")] = json.loads(
        json.dumps(budget).replace(current, OLD)
    )
    w.body["status"] = json.loads(json.dumps(w.body["status"]).replace(current, OLD))
    return current


def upgraded() -> tuple[World, str]:
    w = deployed()
    new = rendered_by_older_operator(w)
    return w, new


def creates_or_deletes(w: World, since: int = 0) -> list[str]:
    return [
        f"{type(a).__name__} {a.kind} {a.name}"
        for p in w.plans[since:]
        for a in p.actions
        if isinstance(a, Create | Delete)
    ]


def test_unchanged_spec_keeps_the_stable_revision_and_says_why() -> None:
    w, new = upgraded()
    mark = len(w.plans)
    p = w.settle()
    assert p.actions == ()
    assert creates_or_deletes(w, mark) == []
    assert w.serving() == OLD
    assert w.revisions() == [OLD]
    assert w.status["phase"] == "Serving"
    assert w.condition("Ready")["status"] == "True"
    pending = w.condition("OperatorUpdatePending")
    assert pending["status"] == "True"
    assert pending["reason"] == "TemplateChanged"
    assert OLD in pending["message"]
    assert new in pending["message"]
    assert f"{ROLL_ANNOTATION}={new}" in pending["message"]
    # One Event, not one per pass.
    w.advance(600)
    w.settle()
    assert [e for e in w.events() if e == "OperatorUpdatePending"] == ["OperatorUpdatePending"]


def test_non_pod_edits_during_a_pending_update_roll_nothing() -> None:
    w, _ = upgraded()
    w.settle()
    w.set_spec({**SPEC, "replicas": 3, "gate": {"iterations": 2}})
    p = w.step()
    assert p.kinds() == [f"patch Deployment qwen--{OLD}"]  # scaled, not replaced
    assert w.deployment(OLD)["spec"]["replicas"] == 3
    assert w.revisions() == [OLD]
    assert w.condition("OperatorUpdatePending")["status"] == "True"


def test_a_spec_change_rolls_as_usual_with_the_new_template() -> None:
    w, new = upgraded()
    w.settle()
    w.set_spec(spec(mode="balanced"))
    w.step()
    (candidate,) = [r for r in w.revisions() if r != OLD]
    assert candidate not in (OLD, new)
    assert w.deployment(candidate)["spec"]["replicas"] == 1
    assert "OperatorUpdatePending" not in [c["type"] for c in w.status["conditions"]]
    assert w.serving() == OLD


@pytest.mark.parametrize("value", ["<new>", "true", "TRUE"])
def test_the_annotation_rolls_it_through_the_gate(value: str) -> None:
    w, new = upgraded()
    w.settle()
    w.annotate(ROLL_ANNOTATION, new if value == "<new>" else value)
    p = w.step()
    assert f"create Deployment qwen--{new}" in p.kinds()
    assert w.deployment(new)["spec"]["replicas"] == 1
    assert w.serving() == OLD
    assert w.condition("OperatorUpdatePending")["reason"] == "RollRequested"
    assert "OperatorUpdateRolling" in w.events()
    w.ready_all()
    p = w.step()
    # The gate measures the new template against a twin of the old one, same spec (started
    # once the candidate is scheduled: gate.baseline.mode auto).
    assert f"create Deployment qwen--twin-{OLD}" in p.kinds()
    w.ready_all()
    p = w.step()
    assert p.kinds() == [f"create Job qwen--gate-{new}-1"]
    w.finish_job(summary())
    w.step()
    w.ready_all()
    w.settle()
    assert w.serving() == new
    assert w.revisions() == [new]
    assert w.status["stable"]["revision"] == new
    assert "OperatorUpdatePending" not in [c["type"] for c in w.status["conditions"]]
    # Left in place (GitOps), the annotation does nothing once the update is rolled.
    assert w.settle().actions == ()


def test_a_rejected_roll_keeps_the_old_revision_serving() -> None:
    w, new = upgraded()
    w.settle()
    w.annotate(ROLL_ANNOTATION, new)
    w.start_benchmark()
    w.finish_job(summary(passed=3), exit_code=1)
    w.settle()
    assert w.serving() == OLD
    assert w.revisions() == [OLD]
    assert w.status["phase"] == "Degraded"
    # Taking the annotation back returns to the reported, unrolled update.
    w.annotate(ROLL_ANNOTATION, None)
    w.settle()
    assert w.status["phase"] == "Serving"
    assert w.condition("OperatorUpdatePending")["reason"] == "TemplateChanged"


def test_an_annotation_naming_another_revision_rolls_nothing() -> None:
    w, _new = upgraded()
    w.annotate(ROLL_ANNOTATION, "abcdef0123")
    p = w.settle()
    assert p.actions == ()
    assert w.revisions() == [OLD]
    assert "'abcdef0123'" in w.condition("OperatorUpdatePending")["message"]


def test_a_huge_annotation_value_is_quoted_short() -> None:
    w, _new = upgraded()
    w.annotate(ROLL_ANNOTATION, "x" * 200_000)
    p = w.settle()
    assert p.actions == ()
    message = w.condition("OperatorUpdatePending")["message"]
    assert "'" + "x" * 64 + "...'" in message
    assert len(message) < 1000


def test_a_deployment_without_a_digest_is_taken_as_the_current_spec() -> None:
    w, new = upgraded()
    del w.deployment(OLD)["metadata"]["annotations"][labels.SPEC_DIGEST_ANNOTATION]
    p = w.settle()
    assert p.actions == ()
    pending = w.condition("OperatorUpdatePending")
    assert pending["reason"] == "SpecDigestUnknown"
    assert new in pending["message"]


def test_a_missing_stable_deployment_is_replaced_by_a_gated_candidate() -> None:
    w, new = upgraded()
    w.objects.pop(("Deployment", f"qwen--{OLD}"))
    w.step()
    assert w.revisions() == [new]
    assert w.deployment(new)["metadata"]["labels"][labels.ROLE_LABEL] == "candidate"
    assert w.deployment(new)["spec"]["replicas"] == 1


def test_an_edit_that_changes_no_pod_refreshes_the_recorded_digest_once() -> None:
    w = deployed()
    rev = w.serving()
    assert rev is not None
    before = w.deployment(rev)["metadata"]["annotations"][labels.SPEC_DIGEST_ANNOTATION]
    w.set_spec(spec(engine={"version": "0.17.0"}))  # what the image tag already said
    p = w.step()
    assert w.serving() == rev
    patches = [a for a in p.actions if isinstance(a, Patch)]
    assert [a.name for a in patches] == [f"qwen--{rev}"]
    after = w.deployment(rev)["metadata"]["annotations"][labels.SPEC_DIGEST_ANNOTATION]
    assert after != before
    assert w.settle().actions == ()


def _template(w: World, revision: str) -> dict[str, Any]:
    dep = w.deployment(revision)
    assert dep is not None
    template: dict[str, Any] = dep["spec"]["template"]
    return template


def test_the_old_template_is_what_keeps_running() -> None:
    w, _new = upgraded()
    w.settle()
    container = _template(w, OLD)["spec"]["containers"][0]
    assert "securityContext" not in container  # untouched: no patch of a running template
