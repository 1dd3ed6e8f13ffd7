"""The calibration annotation through the planner, in memory (``rollout.calibration``): when
it starts, what its Job is, what stops it. The full run (Jobs measured, the proposal) is the
embedded cluster's test, ``tests/integration/rollout/test_calibration.py``."""

from __future__ import annotations

from typing import Any

from rollout_world import World, serving_world, spec

from vllm_operator.render import labels
from vllm_operator.rollout.actions import Delete
from vllm_operator.rollout.context import Settings

KEY = labels.CALIBRATE_ANNOTATION
SLO: dict[str, Any] = {
    "trials": 2,
    "maxTrials": 2,
    "workload": {
        "synthetic": {"inputTokens": {"mean": 64}, "outputTokens": {"mean": 8}},
        "load": {"mode": "rate", "rates": [2, 4], "secondsPerLevel": 2},
    },
    "thresholds": {"slo": {"ttftMs": {"p50": 60000}}},
}


def slo_world() -> World:
    """Serving, then the gate given SLO limits (a new generation, the same revision)."""
    w = serving_world(spec())
    w.set_spec(spec(gate=SLO))
    w.settle()
    assert w.status["phase"] == "Serving"
    return w


def calibration(w: World) -> dict[str, Any]:
    return dict(w.status.get("calibration") or {})


def calibration_jobs(w: World) -> list[dict[str, Any]]:
    return [
        o
        for (k, _), o in w.objects.items()
        if k == "Job"
        and o["metadata"]["labels"].get(labels.COMPONENT_LABEL) == labels.COMPONENT_CALIBRATION
    ]


def running(w: World) -> dict[str, Any]:
    w.annotate(KEY, "2")
    w.step()
    w.ready_all()  # the twin
    w.settle()
    (job,) = calibration_jobs(w)
    return job


def test_calibrate_starts_a_twin_then_one_job_of_the_stable_revision_against_it() -> None:
    w = slo_world()
    stable, history = w.serving(), w.status["history"]
    job = running(w)
    assert calibration(w)["phase"] == "Running"
    assert calibration(w)["revision"] == stable
    assert "CalibrationStarted" in w.events()
    assert w.twins()
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--url") + 1] == "http://qwen.ml.svc:8000"  # the serving Service
    assert "--baseline-url" in args
    assert job["metadata"]["name"] == f"qwen--calibrate-{calibration(w)['token']}-1"
    assert args[args.index("--job-name") + 1] == job["metadata"]["name"]
    w.advance(5)
    w.settle()
    assert len(calibration_jobs(w)) == 1  # created once
    assert w.status["history"] == history  # no verdict
    assert w.serving() == stable
    assert w.status["phase"] == "Serving"


def test_before_one_revision_serves_it_waits() -> None:
    w = World(spec(gate=SLO))
    w.annotate(KEY, "2")
    w.step()
    assert calibration(w)["phase"] == "Waiting"
    assert not calibration_jobs(w)


def test_a_bad_count_or_a_gate_without_slo_limits_is_invalid_naming_the_annotation() -> None:
    w = slo_world()
    w.annotate(KEY, "x")
    w.step()
    assert calibration(w)["phase"] == "Invalid"
    assert f"annotation {KEY}='x'" in calibration(w)["message"]
    w2 = serving_world(spec())
    w2.annotate(KEY, "2")
    w2.step()
    assert calibration(w2)["phase"] == "Invalid"
    assert "no gate.thresholds.slo limits" in calibration(w2)["message"]
    assert "CalibrationInvalid" in w.events()
    assert not calibration_jobs(w)
    assert not calibration_jobs(w2)


