"""The gated rollout for real: kopf + the operator + DevCluster + the local kubelet.

Every vLLM pod is the simulator started from its rendered command, every benchmark Job is
the real ``vllm-operator bench``; the operator only sees the Kubernetes API.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from devcluster.kubelet import ADDRESS_ANNOTATION
from devcluster.kubelet_faults import Faults, Match
from vllm_operator.render import labels
from vllm_operator.render.labels import REVISION_LABEL

from .harness import API, Rollout, resource

QUALITY = {"thresholds": {"quality": {"minPassed": 12}}}


def _events(r: Rollout) -> list[str]:
    return [e["reason"] for e in r.cluster.list("v1", "events", "default")]


def _gate(**extra: Any) -> dict[str, Any]:
    return {"iterations": 3, "concurrency": [1, 4], "timeoutSeconds": 120, **extra}


def _serving(r: Rollout, body: dict[str, Any], timeout: float = 60) -> str:
    r.apply(body)
    st = r.wait_phase("Serving", timeout=timeout)
    return str(st["stable"]["revision"])


def test_first_deploy_passes_and_serves_only_once_ready(rollout: Rollout) -> None:
    rev = _serving(rollout, resource(gate=_gate(**QUALITY)))
    st = rollout.status()
    assert st["lastGate"]["outcome"] == "Passed"
    assert st["stable"]["version"] == "0.17.0"
    assert "--performance-mode throughput" in st["stable"]["keyFlags"]
    # kstatus reads an absent Reconciling or Stalled as False: the status patch replaced
    # the list, so the Reconciling=True of the rollout is gone from the stored object.
    assert {c["type"]: c["status"] for c in st["conditions"]} == {
        "Ready": "True",
        "GatePassed": "True",
    }
    assert rollout.serving_revision() == rev
    changes = rollout.selector_changes()
    assert changes == [(rev, 1)]
    dep = rollout.cluster.get("apps/v1", "deployments", f"qwen--{rev}")
    assert dep["metadata"]["ownerReferences"][0]["uid"] == rollout.get()["metadata"]["uid"]
    assert rollout.names("batch/v1", "jobs") == []  # judged, then removed
    events = _events(rollout)
    for reason in ("CandidateCreated", "BenchmarkStarted", "GatePassed", "Promoted"):
        assert reason in events
    verdicts = rollout.prometheus.get_sample_value(
        "vllm_operator_gate_verdicts_total", {"outcome": "Passed", "decided_by": "gate"}
    )
    assert verdicts == 1
    phase = rollout.prometheus.get_sample_value(
        "vllm_operator_phase", {"namespace": "default", "name": "qwen", "phase": "Serving"}
    )
    assert phase == 1
    # At rest nothing is written: no status churn, no reconcile loop on our own writes.
    versions = len(rollout.cluster.history(API, "vllmdeployments", "qwen"))
    time.sleep(1.0)  # a window to observe the absence of writes
    assert len(rollout.cluster.history(API, "vllmdeployments", "qwen")) == versions


def test_guarded_server_is_benchmarked_with_the_key_from_its_secret(rollout: Rollout) -> None:
    key = "vllm-test-key-0123456789"
    rollout.cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "vllm-key", "namespace": "default"},
            "data": {"api-key": base64.b64encode(key.encode()).decode()},
        }
    )
    secret = {"name": "vllm-key", "key": "api-key"}
    rev = _serving(rollout, resource(engine={"apiKeySecret": secret}, gate=_gate(**QUALITY)))
    assert rollout.status()["lastGate"]["outcome"] == "Passed"  # the bench got the key
    (pod,) = rollout.objects("v1", "pods")
    container = pod["spec"]["containers"][0]
    assert {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": secret}} in container["env"]
    # The simulator honoured VLLM_API_KEY as vLLM does: /v1 is really guarded.
    address = pod["metadata"]["annotations"][ADDRESS_ANNOTATION]
    assert pod["metadata"]["labels"][REVISION_LABEL] == rev
    url = f"http://{address}/v1/models"
    assert httpx.get(url, timeout=5).status_code == 401
    authorised = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=5)
    assert authorised.status_code == 200


def test_first_deploy_failing_quality_is_rejected(rollout: Rollout) -> None:
    rollout.apply(resource(sim_env={"VLLMOP_SIM_DEGRADED": "1"}, gate=_gate(**QUALITY)))
    st = rollout.wait_phase("Failed", timeout=60)
    assert st["lastGate"]["outcome"] == "Failed"
    assert any("quality" in r.lower() or "passed" in r for r in st["lastGate"]["reasons"])
    rollout.wait(lambda: rollout.names("apps/v1", "deployments") == [], what="candidate removed")
    assert rollout.serving_revision() is None


@pytest.mark.slow
@pytest.mark.timing  # the whole stack judging measured latency: alone (conftest.py)
def test_published_upgrade_story(rollout: Rollout) -> None:
    # Time scale 0.03: at 0.01 a short request of the throughput revision is ~3 ms of model
    # time and the few ms of loopback/proxy overhead alone can break a 10 % regression limit.
    slower = {"VLLMOP_SIM_TIME_SCALE": "0.03"}
    gate = _gate(
        iterations=2, thresholds={"maxRegressionPercent": 10, "quality": {"minPassed": 12}}
    )
    stable = _serving(
        rollout,
        resource(image="vllm/vllm-openai:v0.16.0", mode="eager", sim_env=slower, gate=gate),
        timeout=90,
    )

    rollout.apply(
        resource(image="vllm/vllm-openai:v0.17.0", mode="eager", sim_env=slower, gate=gate)
    )
    st = rollout.wait_phase("Degraded", timeout=90)
    assert st["lastGate"]["outcome"] == "Failed"
    assert st["lastGate"]["baselineRevision"] == stable
    assert any("regress" in r or "%" in r for r in st["lastGate"]["reasons"]), st["lastGate"]
    assert rollout.serving_revision() == stable
    rollout.wait(lambda: rollout.names("apps/v1", "deployments") == [f"qwen--{stable}"])

    rollout.apply(
        resource(image="vllm/vllm-openai:v0.17.0", mode="throughput", sim_env=slower, gate=gate)
    )
    st = rollout.wait_phase("Serving", timeout=90, gate="Passed")
    promoted = st["stable"]["revision"]
    assert promoted != stable
    rollout.wait(lambda: rollout.names("apps/v1", "deployments") == [f"qwen--{promoted}"])
    assert [h["outcome"] for h in st["history"]] == ["Passed", "Failed", "Passed"]
    changes = rollout.selector_changes()
    assert [rev for rev, _ in changes] == [stable, promoted]
    assert all(ready >= 1 for _, ready in changes), changes


def test_first_deploy_and_deletion_over_https(tmp_path: Path) -> None:
    """The operator's TLS path: kopf's login, the operator's client (through a kubeconfig)
    and the kubelet all verify the API's certificate against its CA."""
    r = Rollout(tmp_path, tls=True)
    assert r.cluster.url.startswith("https://")
    r.start_operator()
    try:
        rev = _serving(r, resource(gate=_gate(**QUALITY)))
        assert r.status()["lastGate"]["outcome"] == "Passed"
        assert r.serving_revision() == rev
        r.cluster.delete(API, "vllmdeployments", "qwen")
        r.wait(lambda: r.names("apps/v1", "deployments") == [], timeout=30)
    finally:
        r.close()


