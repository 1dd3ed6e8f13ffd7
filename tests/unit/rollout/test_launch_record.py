"""The launch-plan annotation has one owner, ``api/launch.py``'s ``LaunchRecord``.

The render writes the plan's record on each revision's Deployment; the planner reads it back
to summarise a revision it no longer renders from the spec (the stable one while a
candidate is gated), and a damaged annotation reads as no record instead of a crash.
"""

from __future__ import annotations

import json

import pytest
from rollout_world import World, spec, summary

from vllm_operator.api.launch import LaunchRecord
from vllm_operator.api.resource import parse_vllm_deployment
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import labels, render_all
from vllm_operator.rollout.views import deployment_view

RESOURCE = {
    "apiVersion": "vllm-operator.dev/v1alpha1",
    "kind": "VLLMDeployment",
    "metadata": {"name": "qwen"},
    "spec": spec(image="vllm/vllm-openai:v0.16.0", mode="eager"),
}


def test_the_deployment_carries_the_plans_record_and_reads_it_back() -> None:
    vd = parse_vllm_deployment(RESOURCE)
    launch = plan_launch(vd.spec)
    (deployment,) = [m for m in render_all(vd) if m["kind"] == "Deployment"]
    text = deployment["metadata"]["annotations"][labels.LAUNCH_PLAN_ANNOTATION]
    assert text == launch.record().to_annotation()
    assert json.loads(text) == {
        "compiled": False,
        "image": "vllm/vllm-openai:v0.16.0",
        "keyFlags": ["--tensor-parallel-size 1", "--enforce-eager"],
        "libraryPathFix": "strip-cuda",
        "performanceMode": "eager",
        "version": "0.16.0",
    }
    view = deployment_view(deployment)
    assert view is not None
    assert view.launch == launch.record()
    assert view.launch.version == "0.16.0"


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "{}",
        "not json",
        '["a list"]',
        '"a string"',
        "[" * 100_000 + "]" * 100_000,  # deeper than json can recurse
        '{"image": "x", "version": "0.17.0"}',  # a record without most of its fields
        json.dumps(
            {
                "image": "x",
                "version": "0.17.0",
                "performanceMode": "eager",
                "compiled": False,
                "libraryPathFix": "none",
                "keyFlags": 5,  # not a list
            }
        ),
    ],
    ids=[
        *("none", "empty", "empty-object", "not-json", "list", "string"),
        *("deep", "partial", "bad-type"),
    ],
)
def test_an_unreadable_annotation_is_no_record(text: str | None) -> None:
    assert LaunchRecord.from_annotation(text) is None


def test_a_record_with_keys_this_operator_does_not_know_still_reads() -> None:
    launch = plan_launch(parse_vllm_deployment(RESOURCE).spec).record()
    newer = json.dumps({**json.loads(launch.to_annotation()), "attention": "flashinfer"})
    assert LaunchRecord.from_annotation(newer) == launch


def _serving(spec_doc: dict[str, object]) -> World:
    w = World(spec_doc)
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary())
    w.step()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"
    return w


def test_the_stable_summary_comes_from_its_deployment_not_from_the_new_spec() -> None:
    w = _serving(spec(image="vllm/vllm-openai:v0.16.0", mode="eager"))
    stable = w.serving()
    assert stable is not None
    w.set_spec(spec(image="vllm/vllm-openai:v0.17.0", mode="throughput"))
    w.step()
    assert w.status["stable"]["revision"] == stable
    assert w.status["stable"]["performanceMode"] == "eager"
    assert w.status["stable"]["version"] == "0.16.0"
    assert w.status["stable"]["keyFlags"] == ["--tensor-parallel-size 1", "--enforce-eager"]
    assert w.status["candidate"]["performanceMode"] == "throughput"
    assert w.status["candidate"]["version"] == "0.17.0"


def test_a_damaged_annotation_leaves_the_image_of_the_pods() -> None:
    w = _serving(spec(image="vllm/vllm-openai:v0.16.0", mode="eager"))
    stable = w.serving()
    assert stable is not None
    dep = w.deployment(stable)
    assert dep is not None
    dep["metadata"]["annotations"][labels.LAUNCH_PLAN_ANNOTATION] = "{damaged"
    w.set_spec(spec(image="vllm/vllm-openai:v0.17.0", mode="throughput"))
    w.step()
    summary_of_stable = w.status["stable"]
    assert summary_of_stable["revision"] == stable
    assert summary_of_stable["image"] == "vllm/vllm-openai:v0.16.0"  # the pod template's
    assert summary_of_stable["version"] == ""
    assert summary_of_stable["performanceMode"] == ""
