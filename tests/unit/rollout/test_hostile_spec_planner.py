"""A serving resource whose new spec the operator cannot handle keeps its stable revision.

The planner turns values the API accepted but the operator refuses (nesting past the
limit, integers past int64) into InvalidSpec, and ``rollout.stopped`` does the same for
an exception it did not foresee: no action, the stable revision untouched, one Event.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from rollout_world import World, spec, summary

from vllm_operator.rollout.observed import observe
from vllm_operator.rollout.stopped import unhandled


def deployed() -> World:
    w = World(spec(image="vllm/vllm-openai:v0.17.0", mode="throughput"))
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary(median_ms=900, tokens=700))
    w.step()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"
    return w


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": "x"}
    for _ in range(levels):
        value = {"a": value}
    return value


def bump(w: World, **changes: Any) -> None:
    doc = copy.deepcopy(w.body["spec"])
    doc.update(changes)
    w.set_spec(doc)


def test_deep_affinity_on_a_serving_resource_is_invalid_spec_and_touches_nothing() -> None:
    w = deployed()
    stable = w.serving()
    before = copy.deepcopy(w.objects)
    bump(w, scheduling={"affinity": nested(300)})
    p = w.step()
    assert p.actions == ()
    assert w.status["phase"] == "Degraded"
    assert w.condition("Stalled")["reason"] == "InvalidSpec"
    assert "spec.scheduling.affinity.a" in w.condition("Stalled")["message"]
    assert [e.reason for e in p.events] == ["InvalidSpec"]
    assert w.step().events == ()
    assert w.objects == before
    assert w.serving() == stable
    assert w.status["stable"]["revision"] == stable


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"resources": {"gpus": 1, "cpu": "64GB"}}, "spec.resources.cpu"),
        ({"resources": {"gpus": 1, "memory": "lots"}}, "spec.resources.memory"),
        (
            {"scheduling": {"tolerations": [{"key": "gpu", "operator": "Exists", "value": "yes"}]}},
            "spec.scheduling.tolerations[0]",
        ),
    ],
    ids=["cpu", "memory", "toleration"],
)
def test_values_only_the_objects_reveal_are_invalid_spec_naming_the_field(
    change: dict[str, Any], field: str
) -> None:
    # The planner checks what render_deployment would refuse before it renders anything: a
    # named InvalidSpec, not the catch-all's "cannot handle this resource".
    w = deployed()
    stable = w.serving()
    before = copy.deepcopy(w.objects)
    bump(w, **change)
    p = w.step()
    assert p.actions == ()
    message = w.condition("Stalled")["message"]
    assert w.condition("Stalled")["reason"] == "InvalidSpec"
    assert field in message
    assert "cannot handle" not in message
    assert w.objects == before
    assert w.serving() == stable


def test_unforeseen_exception_keeps_stable_and_history() -> None:
    w = deployed()
    stable = w.serving()
    bump(w, replicas=2)
    observed = observe(
        copy.deepcopy(w.body),
        deployments=[o for (k, _), o in w.objects.items() if k == "Deployment"],
        services=[o for (k, _), o in w.objects.items() if k == "Service"],
    )
    p = unhandled(observed, w.now, RecursionError("x" * 1000))
    assert p.actions == ()
    assert p.requeue_after is None
    status = p.status.to_wire()
    assert status["phase"] == "Degraded"
    assert status["stable"]["revision"] == stable
    assert status["history"] == w.status["history"]
    message = next(c for c in status["conditions"] if c["type"] == "Stalled")["message"]
    kept = 300 - len("RecursionError: ")  # the detail is cut at 300 characters
    assert "(RecursionError: " + "x" * kept + "...) (fix: simplify the spec" in message
    assert [e.reason for e in p.events] == ["InvalidSpec"]
