"""gate.baseline.mode auto, and what the gate record says about fresh and settled servers.

Auto (the default) measures a twin of the stable revision when one can run: started once the
candidate's pods are scheduled, used when it is scheduled within ``twinWaitSeconds`` and
Ready within the progress deadline; otherwise the twin goes and the gate judges against the
stored figures, and the condition, an Event and the record say so. Never an Error because a
twin found no GPU. Every comparison of a fresh server with one measured earlier or longer is
named in the record's reasons.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from rollout_world import World, spec, summary

from vllm_operator.render import labels

V16 = spec(image="vllm/vllm-openai:v0.16.0", mode="eager")
LIMIT = {"thresholds": {"maxRegressionPercent": 10}}
V17 = spec(image="vllm/vllm-openai:v0.17.0", mode="throughput", gate=LIMIT)
NO_GPU = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


def _at(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_status(started: datetime | None, *, ready: bool = True) -> dict[str, Any]:
    if started is None:
        return {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": NO_GPU,
                }
            ],
        }
    return {
        "phase": "Running",
        "containerStatuses": [
            {"name": "vllm", "ready": ready, "state": {"running": {"startedAt": _at(started)}}}
        ],
    }


def _pod(
    w: World, template_of: dict[str, Any], name: str, node: str | None, started: datetime | None
) -> None:
    w.add_pod(name, dict(template_of["spec"]["template"]["metadata"]["labels"]), {})
    w.objects[("Pod", name)]["status"] = _pod_status(started)
    if node is not None:
        w.objects[("Pod", name)]["spec"] = {"nodeName": node}


def candidate_pod(w: World, cand: str, name: str = "cand-1", *, scheduled: bool = True) -> None:
    """A pod of the candidate, bound to a node (its server started now) or Unschedulable."""
    dep = w.deployment(cand)
    assert dep is not None
    _pod(w, dep, name, "gpu-a" if scheduled else None, w.now if scheduled else None)


def twin_pod(w: World, stable: str, name: str = "twin-1", *, scheduled: bool = False) -> None:
    """A pod of the twin: Unschedulable (no GPU left), or bound with its server started now."""
    dep = w.objects[("Deployment", f"qwen--twin-{stable}")]
    _pod(w, dep, name, "gpu-b" if scheduled else None, w.now if scheduled else None)


def twin_ready(w: World, stable: str) -> None:
    w.objects[("Deployment", f"qwen--twin-{stable}")]["status"] = {"readyReplicas": 1}


def deployed(first: dict[str, Any] = V16) -> World:
    """``first`` passed its gate (no stable yet: no twin) and serves."""
    w = World(first)
    w.pass_first_gate()
    w.settle()
    assert w.status["phase"] == "Serving"
    return w


def candidate_ready(w: World, spec_doc: dict[str, Any] = V17) -> tuple[str, str]:
    """The new spec's candidate is scheduled and Ready; in mode auto its twin was created
    only once the candidate's pod was bound to a node."""
    stable = w.serving()
    assert stable is not None
    w.set_spec(spec_doc)
    p = w.step()
    cand = next(r for r in w.revisions() if r != stable)
    assert p.kinds() == ["patch Service qwen--candidate", f"create Deployment qwen--{cand}"]
    candidate_pod(w, cand, scheduled=False)
    w.step()
    assert w.twins() == []  # the twin never takes the GPUs the candidate waits for
    candidate_pod(w, cand)  # bound to a node: it holds its GPUs
    p = w.step()
    assert p.kinds() == ["create Service qwen--twin", f"create Deployment qwen--twin-{stable}"]
    assert "TwinCreated" in w.events()
    w.ready(cand, 1)
    return stable, cand


def _events(w: World, reason: str) -> list[tuple[str, str]]:
    return [(e.type, e.message) for p in w.plans for e in p.events if e.reason == reason]


