"""In-cluster calibration for real (issue 40, item 4): kopf + the operator + DevCluster + the
local kubelet. ``vllm-operator.dev/calibrate=3`` on a serving VLLMDeployment runs three real
``vllm-operator bench`` Jobs of the stable revision against its twin (simulators), writes the
fitted proposal to ``status.calibration`` and a ``CalibrationDone`` Event, and touches no
traffic and no verdict; it goes on across an operator restart, and a spec change in the
middle abandons it, saying so."""

from __future__ import annotations

from typing import Any

from vllm_operator.render import labels

from .harness import Rollout, resource

KEY = labels.CALIBRATE_ANNOTATION


def gate(max_errors: float = 5) -> dict[str, Any]:
    return {
        "iterations": 3,
        "concurrency": [1],
        "timeoutSeconds": 120,
        "trials": 2,
        "maxTrials": 2,
        "workload": {
            "synthetic": {"inputTokens": {"mean": 64}, "outputTokens": {"mean": 8}},
            "seed": 5,
            "load": {"mode": "rate", "rates": [2, 4], "secondsPerLevel": 2},
        },
        "thresholds": {"slo": {"ttftMs": {"p50": 60000}, "maxErrorPercent": max_errors}},
    }


def _events(r: Rollout) -> list[dict[str, Any]]:
    return list(r.cluster.list("v1", "events", "default"))


def _reasons(r: Rollout) -> list[str]:
    return [e["reason"] for e in _events(r)]


def _calibration(r: Rollout) -> dict[str, Any]:
    return dict(r.status().get("calibration") or {})


def _added_jobs(r: Rollout) -> list[str]:
    names = set()
    for job in r.cluster.list("batch/v1", "jobs", "default"):
        names.add(job["metadata"]["name"])
    token = _calibration(r).get("token")
    return sorted(
        n
        for i in range(1, 6)
        for n in [f"qwen--calibrate-{token}-{i}"]
        if any(v["_event"] == "ADDED" for v in r.cluster.history("batch/v1", "jobs", n))
    )


def _serving(r: Rollout) -> dict[str, Any]:
    r.apply(resource(gate=gate()))
    return r.wait_phase("Serving", timeout=90, gate="Passed")


def test_calibrate_3_runs_three_aa_jobs_across_a_restart_and_writes_a_proposal(
    rollout: Rollout,
) -> None:
    before = _serving(rollout)
    stable = before["stable"]["revision"]
    selectors = rollout.selector_changes()
    rollout.annotate("qwen", KEY, "3")
    rollout.wait(lambda: len(_calibration(rollout).get("runs", [])) >= 1, timeout=120,
                 what="the first calibration run")  # fmt: skip
    rollout.stop_operator()  # in the middle: one run kept in status, the rest to come
    rollout.start_operator()
    done = rollout.wait(
        lambda: _calibration(rollout).get("phase") == "Done" and _calibration(rollout),
        timeout=240,
        what="calibration Done",
    )
    assert done["revision"] == stable
    assert done["runsWanted"] == 3
    assert len(done["runs"]) == 3
    assert {run["job"] for run in done["runs"]} == set(_added_jobs(rollout))  # 3, none twice
    assert all("ttft.p50@2" in run["candidate"] for run in done["runs"])
    proposal = done["proposal"]
    assert set(proposal["floors"]) == {"ttft"}
    assert 1 <= proposal["floors"]["ttft"] <= 100
    assert proposal["trials"] >= 1
    assert "regressionFloorPercent" in proposal["patch"]
    # no verdict, no traffic: the history and the serving Service are as they were
    after = rollout.status()
    assert after["history"] == before["history"]
    assert after["phase"] == "Serving"
    assert rollout.serving_revision() == stable
    assert rollout.selector_changes() == selectors
    rollout.wait(lambda: "CalibrationDone" in _reasons(rollout), timeout=20, what="the Event")
    assert _reasons(rollout).count("CalibrationStarted") == 1
    rollout.wait(lambda: not rollout.cluster.exists("v1", "services", "qwen--twin"),
                 timeout=30, what="the twin gone")  # fmt: skip


def test_a_spec_change_mid_calibration_abandons_it_and_a_bad_count_is_refused(
    rollout: Rollout,
) -> None:
    before = _serving(rollout)
    rollout.annotate("qwen", KEY, "3")
    rollout.wait(
        lambda: any(
            j["metadata"]["labels"].get(labels.COMPONENT_LABEL) == labels.COMPONENT_CALIBRATION
            for j in rollout.cluster.list("batch/v1", "jobs", "default")
        ),
        timeout=60,
        what="a calibration Job",
    )
    rollout.apply(resource(gate=gate(max_errors=6)))  # a new generation, the same revision
    abandoned = rollout.wait(
        lambda: _calibration(rollout).get("phase") == "Abandoned" and _calibration(rollout),
        timeout=60,
        what="calibration Abandoned",
    )
    assert "the spec changed mid-calibration" in abandoned["message"]
    assert "proposal" not in abandoned
    rollout.wait(lambda: "CalibrationAbandoned" in _reasons(rollout), timeout=20, what="Event")
    rollout.wait(
        lambda: (
            not [
                j
                for j in rollout.cluster.list("batch/v1", "jobs", "default")
                if j["metadata"]["labels"].get(labels.COMPONENT_LABEL)
                == labels.COMPONENT_CALIBRATION
                and not (j.get("status") or {}).get("conditions")
            ]
        ),
        timeout=30,
        what="the running calibration Job deleted",
    )
    assert rollout.status()["history"] == before["history"]
    for bad in ("0", "21", "three"):
        rollout.annotate("qwen", KEY, bad)
        invalid = rollout.wait(
            lambda b=bad: _calibration(rollout).get("request") == b and _calibration(rollout),
            timeout=30,
            what=f"calibrate={bad} refused",
        )
        assert invalid["phase"] == "Invalid"
        assert f"annotation {KEY}={bad!r}" in invalid["message"]
        assert "a whole number from 1 to 20" in invalid["message"]
    assert "CalibrationInvalid" in _reasons(rollout)
