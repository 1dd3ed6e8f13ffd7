"""The rollout planner, pass after pass, against an in-memory cluster."""

from __future__ import annotations

import json

import pytest
from rollout_world import World, spec, summary

from vllm_operator.api.status import figures_digest
from vllm_operator.render import labels
from vllm_operator.rollout import Settings

V16_EAGER = spec(image="vllm/vllm-openai:v0.16.0", mode="eager")
V17_EAGER = spec(image="vllm/vllm-openai:v0.17.0", mode="eager")
V17_FAST = spec(image="vllm/vllm-openai:v0.17.0", mode="throughput")


def deployed(spec_doc: dict[str, object] = V16_EAGER) -> World:
    """A world where ``spec_doc`` passed its gate and serves."""
    w = World(spec_doc)
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary(median_ms=4600, tokens=200))
    w.step()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"
    return w


def test_first_revision_is_gated_before_the_serving_service_exists() -> None:
    w = World(V17_FAST)
    p = w.step()
    rev = w.revisions()[0]
    assert p.kinds() == ["create Service qwen--candidate", f"create Deployment qwen--{rev}"]
    assert w.serving() is None
    assert w.status["phase"] == "Progressing"
    assert w.condition("Reconciling")["status"] == "True"
    assert w.deployment(rev)["spec"]["replicas"] == 1  # candidate replicas, not 2
    owner = w.deployment(rev)["metadata"]["ownerReferences"][0]
    assert owner["uid"] == "uid-1"
    assert owner["controller"] is True
    w.ready_all()
    p = w.step()
    assert p.kinds() == [f"create Job qwen--gate-{rev}-1"]
    assert w.status["phase"] == "Benchmarking"
    w.finish_job(summary())
    p = w.step()
    assert w.status["lastGate"]["outcome"] == "Passed"
    assert f"delete Job qwen--gate-{rev}-1" in p.kinds()
    assert w.deployment(rev)["spec"]["replicas"] == 2
    assert w.serving() is None  # not Ready at 2 yet
    w.ready(rev, 1)
    w.step()
    assert w.serving() is None
    w.ready(rev, 2)
    w.settle()
    assert w.serving() == rev
    assert w.selector_changes == [(rev, 2)]
    assert w.status["phase"] == "Serving"
    assert w.condition("Ready")["status"] == "True"
    assert w.condition("GatePassed")["status"] == "True"
    assert w.status["stable"]["revision"] == rev
    # The stored baseline lives on the stable's Deployment; status keeps only its digest.
    assert "benchmark" not in w.status["stable"]
    stored = w.deployment(rev)["metadata"]["annotations"][labels.FIGURES_ANNOTATION]
    assert w.status["stable"]["figuresDigest"] == figures_digest(stored)
    assert json.loads(stored)["model"] == "Qwen/Qwen3-8B"
    assert "CandidateCreated" in w.events()
    assert "Promoted" in w.events()


def test_first_revision_failing_quality_fails_and_nothing_serves() -> None:
    w = World(
        spec(gate={"thresholds": {"quality": {"minPassed": 12}}}),
    )
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary(passed=6), exit_code=1)
    w.settle()
    assert w.status["phase"] == "Failed"
    assert w.status["lastGate"]["outcome"] == "Failed"
    assert w.condition("Stalled")["status"] == "True"
    assert w.condition("GatePassed")["status"] == "False"
    assert w.revisions() == []
    assert w.kinds("Job") == []
    assert w.serving() is None
    # A rejected revision is not tried again by later passes.
    w.advance(3600)
    assert w.settle().actions == ()


