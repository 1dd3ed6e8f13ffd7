"""The failures a real cluster shows, met by the live canary (issue 39): simulators behind
the serving Service that crash, break their streams after the 200 header, hang until their
clients give up, or fail every request; live users sending requests through the Service the
whole time; the operator reading the pods' /metrics every analysis interval.

Each was Passed (or held the traffic) before: a crash mid-step and 20% broken streams
Passed, a restart after 30% 5xx read as 0 errors, a 100%-error candidate kept its share
until the step's end.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.kubelet_faults import Faults
from vllm_operator_demo.live_users import LiveUsers

from .harness import Rollout, resource
from .test_canary import CANARY, MODEL, _fault, _serving, _step
from .test_canary_gateway import GATEWAY_CRD

# A long step: only a failure signal or an early stop ends it before its end (150 s hold,
# scaled by the harness's 0.02: 3 s; 3000 s: 60 s).
LONG = {
    **CANARY,
    "steps": [{"weight": 20, "holdSeconds": 3000}, {"weight": 50, "holdSeconds": 150}],
}


def _spec(mode: str, canary: dict[str, Any] | None = None) -> dict[str, Any]:
    gate = {"iterations": 3, "concurrency": [1, 4], "timeoutSeconds": 120}
    return resource(mode=mode, gate=gate, rollout={"canary": canary or LONG})


@pytest.fixture
def streamed(rollout: Rollout) -> Iterator[LiveUsers]:
    """Live users whose answers are streamed, and who give up after 2 s."""
    with LiveUsers(rollout.service_address, model=MODEL, users=4, stream=True, timeout=2) as u:
        yield u


def _failed(r: Rollout, timeout: float = 60) -> str:
    def failed() -> str | None:
        gate = r.status().get("lastGate") or {}
        reasons = gate.get("reasons") or [""]
        ok = gate.get("outcome") == "Failed" and reasons[0].startswith("canary")
        return str(reasons[0]) if ok else None

    found: str = r.wait(failed, timeout, "the canary failed")
    return found


def _back_on(r: Rollout, stable: str) -> None:
    r.wait(lambda: r.serving_revision() == stable, 10, "the Service back on the stable")


def _enter_step_one(r: Rollout) -> tuple[str, str]:
    stable = _serving(r, _spec("balanced"))
    r.apply(_spec("throughput"))
    _step(r, 1)
    return stable, str(r.status()["candidate"]["revision"])


def test_a_candidate_that_crashes_mid_step_fails(rollout: Rollout, streamed: LiveUsers) -> None:
    stable, candidate = _enter_step_one(rollout)
    _fault(rollout, candidate, crashAfterSeconds=0)  # the process exits; the kubelet restarts it
    reason = _failed(rollout)
    assert "server container restarted (restarts 0 -> 1" in reason, reason
    _back_on(rollout, stable)


def test_streams_broken_after_the_header_fail(rollout: Rollout, streamed: LiveUsers) -> None:
    stable, candidate = _enter_step_one(rollout)
    _fault(rollout, candidate, streamErrorRate=0.2)
    reason = _failed(rollout)
    assert "error share beyond" in reason, reason
    _back_on(rollout, stable)


def test_a_restart_after_30_percent_5xx_keeps_the_errors(
    rollout: Rollout, streamed: LiveUsers
) -> None:
    """The 5xx answered before the restart are not lost with the counters: the step fails,
    whichever of its signals comes first."""
    stable, candidate = _enter_step_one(rollout)
    _fault(rollout, candidate, errorRate=0.3)
    time.sleep(1.5)  # more than two analysis intervals (30 s scaled: 0.6 s) of 5xx
    _fault(rollout, candidate, crashAfterSeconds=0)
    reason = _failed(rollout)
    assert "restarted" in reason or "error share beyond" in reason, reason
    _back_on(rollout, stable)


def test_requests_that_hang_until_clients_give_up_fail(
    rollout: Rollout, streamed: LiveUsers
) -> None:
    stable, candidate = _enter_step_one(rollout)
    _fault(rollout, candidate, hangRate=0.5)
    reason = _failed(rollout, timeout=90)
    assert "error share beyond" in reason, reason
    _back_on(rollout, stable)
    assert any(s.status == 0 for s in streamed.snapshot())  # the clients did give up


@pytest.mark.timing  # a verdict on measured time (stopped within 20 s): alone (conftest.py)
def test_a_candidate_failing_every_request_is_stopped_within_an_interval(
    rollout: Rollout, streamed: LiveUsers
) -> None:
    stable, candidate = _enter_step_one(rollout)
    due = rollout.status()["canary"]["dueAt"]
    began = time.monotonic()
    _fault(rollout, candidate, errorRate=1.0)
    reason = _failed(rollout)
    took = time.monotonic() - began
    assert "early stop" in reason, reason
    # The step holds 60 s; an interval is 0.6 s: stopped long before the step's end.
    assert took < 20, (took, due)
    _back_on(rollout, stable)


def test_a_scrape_that_keeps_failing_fails_at_the_deadline(
    rollout: Rollout, streamed: LiveUsers
) -> None:
    """progressDeadlineSeconds 100 (x 0.02: 2 s): the candidate's /metrics answers 503 from
    the step's start on, and the step may not hold the shared traffic past it."""
    stable = _serving(rollout, _spec("balanced"))
    rollout.apply(_spec("throughput", {**LONG, "progressDeadlineSeconds": 100}))
    _step(rollout, 1)
    candidate = str(rollout.status()["candidate"]["revision"])
    _fault(rollout, candidate, metricsStatus=503)
    reason = _failed(rollout)
    assert "no progress for" in reason, reason
    assert "(deadline 2 s): reading the pods' metrics" in reason, reason
    _back_on(rollout, stable)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Rollout]:
    r = Rollout(tmp_path, crds=(GATEWAY_CRD,))
    r.start_operator()
    yield r
    r.close()


