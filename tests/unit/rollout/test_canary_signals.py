"""What fails a canary step besides its figures (issue 39): the candidate's server dying,
a pod NotReady too long, no progress before the deadline, and a clear breach read inside
the step. Each against the in-memory cluster, pass after pass."""

from __future__ import annotations

import pytest
from rollout_world import World
from test_rollout_canary import Pods, at_canary, canary_spec, shared, until_step_started

from vllm_operator.rollout.canary.metrics import ScrapeFailure
from vllm_operator.rollout.views import pod_view


def _failed(w: World) -> str:
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Failed", gate
    return str(gate["reasons"][0])


def test_a_candidate_server_restart_fails_the_step_at_once() -> None:
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    pods.serve(candidate, 50)
    pods.restart(f"qwen--{candidate}-0")
    pods.sync()
    w.advance(1)  # long before the step is due
    p = w.step()
    reason = _failed(w)
    assert reason.startswith(
        "canary step 1/2 (10% asked, 33.3% in effect) failed: candidate pod"
    ), reason
    assert "server container restarted (restarts 0 -> 1" in reason
    assert w.serving() == stable
    assert "CanaryFailed" in [e.reason for e in p.events]


def test_an_oom_kill_is_named() -> None:
    w, pods, _stable, candidate = at_canary()
    until_step_started(w, pods)
    name = f"qwen--{candidate}-0"
    pods.restart(name)
    pods.last_reason[name] = "OOMKilled"
    pods.sync()
    w.step()
    assert "its server container was OOM-killed (restarts 0 -> 1, last exit code 137)" in (
        _failed(w)
    )


def test_a_sidecar_restart_is_not_a_server_restart() -> None:
    """The pod's history before the step stays out of it (the old sum of every container's
    restarts read a sidecar restart as the server's and judged the pod's whole history)."""
    w, pods, stable, candidate = at_canary()
    pods.sync()
    pods.serve(candidate, 300, ttft=0.5)  # the slow gate benchmark, before the step
    until_step_started(w, pods)
    pods.serve(candidate, 150)
    pods.serve(stable, 150)
    pods.sidecar_restarts[f"qwen--{candidate}-0"] = 1
    pods.sync()
    w.advance(600)
    w.step()
    assert "CanaryStepPassed" in w.events()
    figures = w.status["canary"]["candidate"]
    assert (figures["requests"], figures["restartedPods"]) == (150, 0)


def test_init_and_sidecar_restarts_do_not_count_as_the_servers() -> None:
    pod = pod_view(
        {
            "metadata": {"name": "p"},
            "status": {
                "initContainerStatuses": [{"name": "proxy", "restartCount": 4}],
                "containerStatuses": [
                    {"name": "log-shipper", "restartCount": 9},
                    {"name": "vllm", "restartCount": 2},
                ],
            },
        }
    )
    assert pod.restarts == 2
    assert pod.server is not None
    assert pod.server.name == "vllm"


def test_a_candidate_failing_every_request_is_stopped_at_the_first_read() -> None:
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    pods.serve(candidate, 30, error_share=1.0)
    pods.serve(stable, 30)
    w.advance(30)  # one analysis.intervalSeconds, of a 600 s step
    w.step()
    reason = _failed(w)
    assert reason.startswith(
        "canary step 1/2 (10% asked, 33.3% in effect) failed: error share beyond"
    ), reason
    assert "early stop at 99.9% confidence" in reason
    assert w.serving() == stable


def test_a_healthy_candidate_is_read_inside_the_step_and_not_stopped() -> None:
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    for _ in range(19):
        pods.serve(candidate, 8)
        pods.serve(stable, 8)
        w.advance(30)
        w.step()
        assert w.status["phase"] == "Canary"
    pods.serve(candidate, 8)
    pods.serve(stable, 8)
    w.advance(30)
    w.step()
    assert "CanaryStepPassed" in w.events()
    assert w.status["canary"]["candidate"]["requests"] == 160


def _through_step_one(w: World, pods: Pods, candidate: str, stable: str) -> None:
    until_step_started(w, pods)
    pods.serve(candidate, 150)
    pods.serve(stable, 150)
    w.advance(600)
    w.step()
    assert "CanaryStepPassed" in w.events()


def test_pods_that_never_become_ready_fail_at_the_progress_deadline() -> None:
    w, pods, stable, candidate = at_canary()
    _through_step_one(w, pods, candidate, stable)
    w.step()  # step 2 entered: 2 candidate pods asked, 1 Ready
    assert shared(w)
    w.advance(1190)
    w.step()
    assert w.status["phase"] == "Canary"  # inside progressDeadlineSeconds (1200)
    w.advance(20)
    w.step()
    reason = _failed(w)
    assert reason.startswith("canary step 2/2 (50%) failed: no progress for"), reason
    assert "candidate pods Ready" in reason
    assert w.serving() == stable


def test_a_scrape_that_keeps_failing_fails_at_the_deadline() -> None:
    doc = canary_spec(mode="throughput", progressDeadlineSeconds=300)
    w, pods, stable, _candidate = at_canary(doc)
    until_step_started(w, pods)
    w.metrics_pages = lambda: {n: ScrapeFailure("connection refused") for n in pods.pages()}  # type: ignore[misc,dict-item]
    for _ in range(12):
        w.advance(30)
        w.step()
        if w.status.get("lastGate", {}).get("outcome") == "Failed":
            break
    reason = _failed(w)
    assert "no progress for" in reason
    assert "deadline 300 s" in reason
    assert w.serving() == stable


def test_a_missing_route_fails_at_the_deadline() -> None:
    doc = canary_spec(
        mode="throughput",
        traffic={"mode": "gatewayAPI", "httpRoute": {"name": "web"}},
        progressDeadlineSeconds=60,
    )
    w, _pods, _stable, _candidate = at_canary(doc)
    assert "HTTPRoute web not found" in w.status["message"]
    w.advance(61)
    w.step()
    reason = _failed(w)
    assert "no progress for 61 s (deadline 60 s): HTTPRoute web not found" in reason


@pytest.mark.parametrize(("down", "fails"), [(30, False), (90, True)])
def test_a_candidate_pod_not_ready_fails_only_past_its_bound(down: int, fails: bool) -> None:
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    pods.serve(candidate, 150)
    pods.serve(stable, 150)
    name = f"qwen--{candidate}-0"
    pods.unready.add(name)
    pods.sync()
    w.ready(candidate, 0)
    w.advance(down)
    w.step()
    if fails:
        reason = _failed(w)
        assert "deadline 60 s" in reason
        assert "0/1 candidate pods Ready" in reason
        assert w.serving() == stable
        return
    assert w.status["phase"] == "Canary"
    pods.unready.discard(name)
    until_step_started(w, pods)
    w.advance(600)
    w.step()
    assert "CanaryStepPassed" in w.events()