def test_auto_measures_the_twin_when_it_is_ready_within_the_bound() -> None:
    w = deployed()
    stable, cand = candidate_ready(w)
    twin_pod(w, stable, scheduled=True)
    w.step()
    assert w.kinds("Job") == []  # waits for the twin, which is scheduled
    assert w.condition("Ready")["reason"] == "TwinStarting"
    w.advance(250)
    twin_ready(w, stable)
    w.step()
    assert w.arg("--baseline-url") == "http://qwen--twin.ml.svc:8000"
    assert "--baseline-json" not in w.job_args()
    annotations = w.job()["metadata"]["annotations"]
    assert annotations[labels.BASELINE_MODE_ANNOTATION] == "twin"
    w.finish_job(summary(median_ms=886, tokens=900), baseline=summary(median_ms=900, tokens=880))
    p = w.step()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Passed", gate["reasons"]
    assert gate["baselineMode"] == "twin"
    assert gate["baselineReason"] == (
        f"gate.baseline.mode auto: the twin of stable revision {stable}, scheduled and Ready, "
        "measured in the same Job"
    )
    # Both servers started for this gate: nothing to say about their age.
    assert not any("measured earlier" in r or "different age" in r for r in gate["reasons"])
    assert "TwinUnavailable" not in w.events()
    assert f"delete Deployment qwen--twin-{stable}" in p.kinds()
    w.ready_all()
    w.settle()
    assert w.serving() == cand
    assert w.twins() == []


@pytest.mark.parametrize("late", [301, 4000])
def test_auto_falls_back_to_the_stored_figures_when_the_twin_is_not_scheduled(late: int) -> None:
    w = deployed()
    stable, cand = candidate_ready(w)
    twin_pod(w, stable)  # no GPU left for it
    w.advance(299)
    p = w.step()
    assert w.kinds("Job") == []
    ready = w.condition("Ready")
    assert ready["reason"] == "TwinStarting"
    assert "uses the stored baseline if it is not scheduled within 300 s" in ready["message"]
    assert NO_GPU in ready["message"]
    assert p.requeue_after == pytest.approx(1.0)
    w.advance(late - 299)
    p = w.step()
    # The twin goes; the stable revision's serving Deployment is not touched.
    assert sorted(p.kinds()) == sorted(
        [
            f"create Job qwen--gate-{cand}-1",
            f"delete Deployment qwen--twin-{stable}",
            "delete Service qwen--twin",
        ]
    )
    assert w.serving() == stable
    stable_dep = w.deployment(stable)
    assert stable_dep is not None
    assert stable_dep["spec"]["replicas"] == 2
    assert "--baseline-url" not in w.job_args()
    assert w.arg("--baseline-json") is not None
    annotations = w.job()["metadata"]["annotations"]
    assert annotations[labels.BASELINE_MODE_ANNOTATION] == "stored"
    why = annotations[labels.BASELINE_REASON_ANNOTATION]
    assert why.startswith(
        f"gate.baseline.mode auto: the twin of stable revision {stable} was not scheduled "
        "within 300 s (0/1 pods scheduled; pod twin-1: unschedulable: " + NO_GPU
    )
    assert why.endswith(f": revision {stable}'s stored figures from its own gate")
    ((kind, message),) = _events(w, "TwinUnavailable")
    assert kind == "Warning"
    assert why in message
    assert why in w.condition("Ready")["message"]
    assert w.status["phase"] == "Benchmarking"
    w.step()
    assert w.twins() == []  # the Job measures the stored figures: no twin again
    assert why in w.condition("Ready")["message"]  # while it runs, too
    w.finish_job(summary(median_ms=886))  # a stored-mode Job has no pair
    w.step()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Passed", gate["reasons"]
    assert gate["baselineMode"] == "stored"
    assert gate["baselineRevision"] == stable
    assert gate["baselineReason"] == why
    note = next(r for r in gate["reasons"] if r.startswith("baseline measured earlier"))
    assert "not scheduled within 300 s" in note
    assert "~10% slower" in note
    assert not any(e[0] == "GateError" for e in w.events())
    w.ready_all()
    w.settle()
    assert w.serving() == cand
    assert w.twins() == []