def test_a_spec_change_abandons_it_and_deletes_its_running_job() -> None:
    w = slo_world()
    job = running(w)
    w.set_spec(spec(gate={**SLO, "trials": 1}))
    p = w.step()
    assert calibration(w)["phase"] == "Abandoned"
    assert "the spec changed mid-calibration" in calibration(w)["message"]
    assert Delete("Job", job["metadata"]["name"]) in p.actions
    assert "CalibrationAbandoned" in w.events()
    w.settle()
    assert not w.twins()  # the calibration's twin went with it


def test_removing_the_annotation_abandons_it_and_setting_it_again_starts_afresh() -> None:
    w = slo_world()
    first = running(w)
    w.annotate(KEY, None)
    w.settle()
    assert calibration(w)["phase"] == "Abandoned"
    assert "the annotation was removed" in calibration(w)["message"]
    w.settle()
    assert calibration(w).get("request") is None
    second = running(w)
    assert second["metadata"]["name"] != first["metadata"]["name"]  # a new stem
    assert calibration(w)["phase"] == "Running"


def test_an_answered_value_left_in_place_repeats_nothing() -> None:
    w = slo_world()
    w.annotate(KEY, "0")
    w.settle()
    events = len(w.events())
    w.advance(60)
    w.settle()
    assert calibration(w)["phase"] == "Invalid"
    assert len(w.events()) == events  # said once


def test_a_huge_value_is_refused_once_and_recorded_as_a_digest() -> None:
    w = slo_world()
    w.annotate(KEY, "9" * 100_000)
    w.settle()
    cal = calibration(w)
    assert cal["phase"] == "Invalid"
    assert cal["request"].startswith("sha256:")
    assert len(cal["message"]) < 400  # the value is cut in the message too
    w.advance(60)
    w.settle()
    assert w.events().count("CalibrationInvalid") == 1


TWO_NODES: dict[str, Any] = {
    "engine": {
        "image": "vllm/vllm-openai:v0.22.0",
        "tensorParallelSize": 8,
        "extraArgs": ["--pipeline-parallel-size", "2"],
    },
    "resources": {"gpus": 8, "nodes": 2},
}


def group_world() -> World:
    """A serving multi-node revision (one LeaderWorkerSet), its gate given SLO limits."""
    multi = Settings(bench_image="op:1", job_start_seconds=120, multi_node=True)
    w = serving_world(spec(**TWO_NODES), multi)
    w.set_spec(spec(gate=SLO, **TWO_NODES))
    w.settle()
    assert w.status["phase"] == "Serving"
    return w


def test_on_a_multi_node_revision_the_twin_is_a_whole_group_and_its_job_runs() -> None:
    w = group_world()
    stable = w.serving()
    w.annotate(KEY, "1")
    w.step()
    (twin,) = [
        o
        for (k, _), o in w.objects.items()
        if k == "LeaderWorkerSet"
        and o["metadata"]["labels"][labels.COMPONENT_LABEL] == labels.COMPONENT_TWIN
    ]
    assert twin["spec"]["leaderWorkerTemplate"]["size"] == 2  # a whole group
    w.ready_all()
    w.settle()
    (job,) = calibration_jobs(w)
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--baseline-url" in args
    assert calibration(w)["phase"] == "Running"
    assert calibration(w)["revision"] == stable


def test_a_twin_group_that_finds_no_room_abandons_it_saying_twin_unavailable() -> None:
    w = group_world()
    stable = w.serving()
    w.annotate(KEY, "1")
    w.settle()
    assert w.twins() == [stable]
    assert calibration_jobs(w) == []
    w.advance(4000)  # past gate.baseline.twinWaitSeconds: the twin group was never scheduled
    w.settle()
    cal = calibration(w)
    assert cal["phase"] == "Abandoned"
    assert "TwinUnavailable" in cal["message"]
    assert "a whole group of 2 pods" in cal["message"]
    assert "was not scheduled" in cal["message"]
    assert "TwinUnavailable" in w.events()
    assert w.twins() == []  # the twin group went
    assert calibration_jobs(w) == []
    assert w.serving() == stable
    assert w.status["phase"] == "Serving"
