"""The canary on multi-node revisions, for real: LeaderWorkerSet groups on the embedded
cluster, live users sending requests through the serving Service the whole time.

The serving Service selects one leader per group, so a step's share counts groups; the
operator reads the leaders' /metrics (the workers serve no HTTP). An identical two-node
candidate passes its canary and is promoted, no live request lost to a switch; a candidate
whose group loses a worker mid-step (LeaderWorkerSet recreates the whole group) is rejected
at once and the stable group is untouched.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vllm_operator.render import labels
from vllm_operator.render.names import deployment_name
from vllm_operator_demo.live_users import LiveUsers

from .harness import Rollout
from .test_multinode import LWS_API, LWS_CRD, TIMEOUT, group_pods, kill_pod_processes, two_nodes

# The canary judges the groups' latency against stable's: a test that needs the step to pass
# is in the timing phase, alone (conftest.py). A step fails on a lost group whatever the
# latency (a failed figure decides it), so that test runs in the parallel phase.
TIMING = pytest.mark.timing

MODEL = "qwen3-30b-a3b"
# holdSeconds are scaled by the harness's deadline scale (0.02): 150 s hold in 3 s.
CANARY = {
    "steps": [{"weight": 50, "holdSeconds": 150}],
    "analysis": {"minRequests": 100, "maxErrorPercentPoints": 5, "maxExtensions": 4},
}


@pytest.fixture
def groups(tmp_path: Path) -> Iterator[Rollout]:
    r = Rollout(tmp_path, crds=(LWS_CRD,), multi_node=True)
    r.start_operator()
    yield r
    r.close()


def _spec(edit: str = "") -> dict[str, Any]:
    """A two-node revision with a canary; ``edit`` rolls a new, identical revision (an env
    variable nothing reads)."""
    env = {"VLLMOP_TEST_EDIT": edit} if edit else None
    return two_nodes(sim_env=env, rollout={"canary": CANARY})


def _step_started(r: Rollout) -> dict[str, Any]:
    def started() -> dict[str, Any] | None:
        canary = r.status().get("canary") or {}
        return canary if canary.get("startedAt") else None

    found: dict[str, Any] = r.wait(started, TIMEOUT, "the canary step started")
    return found


def _events(r: Rollout, reason: str) -> list[str]:
    found = r.cluster.list("v1", "events", "default")
    return [e["message"] for e in found if e["reason"] == reason]


@TIMING
def test_an_identical_group_passes_its_canary_and_is_promoted(groups: Rollout) -> None:
    r = groups
    r.apply(_spec())
    stable = r.wait_phase("Serving", gate="Passed", timeout=TIMEOUT)["stable"]["revision"]
    with LiveUsers(r.service_address, model=MODEL, users=4) as live:
        r.apply(_spec("1"))
        step = _step_started(r)
        assert step["sharePercent"] == 50.0  # 1 candidate group beside 1 stable group
        (started,) = r.wait(lambda: _events(r, "CanaryStepStarted"), TIMEOUT, "its Event")
        assert "1 candidate and 1 stable groups behind the Service" in started
        status = r.wait_phase("Serving", timeout=TIMEOUT)
        candidate = status["stable"]["revision"]
        assert candidate != stable
        assert r.serving_revision() == candidate
        r.wait(lambda: _events(r, "CanaryPassed"), TIMEOUT, "CanaryPassed")
        time.sleep(1.0)  # requests in flight across the promotion's switch finish
    failures = live.switch_failures()
    assert failures == [], failures[:5]
    assert len(live.snapshot()) > 100  # the users really sent traffic all along
    only = [deployment_name("qwen", candidate)]
    r.wait(lambda: r.names(LWS_API, "leaderworkersets") == only, TIMEOUT, "the old set retired")


def test_a_group_that_loses_a_worker_mid_step_is_rejected_and_the_stable_untouched(
    groups: Rollout,
) -> None:
    r = groups
    r.apply(_spec())
    stable = r.wait_phase("Serving", gate="Passed", timeout=TIMEOUT)["stable"]["revision"]
    stable_set = deployment_name("qwen", stable)
    before = {n: p["metadata"]["uid"] for n, p in group_pods(r, stable_set).items()}
    with LiveUsers(r.service_address, model=MODEL, users=4) as live:
        r.apply(_spec("1"))
        _step_started(r)
        candidate = r.status()["candidate"]["revision"]
        candidate_set = deployment_name("qwen", candidate)
        # The fault: the candidate group's worker dies; its leader fails with it and
        # LeaderWorkerSet recreates the group.
        assert kill_pod_processes(r, f"{candidate_set}-0-1") >= 1

        def rejected() -> dict[str, Any] | None:
            gate = r.status().get("lastGate") or {}
            ok = gate.get("revision") == candidate and gate.get("outcome") == "Failed"
            return gate if ok else None

        gate = r.wait(rejected, TIMEOUT, "the candidate rejected by its canary")
        reason = gate["reasons"][0]
        assert reason.startswith("canary step 1/1 (50%) failed: candidate"), reason
        assert r.serving_revision() == stable
        r.wait(lambda: candidate_set not in r.names(LWS_API, "leaderworkersets"), TIMEOUT,
               "the candidate group removed")  # fmt: skip
        # Traffic is on the stable group alone again, and it answers.
        back = time.monotonic()
        r.wait(lambda: sum(s.started > back for s in live.snapshot()) >= 40, TIMEOUT,
               "live requests after the traffic went back")  # fmt: skip
    after = [s for s in live.snapshot() if s.started > back]
    assert all(s.ok for s in after), [s for s in after if not s.ok][:5]
    assert r.status()["stable"]["revision"] == stable
    assert {n: p["metadata"]["uid"] for n, p in group_pods(r, stable_set).items()} == before
    stable_lws = r.cluster.get(LWS_API, "leaderworkersets", stable_set)
    assert stable_lws["metadata"]["labels"][labels.ROLE_LABEL] == labels.ROLE_STABLE
    r.wait(lambda: _events(r, "CanaryFailed"), TIMEOUT, "CanaryFailed")