def test_auto_waits_the_progress_deadline_for_a_scheduled_twin_then_falls_back() -> None:
    w = deployed()
    stable, _cand = candidate_ready(w)
    twin_pod(w, stable, scheduled=True)  # bound, loading its model
    w.advance(301)
    w.step()
    assert w.kinds("Job") == []  # scheduled in time: model loading is not a capacity question
    assert "Ready within 3600 s" in w.condition("Ready")["message"]
    w.advance(3300)
    w.step()
    w.finish_job(summary())
    w.step()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Passed", gate
    assert gate["baselineMode"] == "stored"
    assert f"twin of stable revision {stable} was not Ready within 3600 s" in gate["baselineReason"]


def test_auto_without_stored_figures_judges_absolute_limits_and_says_so() -> None:
    w = World(spec(image="vllm/vllm-openai:v0.16.0", gate={"enabled": False}))
    w.step()
    w.ready_all()
    w.settle()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"  # promoted with no benchmark: nothing stored
    stable, _cand = candidate_ready(w)
    twin_pod(w, stable)
    w.advance(301)
    w.step()
    assert "--baseline-url" not in w.job_args()
    assert "--baseline-json" not in w.job_args()
    w.finish_job(summary())
    w.step()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Passed", gate
    assert "baselineMode" not in gate
    assert "baselineRevision" not in gate
    assert gate["baselineReason"].endswith(
        f"revision {stable} has no stored figures (promoted by a person or with the gate "
        "disabled): absolute limits only"
    )
    assert any(r.startswith("no baseline (gate.baseline.mode auto") for r in gate["reasons"])


def test_auto_never_starts_a_twin_while_the_candidate_cannot_be_scheduled() -> None:
    w = deployed()
    stable = w.serving()
    w.set_spec(V17)
    w.step()
    cand = next(r for r in w.revisions() if r != stable)
    candidate_pod(w, cand, scheduled=False)
    for _ in range(3):
        w.advance(600)
        w.step()
        assert w.twins() == []
    w.advance(2000)
    w.settle()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Error"
    assert gate["decidedBy"] == "deadline"
    assert "CandidateStuck" in w.events()
    assert "TwinCreated" not in w.events()


def test_twin_mode_still_makes_an_unschedulable_twin_an_error() -> None:
    w = deployed()
    stable = w.serving()
    w.set_spec(spec(image="vllm/vllm-openai:v0.17.0", gate={**LIMIT, "baseline": {"mode": "twin"}}))
    p = w.step()
    assert f"create Deployment qwen--twin-{stable}" in p.kinds()  # with the candidate
    cand = next(r for r in w.revisions() if r != stable)
    w.ready(cand, 1)
    twin_pod(w, stable)
    w.advance(301)
    w.step()
    assert w.kinds("Job") == []  # mode twin waits the progress deadline, not twinWaitSeconds
    w.advance(3300)
    w.settle()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Error"
    assert gate["baselineMode"] == "twin"
    assert any("gate.baseline.mode: auto uses the stored baseline" in r for r in gate["reasons"])
    assert "TwinStuck" in w.events()
    assert "TwinUnavailable" not in w.events()
    assert w.serving() == stable


def test_stored_mode_says_its_baseline_was_measured_earlier_on_another_server() -> None:
    w = deployed()
    stable = w.serving()
    stored = {**LIMIT, "baseline": {"mode": "stored"}}
    w.set_spec(spec(image="vllm/vllm-openai:v0.17.0", gate=stored))
    w.start_benchmark()
    assert w.twins() == []
    assert w.job()["metadata"]["annotations"][labels.BASELINE_REASON_ANNOTATION] == (
        f"gate.baseline.mode stored: revision {stable}'s stored figures from its own gate"
    )
    w.finish_job(summary(median_ms=886))
    w.step()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Passed", gate["reasons"]
    assert gate["baselineMode"] == "stored"
    assert any(
        r.startswith("baseline measured earlier: gate.baseline.mode stored: revision")
        and "which started for this gate" in r
        for r in gate["reasons"]
    ), gate["reasons"]
    # The note reaches the GatePassed condition and the verdict's Event.
    assert "baseline measured earlier" in w.condition("GatePassed")["message"]
    assert any("baseline measured earlier" in m for _, m in _events(w, "GatePassed"))


def _inconclusive() -> Any:
    thin = summary()
    return thin.model_copy(
        update={"latency": [x.model_copy(update={"requests": 1}) for x in thin.latency]}
    )


