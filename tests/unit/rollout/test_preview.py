"""The preview `vllm-operator render` prints is the planner's own first rollout.

The same spec run through the in-memory world (the planner pass after pass, the Job
finishing with a Passed summary) creates exactly the objects the preview lists, in the same
order; only the ownerReferences differ (the preview has no uid).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from rollout_world import T0, World, spec, summary

from vllm_operator.rollout import Create
from vllm_operator.rollout.preview import first_revision


def world_creates(spec_doc: dict[str, Any]) -> tuple[World, list[dict[str, Any]]]:
    w = World(spec_doc)
    w.step()
    w.ready_all()
    w.step()
    if spec_doc.get("gate", {}).get("enabled", True):
        w.finish_job(summary())
        w.step()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"
    created = []
    for p in w.plans:
        for action in p.actions:
            if isinstance(action, Create):
                manifest = copy.deepcopy(dict(action.manifest))
                del manifest["metadata"]["ownerReferences"]
                created.append(manifest)
    return w, created


@pytest.mark.parametrize(
    "spec_doc",
    [
        spec(),
        spec(gate={"enabled": False}),
        spec(replicas=1),
        spec(rollout={"candidateReplicas": 2}),
    ],
    ids=["default", "gate-disabled", "one-replica", "two-candidates"],
)
def test_preview_is_the_planners_first_rollout(spec_doc: dict[str, Any]) -> None:
    w, created = world_creates(spec_doc)
    body = copy.deepcopy(w.body)
    body["metadata"] = {"name": "qwen", "namespace": "ml"}
    body.pop("status")
    assert first_revision(body, T0, w.settings) == created
    # The serving Service switches, then the serving revision gets its disruption budget.
    assert [m["kind"] for m in created][-2:] == ["Service", "PodDisruptionBudget"]