def test_upgrade_story_reject_on_regression_then_promote() -> None:
    w = deployed(V16_EAGER)
    stable = w.serving()
    assert stable is not None
    thresholds = {
        "gate": {"thresholds": {"maxRegressionPercent": 10}, "baseline": {"mode": "stored"}}
    }
    w.set_spec({**V17_EAGER, **thresholds})
    w.step()
    eager17 = next(r for r in w.revisions() if r != stable)
    w.ready_all()
    w.step()
    job = w.job()
    assert "--baseline-json" in job["spec"]["template"]["spec"]["containers"][0]["args"]
    w.finish_job(summary(median_ms=5600, tokens=160), exit_code=1)
    w.settle()
    assert w.status["phase"] == "Degraded"
    assert w.status["lastGate"]["outcome"] == "Failed"
    assert w.status["lastGate"]["baselineRevision"] == stable
    assert w.revisions() == [stable]
    assert w.serving() == stable
    assert w.deployment(stable)["spec"]["replicas"] == 2  # untouched
    w.set_spec({**V17_FAST, **thresholds})
    w.step()
    fast = next(r for r in w.revisions() if r != stable)
    assert fast != eager17
    w.ready_all()
    w.step()
    w.finish_job(summary(median_ms=886, tokens=900))
    w.step()
    w.ready_all()
    w.settle()
    assert w.serving() == fast
    assert w.revisions() == [fast]  # old stable retired after the switch
    assert [r for r, _ in w.selector_changes] == [stable, fast]
    assert all(ready >= 2 for _, ready in w.selector_changes)
    assert [h["outcome"] for h in w.status["history"]] == ["Passed", "Failed", "Passed"]
    assert "RevisionRetired" in w.events()


def test_stuck_candidate_is_rejected_with_the_pod_cause() -> None:
    w = deployed()
    stable = w.serving()
    w.set_spec({**V17_FAST, "rollout": {"progressDeadlineSeconds": 600}})
    p = w.step()
    assert p.requeue_after == 600
    cand = next(r for r in w.revisions() if r != stable)
    w.add_pod(
        "qwen-x-1",
        {"vllm-operator.dev/revision": cand, "app.kubernetes.io/component": "server"},
        {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "message": "0/3 nodes: Insufficient nvidia.com/gpu",
                }
            ],
        },
    )
    w.advance(599)
    assert w.step().actions == ()
    assert "Insufficient nvidia.com/gpu" in w.status["message"]
    w.advance(2)
    w.settle()
    assert w.status["phase"] == "Degraded"
    assert w.status["lastGate"]["decidedBy"] == "deadline"
    assert any("Insufficient nvidia.com/gpu" in r for r in w.status["lastGate"]["reasons"])
    assert w.revisions() == [stable]
    assert w.serving() == stable
    assert "CandidateStuck" in w.events()


def test_crash_loop_cause_carries_the_last_message() -> None:
    w = World(spec(rollout={"progressDeadlineSeconds": 60}))
    w.step()
    rev = w.revisions()[0]
    w.add_pod(
        "p",
        {"vllm-operator.dev/revision": rev},
        {
            "containerStatuses": [
                {
                    "name": "vllm",
                    "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {
                        "terminated": {"exitCode": 1, "message": "CUBLAS_STATUS_INVALID_VALUE"}
                    },
                }
            ]
        },
    )
    w.advance(61)
    w.settle()
    assert w.status["phase"] == "Failed"
    reasons = " ".join(w.status["lastGate"]["reasons"])
    assert "crash loop (4 restarts, exit code 1)" in reasons
    assert "CUBLAS_STATUS_INVALID_VALUE" in reasons


@pytest.mark.parametrize("reason", ["ImagePullBackOff", "InvalidImageName"])
def test_job_that_never_starts_is_an_error_not_a_pass(reason: str) -> None:
    w = deployed()
    stable = w.serving()
    w.set_spec(V17_FAST)
    w.start_benchmark()
    job = w.job()
    w.add_pod(
        "bench-pod",
        dict(job["spec"]["template"]["metadata"]["labels"]),
        {
            "containerStatuses": [
                {
                    "name": "bench",
                    "state": {"waiting": {"reason": reason, "message": "pull access denied"}},
                }
            ]
        },
        owner_uid=job["metadata"]["uid"],
    )
    if reason == "ImagePullBackOff":
        w.step()
        assert w.status["phase"] == "Benchmarking"  # may still resolve
        w.advance(121)
    w.settle()
    assert w.status["lastGate"]["outcome"] == "Error"
    assert "never started" in w.status["lastGate"]["reasons"][0]
    assert w.status["phase"] == "Degraded"
    assert w.serving() == stable
    assert w.kinds("Job") == []
    assert w.revisions() == [stable]