def test_stuck_candidate_is_rejected_with_its_cause(tmp_path: Path) -> None:
    faults = Faults(unschedulable=(Match(image="vllm/vllm-openai:v0.17.1"),))
    r = Rollout(tmp_path, faults=faults)
    r.start_operator()
    try:
        stable = _serving(r, resource(gate=_gate()))
        r.apply(resource(image="vllm/vllm-openai:v0.17.1", rollout={"progressDeadlineSeconds": 60}))
        st = r.wait_phase("Degraded", timeout=30)
        gate = st["lastGate"]
        assert gate["decidedBy"] == "deadline"
        assert any("unschedulable" in reason for reason in gate["reasons"]), gate
        assert r.serving_revision() == stable
        r.wait(lambda: r.names("apps/v1", "deployments") == [f"qwen--{stable}"])
    finally:
        r.close()


def test_job_image_pull_failure_is_an_error_never_a_pass(tmp_path: Path) -> None:
    r = Rollout(tmp_path, faults=Faults(image_pull=(Match(image="ghcr.io/vllm-operator/*"),)))
    r.start_operator()
    try:
        r.apply(resource(gate=_gate()))
        st = r.wait_phase("Failed", timeout=40)
        gate = st["lastGate"]
        assert gate["outcome"] == "Error"
        assert "never started" in gate["reasons"][0]
        assert "ImagePullBackOff" in gate["reasons"][0] or "ErrImagePull" in gate["reasons"][0]
        r.wait(lambda: r.names("batch/v1", "jobs") == [], what="Job removed")
        assert r.serving_revision() is None
    finally:
        r.close()


def test_bench_error_keeps_the_stable_revision(rollout: Rollout) -> None:
    stable = _serving(rollout, resource(gate=_gate()))
    # Every request refused with a 4xx: the benchmark cannot measure (a measurement fault).
    faulty = {"VLLMOP_SIM_ERROR_RATE": "1", "VLLMOP_SIM_ERROR_STATUS": "400"}
    rollout.apply(resource(mode="balanced", sim_env=faulty, gate=_gate()))
    st = rollout.wait_phase("Degraded", timeout=60)
    assert st["lastGate"]["outcome"] == "Error", st["lastGate"]
    assert st["lastGate"]["revision"] != stable
    assert rollout.serving_revision() == stable
    assert rollout.selector_changes() == [(stable, 1)]


