"""Lines `kubectl describe vllmd` prints whole (issue 42): no line over 200 characters.

describe puts 24-27 characters before a status message, 6 before a reason and about 52
before an Event's message. So a rejection's status message, the GatePassed condition and
a history line are cut to fit (the deciding figure first), a verdict's and a canary's
Event too, and Ready says in words why it is False while the stable revision serves
(kstatus and Argo CD read Ready and Stalled). The full text stays in ``lastGate``, the
verdict annotation and the report.
"""

from __future__ import annotations

from rollout_world import World, spec
from test_canary_signals import _failed
from test_rollout_canary import Pods, at_canary, until_step_started
from test_status_shape import _rejected

from vllm_operator.api.text import EVENT_CHARS, LINE_CHARS, clip
from vllm_operator.rollout.actions import JobRef
from vllm_operator.rollout.status import READY_WHILE_REJECTED, REASON_CHARS, merge_patch


def _events(w: World, reason: str) -> list[str]:
    return [e.message for p in w.plans for e in p.events if e.reason == reason]


def test_clip_cuts_at_a_word_and_says_so() -> None:
    assert clip("short", 10) == "short"
    cut = clip("the deciding figure first, then the rest of a long reason", 30)
    assert len(cut) <= 30
    assert cut == "the deciding figure first..."
    assert clip("x" * 50, 10) == "xxxxxxx..."


def test_a_rejection_reads_in_lines_describe_prints_whole() -> None:
    w, stable, cand = _rejected()
    w.step()
    gate = w.status["lastGate"]
    assert len(gate["headline"]) > LINE_CHARS - 60  # long enough to need the cut below
    message = w.status["message"]
    assert len(message) <= LINE_CHARS, message
    figure = gate["reasons"][0].split(":")[0]
    assert message.startswith(f"revision {cand} rejected (Failed: {figure}: "), message
    assert message.endswith(f"); revision {stable} serves"), message
    assert w.condition("Stalled")["message"] == message
    assert len(w.condition("GatePassed")["message"]) <= LINE_CHARS
    # Ready is False while users are served: the message says why, in the words GitOps
    # tools use, instead of repeating the rejection.
    ready = w.condition("Ready")
    assert (ready["status"], ready["reason"]) == ("False", "CandidateRejected")
    assert ready["message"] == READY_WHILE_REJECTED
    assert len(READY_WHILE_REJECTED) <= LINE_CHARS
    assert "kstatus Failed, Argo CD Degraded" in READY_WHILE_REJECTED
    assert all(len(h["verdict"]) <= REASON_CHARS for h in w.status["history"])
    (event,) = _events(w, "GateFailed")
    assert len(event) <= EVENT_CHARS, event
    assert event.startswith(f"revision {cand}: {figure}: "), event


def test_a_failed_canary_reads_in_lines_describe_prints_whole() -> None:
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    assert isinstance(pods, Pods)
    pods.serve(candidate, 30, error_share=1.0)
    pods.serve(stable, 30)
    w.advance(30)
    w.step()
    reason = _failed(w)
    assert len(reason) > EVENT_CHARS  # the deciding reason, whole in lastGate
    assert "early stop at 99.9% confidence" in reason
    (event,) = _events(w, "CanaryFailed")
    assert len(event) <= EVENT_CHARS, event
    assert event.startswith(f"revision {candidate}: canary step 1/2"), event
    assert all(len(r) <= REASON_CHARS for r in w.status["lastGate"]["reasons"][1:])
    assert len(w.status["message"]) <= LINE_CHARS, w.status["message"]
    assert all(len(h["verdict"]) <= REASON_CHARS for h in w.status["history"])


def test_reconciling_and_stalled_are_absent_while_false() -> None:
    """kstatus reads an absent Reconciling or Stalled as False: each is written only while
    True (12 describe lines fewer when serving), and one that turns False disappears from
    the stored status (the list is replaced whole by the status patch)."""
    w = World(spec())
    w.step()
    working = {c["type"]: c["status"] for c in w.status["conditions"]}
    assert working["Reconciling"] == "True", working
    assert "Stalled" not in working, working
    before = dict(w.status)
    w.pass_first_gate()
    w.settle()
    assert w.status["phase"] == "Serving", w.status["message"]
    types = [c["type"] for c in w.status["conditions"]]
    assert types == ["Ready", "GatePassed"], types
    assert w.condition("Ready")["status"] == "True"
    patch = merge_patch(before, w.status)
    assert patch is not None
    written = [c["type"] for c in patch["conditions"]]
    assert written == ["Ready", "GatePassed"], written
    assert merge_patch(before, before) is None


def test_benchmark_progress_events_are_on_the_job() -> None:
    """Where a running benchmark is goes on its Job (``kubectl describe job``), not on the
    VLLMDeployment, whose Events stay those a person acts on; the gate's start names the Job."""
    w = World(spec())
    w.step()
    w.ready_all()
    started = w.step()
    job = w.job()["metadata"]
    (begun,) = [e for e in started.events if e.reason == "BenchmarkStarted"]
    assert begun.job is None
    assert f"Job {job['name']}" in begun.message
    w.progress[job["name"]] = {"event": "settle", "level": 4}
    p = w.step()
    (progress,) = [e for e in p.events if e.reason == "BenchmarkProgress"]
    assert progress.job == JobRef(job["name"], job["uid"])
    involved = progress.job.involved("ml")
    assert involved["kind"] == "Job"
    assert involved["apiVersion"] == "batch/v1"
    assert involved["metadata"] == {"name": job["name"], "namespace": "ml", "uid": job["uid"]}