def test_job_failed_without_summary_is_an_error() -> None:
    w = World(V17_FAST)
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(None, exit_code=3, failed_reason="DeadlineExceeded")
    w.settle()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Error"
    assert any("DeadlineExceeded" in r for r in gate["reasons"])
    assert any("exited with code 3" in r for r in gate["reasons"])


def test_summary_is_read_from_the_log_when_the_message_is_empty() -> None:
    w = World(V17_FAST)
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary(), in_log=True)
    w.step()
    assert w.status["lastGate"]["outcome"] == "Passed"


def test_spec_change_mid_benchmark_abandons_the_candidate_and_its_job() -> None:
    w = deployed()
    stable = w.serving()
    w.set_spec(V17_EAGER)
    w.start_benchmark()
    old_job = w.job()["metadata"]["name"]
    w.set_spec(V17_FAST)
    p = w.step()
    new = [r for r in w.revisions() if r != stable]
    assert len(new) == 1
    assert new[0] not in old_job
    assert f"delete Job {old_job}" in p.kinds()
    assert "CandidateAbandoned" in w.events()
    assert w.serving() == stable


def test_forced_promotion_of_a_rejected_revision() -> None:
    w = deployed()
    w.set_spec(
        spec(image="vllm/vllm-openai:v0.17.0", gate={"thresholds": {"quality": {"minPassed": 13}}})
    )
    w.start_benchmark()
    w.finish_job(summary(passed=12), exit_code=1)
    w.settle()
    rejected = w.status["lastGate"]["revision"]
    assert w.status["phase"] == "Degraded"
    w.annotate(labels.PROMOTE_ANNOTATION, rejected)
    w.step()
    assert w.status["lastGate"]["decidedBy"] == "person"
    assert "ForcedPromotion" in w.events()
    w.ready_all()
    w.settle()
    w.ready_all()
    w.settle()
    assert w.serving() == rejected
    assert w.status["phase"] == "Serving"
    assert w.condition("GatePassed")["reason"] == "PromotedByPerson"
    # The annotation stays; it is not carried out twice.
    count = sum(1 for r in w.events() if r == "ForcedPromotion")
    w.settle()
    assert sum(1 for r in w.events() if r == "ForcedPromotion") == count == 1


def test_abort_removes_the_candidate_once_and_rerun_gate_tries_again() -> None:
    w = deployed()
    stable = w.serving()
    w.set_spec({**V17_FAST, "gate": {"baseline": {"mode": "stored"}}})
    w.step()
    cand = next(r for r in w.revisions() if r != stable)
    w.annotate(labels.ABORT_ANNOTATION, cand)
    w.advance(1)
    w.settle()
    assert w.status["phase"] == "Degraded"
    assert w.status["lastGate"]["decidedBy"] == "person"
    assert w.revisions() == [stable]
    w.advance(1)
    w.annotate(labels.RERUN_ANNOTATION, "try-2")
    p = w.step()
    assert "GateRerun" in [e.reason for e in p.events]
    assert w.revisions() == sorted([stable, cand])
    w.ready_all()
    w.step()
    assert w.job()["metadata"]["name"] == f"qwen--gate-{cand}-2"
    w.finish_job(summary(median_ms=900, tokens=900))
    w.step()
    w.ready_all()
    w.settle()
    assert w.serving() == cand
    # The abort annotation, still present, did not fire again after the re-run.
    assert sum(1 for r in w.events() if r == "Aborted") == 1


def test_request_for_another_revision_is_ignored_with_an_event() -> None:
    w = deployed()
    w.annotate(labels.PROMOTE_ANNOTATION, "0123456789")
    p = w.step()
    assert [e.reason for e in p.events] == ["RequestIgnored"]
    assert p.annotations  # consumed
    assert w.step().events == ()