def _age_notes(w: World) -> list[str]:
    return [r for r in w.status["lastGate"]["reasons"] if r.startswith("servers of different")]


def test_a_twin_kept_across_automatic_reruns_is_as_settled_as_the_candidate() -> None:
    w = deployed()
    rerun = {"onInconclusive": "rerun", "maxReruns": 1}
    stable, _cand = candidate_ready(w, {**V17, "rollout": rerun})
    twin_pod(w, stable, scheduled=True)
    twin_ready(w, stable)
    w.step()
    w.advance(60)
    w.finish_job(_inconclusive())
    w.step()
    assert w.twins() == [stable]  # kept, with the candidate, for attempt 2
    w.step()
    w.advance(60)
    w.finish_job(summary())
    w.step()
    assert w.status["lastGate"]["attempt"] == 2
    assert w.status["lastGate"]["outcome"] == "Passed"
    assert _age_notes(w) == []  # both servers served attempt 1


def test_a_fresh_twin_beside_a_measured_candidate_is_named_in_the_reasons() -> None:
    w = deployed()
    stable, cand = candidate_ready(w)
    twin_pod(w, stable, scheduled=True)
    twin_ready(w, stable)
    w.step()
    w.advance(60)
    w.finish_job(_inconclusive())
    w.settle()
    assert w.status["phase"] == "Holding"
    assert w.twins() == []  # holding for a person costs no twin GPUs
    # A person's rerun starts a new twin beside the candidate that served attempt 1.
    w.advance(600)
    w.annotate(labels.RERUN_ANNOTATION, "again")
    w.step()
    assert w.twins() == [stable]
    del w.objects[("Pod", "twin-1")]
    twin_pod(w, stable, "twin-2", scheduled=True)
    twin_ready(w, stable)
    w.step()
    w.advance(60)
    w.finish_job(summary())
    w.step()
    gate = w.status["lastGate"]
    assert gate["attempt"] == 2
    assert _age_notes(w) == [
        "servers of different age: the candidate's server had served 1 and the twin's 0 "
        "earlier gate attempt(s) of this revision (a twin started again, or a restarted pod); "
        "a fresh vLLM server ran ~10% slower than a settled one for minutes on H200s, so part "
        "of a difference can be the servers' age"
    ]
    assert w.serving() == stable  # the note does not change the verdict's effect
    w.ready_all()
    w.settle()
    assert w.serving() == cand


def test_a_candidate_restarted_between_attempts_is_named_too() -> None:
    w = deployed()
    rerun = {"onInconclusive": "rerun", "maxReruns": 1}
    stable, _cand = candidate_ready(w, {**V17, "rollout": rerun})
    twin_pod(w, stable, scheduled=True)
    twin_ready(w, stable)
    w.step()
    w.advance(60)
    w.finish_job(_inconclusive())
    w.step()
    w.advance(5)
    restarted = w.now + timedelta(seconds=1)
    w.objects[("Pod", "cand-1")]["status"] = _pod_status(restarted)  # crashed and came back
    w.step()
    w.finish_job(summary())
    w.step()
    assert "the candidate's server had served 0 and the twin's 1" in _age_notes(w)[0]


def test_twin_wait_seconds_is_the_bound_and_a_bad_one_is_named() -> None:
    w = deployed()
    stable, _cand = candidate_ready(
        w, {**V17, "gate": {**LIMIT, "baseline": {"twinWaitSeconds": 60}}}
    )
    twin_pod(w, stable)
    w.advance(59)
    w.step()
    assert w.kinds("Job") == []
    assert "not scheduled within 60 s" in w.condition("Ready")["message"]
    w.advance(1)
    w.step()
    assert (
        "not scheduled within 60 s"
        in w.job()["metadata"]["annotations"][labels.BASELINE_REASON_ANNOTATION]
    )
    bad = World({**V17, "gate": {"baseline": {"mode": "auto", "twinWaitSeconds": 5}}})
    p = bad.step()
    assert p.actions == ()
    stalled = bad.condition("Stalled")
    assert stalled["reason"] == "InvalidSpec"
    assert "twinWaitSeconds" in stalled["message"]