def test_a_missing_route_fails_at_the_deadline(gateway: Rollout) -> None:
    """gatewayAPI with an HTTPRoute that does not exist: the step waits, says so, and fails
    at progressDeadlineSeconds instead of waiting forever."""
    stable = _serving(gateway, _spec("balanced"))
    missing = {
        **LONG,
        "traffic": {"mode": "gatewayAPI", "httpRoute": {"name": "absent"}},
        "progressDeadlineSeconds": 100,
    }
    gateway.apply(_spec("throughput", missing))
    reason = _failed(gateway, timeout=120)
    assert "no progress for" in reason, reason
    assert "HTTPRoute absent" in reason, reason
    assert gateway.serving_revision() == stable


def _three(body: dict[str, Any]) -> dict[str, Any]:
    body["spec"]["replicas"] = 3
    return body


def test_pods_that_never_become_ready_fail_at_the_deadline(tmp_path: Path) -> None:
    """Three stable pods and GPUs for five: the gate's candidate pod and its twin fit, step 1
    (20%: one candidate pod) fits, step 2 (50%: three) does not; its last pod is never
    scheduled, and at progressDeadlineSeconds (200 x 0.02: 4 s) the canary fails instead of
    holding the shared traffic."""
    r = Rollout(tmp_path, faults=Faults(gpu_capacity=5))
    r.start_operator()
    try:
        with LiveUsers(r.service_address, model=MODEL, users=4):
            stable = _serving(r, _three(_spec("balanced", CANARY)))
            canary = {**CANARY, "progressDeadlineSeconds": 200}
            r.apply(_three(_spec("throughput", canary)))
            reason = _failed(r, timeout=180)
            assert reason.startswith("canary step 2/2 (50%) failed: no progress for"), reason
            # The second pod fits and is usually Ready by then; on a loaded machine its
            # simulator may still be starting at the 4 s deadline. Either way the third never is.
            assert re.search(r"\(deadline 4 s\): [12]/3 candidate pods Ready", reason), reason
            _back_on(r, stable)
    finally:
        r.close()