def test_spec_change_mid_benchmark_abandons_the_candidate(rollout: Rollout) -> None:
    stable = _serving(rollout, resource(gate=_gate()))
    slow = _gate(iterations=40, concurrency=[1, 2, 4, 8])
    rollout.apply(resource(mode="balanced", gate=slow))
    job = rollout.wait(lambda: rollout.names("batch/v1", "jobs"), what="a benchmark Job")[0]
    rollout.apply(resource(mode="interactivity", gate=_gate()))
    st = rollout.wait_phase("Serving", timeout=60, gate="Passed")
    assert st["stable"]["revision"] not in (stable, job.split("-")[-2])  # <name>--gate-<rev>-<n>
    assert not rollout.cluster.exists("batch/v1", "jobs", job)
    assert "CandidateAbandoned" in _events(rollout)
    assert len(rollout.names("apps/v1", "deployments")) == 1


def test_deletion_removes_every_child(rollout: Rollout) -> None:
    _serving(rollout, resource(gate=_gate()))
    rollout.cluster.delete(API, "vllmdeployments", "qwen")
    rollout.wait(
        lambda: (
            not rollout.names("apps/v1", "deployments")
            and not rollout.names("v1", "services")
            and not rollout.names("batch/v1", "jobs")
        ),
        what="children garbage-collected",
    )


def test_forced_promotion_and_abort_annotations(rollout: Rollout) -> None:
    stable = _serving(rollout, resource(gate=_gate(**QUALITY)))
    rollout.apply(
        resource(mode="balanced", sim_env={"VLLMOP_SIM_DEGRADED": "1"}, gate=_gate(**QUALITY))
    )
    st = rollout.wait_phase("Degraded", timeout=60)
    rejected = st["lastGate"]["revision"]
    rollout.annotate("qwen", labels.PROMOTE_ANNOTATION, rejected)
    st = rollout.wait(
        lambda: (
            rollout.serving_revision() == rejected and rollout.wait_phase("Serving", timeout=20)
        ),
        timeout=40,
        what="forced promotion",
    )
    st = rollout.status()
    assert st["lastGate"]["decidedBy"] == "person"
    assert st["stable"]["revision"] == rejected
    assert "ForcedPromotion" in _events(rollout)

    rollout.apply(resource(mode="interactivity", gate=_gate(iterations=40)))
    candidate = rollout.wait(lambda: rollout.status()["candidate"]["revision"], what="candidate")
    rollout.annotate("qwen", labels.ABORT_ANNOTATION, candidate)
    st = rollout.wait_phase("Degraded", timeout=30)
    assert st["lastGate"]["decidedBy"] == "person"
    assert st["lastGate"]["revision"] == candidate
    assert rollout.serving_revision() == rejected
    # Events are posted after the status and the actions (the twin's removal among them).
    rollout.wait(lambda: "Aborted" in _events(rollout), timeout=10, what="Aborted Event")
    assert stable != rejected


def test_restart_at_every_step_creates_nothing_twice(rollout: Rollout) -> None:
    order = ["Pending", "Progressing", "Benchmarking", "Promoting", "Serving"]

    def reached(phase: str) -> bool:
        current = rollout.status().get("phase", "Pending")
        return order.index(current) >= order.index(phase)

    rollout.apply(resource(replicas=2, gate=_gate(iterations=10)))
    for phase in ("Progressing", "Benchmarking", "Promoting"):
        rollout.wait(lambda p=phase: reached(p), timeout=30, what=f"phase {phase} or later")
        rollout.stop_operator()
        rollout.start_operator()
    st = rollout.wait_phase("Serving", timeout=60, gate="Passed")
    rev = st["stable"]["revision"]
    created = [
        v["metadata"]["name"]
        for plural, api, name in (
            ("deployments", "apps/v1", f"qwen--{rev}"),
            ("jobs", "batch/v1", f"qwen--gate-{rev}-1"),
            ("services", "v1", "qwen"),
            ("services", "v1", "qwen--candidate"),
        )
        for v in rollout.cluster.history(api, plural, name)
        if v["_event"] == "ADDED"
    ]
    assert sorted(created) == sorted(
        [f"qwen--{rev}", f"qwen--gate-{rev}-1", "qwen", "qwen--candidate"]
    )
    assert not rollout.cluster.exists("batch/v1", "jobs", f"qwen--gate-{rev}-2")
    assert len(st["history"]) == 1
    assert rollout.selector_changes() == [(rev, 2)]  # switched only with both replicas Ready


def test_crash_looping_candidate_is_rejected_with_the_last_message(rollout: Rollout) -> None:
    # Without the library-path fix a 0.17 image fails at start the way vLLM does.
    rollout.apply(
        resource(
            engine={"libraryPathFix": "none"},
            rollout={"progressDeadlineSeconds": 200},
            gate=_gate(),
        )
    )
    st = rollout.wait_phase("Failed", timeout=40)
    gate = st["lastGate"]
    assert gate["decidedBy"] == "deadline"
    reasons = " ".join(gate["reasons"])
    assert "crash loop" in reasons
    assert "CUBLAS_STATUS_INVALID_VALUE" in reasons
    assert rollout.names("batch/v1", "jobs") == []  # never benchmarked