def test_invalid_spec_keeps_the_stable_revision_serving() -> None:
    w = deployed()
    stable = w.serving()
    bad = spec(image="vllm/vllm-openai:v0.17.0", engine={"tensorParallelSize": 2})
    w.set_spec(bad)
    p = w.step()
    assert p.actions == ()
    assert w.status["phase"] == "Degraded"
    stalled = w.condition("Stalled")
    assert stalled["status"] == "True"
    assert stalled["reason"] == "InvalidSpec"
    assert "spec.engine.tensorParallelSize" in stalled["message"]
    assert [e.reason for e in p.events] == ["InvalidSpec"]
    assert w.step().events == ()  # once per generation
    assert w.serving() == stable


def test_invalid_first_spec_fails() -> None:
    w = World(spec(engine={"performanceMode": "warp-speed"}))
    p = w.step()
    assert p.actions == ()
    assert w.status["phase"] == "Failed"
    assert "spec.engine.performanceMode" in w.status["message"]


def test_engine_warning_becomes_status_and_one_event_per_generation() -> None:
    w = World(spec(image="vllm/vllm-openai:v0.16.0", mode="throughput"))
    p = w.step()
    warned = [e for e in p.events if e.reason == "EngineWarning"]
    assert len(warned) == 1
    assert warned[0].type == "Warning"
    assert "no effect before vLLM 0.17.0" in warned[0].message
    assert w.status["warnings"] == [warned[0].message]
    assert not any(e.reason == "EngineWarning" for e in w.step().events)
    w.set_spec({**spec(image="vllm/vllm-openai:v0.16.0", mode="throughput"), "replicas": 3})
    assert [e.reason for e in w.step().events].count("EngineWarning") == 1  # new generation


def test_scaling_the_stable_revision_rolls_nothing() -> None:
    w = deployed()
    stable = w.serving()
    w.set_spec({**V16_EAGER, "replicas": 4})
    p = w.step()
    assert p.kinds() == [f"patch Deployment qwen--{stable}"]
    assert w.status["phase"] == "Progressing"
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"
    assert w.revisions() == [stable]


def test_gate_disabled_promotes_on_ready() -> None:
    w = World(spec(gate={"enabled": False}))
    w.step()
    w.ready_all()
    w.step()
    assert w.kinds("Job") == []
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"
    assert w.condition("GatePassed")["reason"] == "GateDisabled"


def test_inconclusive_holds_for_a_person() -> None:
    w = World(
        spec(
            rollout={"onInconclusive": "hold"},
            gate={"thresholds": {"latencyMs": {"medium": 2000}}},
        )
    )
    w.step()
    w.ready_all()
    w.step()
    thin = summary()
    thin = thin.model_copy(
        update={"latency": [x.model_copy(update={"requests": 1}) for x in thin.latency]}
    )
    w.finish_job(thin)
    w.settle()
    assert w.status["lastGate"]["outcome"] == "Inconclusive"
    assert w.status["phase"] == "Holding"
    assert w.condition("Stalled")["status"] == "True"
    assert len(w.revisions()) == 1  # the candidate waits
    rev = w.revisions()[0]
    w.annotate(labels.PROMOTE_ANNOTATION, rev)
    w.settle()
    w.ready_all()
    w.settle()
    assert w.serving() == rev
    assert w.status["phase"] == "Serving"


def test_restart_at_every_step_plans_the_same_and_creates_nothing_twice() -> None:
    """Planning twice on the same cluster gives the same plan; re-applying it is a no-op."""
    w = World(V17_FAST)
    script = [
        lambda: None,
        w.ready_all,
        lambda: w.finish_job(summary()),
        w.ready_all,
        lambda: None,
    ]
    for change in script:
        change()
        first = w.plan()
        again = w.plan()
        assert first == again
        w.apply(first)
        replay = w.plan()  # an operator restarted right after applying
        creates = [k for k in replay.kinds() if k.startswith("create")]
        assert not any(name.split()[-1] in w.kinds(name.split()[1]) for name in creates)
    w.settle()
    assert w.status["phase"] == "Serving"


def test_settings_scale_deadlines() -> None:
    w = World(spec(rollout={"progressDeadlineSeconds": 600}), Settings(deadline_scale=0.01))
    p = w.step()
    assert p.requeue_after == pytest.approx(6.0)
