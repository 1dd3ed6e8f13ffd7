"""Multi-node revisions on the embedded cluster: a LeaderWorkerSet group gated and promoted.

The real operator (``--multi-node``) on a DevCluster serving the vendored LWS v0.10.0 CRD;
the kubelet plays LeaderWorkerSets (``devcluster.lws_controller``) and the simulator plays
the group (the worker joins the leader over loopback; the leader serves once it has).
Without LeaderWorkerSet the same spec is refused with ``MultiNodeUnavailable`` and what
serves keeps serving; with ``--multi-node`` but the LeaderWorkerSet CRD not installed, the
same refusal with nothing created, until the CRD is installed and the revision rolls out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devcluster import DevCluster
from vllm_operator.kube.client import Kube, api_client_for
from vllm_operator.render import labels
from vllm_operator.render.names import deployment_name, twin_deployment_name

from .harness import Rollout, resource

ROOT = Path(__file__).resolve().parents[3]
LWS_CRD = (
    ROOT / "tests" / "unit" / "render" / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
)
LWS_API = "leaderworkerset.x-k8s.io/v1"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
TIMEOUT = 240.0


def two_nodes(**spec: Any) -> dict[str, Any]:
    """A 2 x 1-GPU revision of vLLM 0.22 (TP 1 x PP 2 = 2 nodes x 1 GPU)."""
    return resource(
        image="vllm/vllm-openai:v0.22.0",
        engine={"tensorParallelSize": 1, "extraArgs": ["--pipeline-parallel-size", "2"]},
        resources={"gpus": 1, "nodes": 2},
        **spec,
    )


@pytest.fixture
def groups(tmp_path: Path) -> Iterator[Rollout]:
    r = Rollout(tmp_path, crds=(LWS_CRD,), multi_node=True)
    r.start_operator()
    yield r
    r.close()


def group_pods(r: Rollout, lws: str) -> dict[str, dict[str, Any]]:
    pods = r.cluster.list("v1", "pods", "default", label_selector=f"{NAME_LABEL}={lws}")
    return {p["metadata"]["name"]: p for p in pods}


def kill_pod_processes(r: Rollout, pod: str) -> int:
    """SIGKILL the processes the kubelet runs for ``pod`` (found by working directory)."""
    root = str((r.workdir / "kubelet" / "default" / pod).resolve()) + "/"
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if (os.readlink(entry / "cwd") + "/").startswith(root):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
    return killed


def refused(r: Rollout) -> dict[str, Any] | None:
    """The Stalled condition when its reason is MultiNodeUnavailable, else None."""
    conditions = r.status().get("conditions") or []
    found = next((c for c in conditions if c["type"] == "Stalled"), None)
    ok = found and found["status"] == "True" and found["reason"] == "MultiNodeUnavailable"
    return found if ok else None


def test_a_two_node_revision_is_gated_promoted_and_survives_a_lost_worker(
    groups: Rollout,
) -> None:
    r = groups
    r.apply(two_nodes())
    status = r.wait_phase("Serving", gate="Passed", timeout=TIMEOUT)
    revision = status["stable"]["revision"]
    (lws,) = r.objects(LWS_API, "leaderworkersets")
    assert lws["metadata"]["labels"][labels.REVISION_LABEL] == revision
    assert lws["metadata"]["labels"][labels.ROLE_LABEL] == labels.ROLE_STABLE
    assert r.objects("apps/v1", "deployments") == []  # a group, not a Deployment
    assert r.serving_revision() == revision
    address = r.wait(r.service_address, what="the serving Service's proxy")
    assert httpx.get(f"http://{address}/health", timeout=10).status_code == 200
    history = len(status.get("history") or [])
    lws_name = lws["metadata"]["name"]
    before = {n: p["metadata"]["uid"] for n, p in group_pods(r, lws_name).items()}
    assert sorted(before) == [f"{lws_name}-0", f"{lws_name}-0-1"]

    # A worker killed mid-serve: the leader fails with it and the group is recreated.
    assert kill_pod_processes(r, f"{lws_name}-0-1") >= 1

    def recreated() -> bool:
        now = group_pods(r, lws_name)
        return sorted(now) == sorted(before) and all(
            now[n]["metadata"]["uid"] != uid for n, uid in before.items()
        )

    r.wait(recreated, TIMEOUT, "the whole group recreated")
    r.wait(
        lambda: (
            (r.cluster.get(LWS_API, "leaderworkersets", lws_name).get("status") or {}).get(
                "readyReplicas"
            )
            == 1
        ),
        TIMEOUT,
        "the new group Ready",
    )
    after = r.wait_phase("Serving", timeout=TIMEOUT)
    # Nothing rejected, promoted or gated because of it: same stable revision, same set.
    assert after["stable"]["revision"] == revision
    assert len(after.get("history") or []) == history
    assert r.names(LWS_API, "leaderworkersets") == [lws_name]
    assert r.objects("batch/v1", "jobs") == [] or all(
        j["metadata"]["labels"].get(labels.REVISION_LABEL) == revision
        for j in r.objects("batch/v1", "jobs")
    )
    assert r.serving_revision() == revision

    # A new revision gated against a twin of the stable group (a whole second group).
    body = two_nodes(gate={"baseline": {"mode": "twin"}})
    body["spec"]["engine"]["extraArgs"] += ["--max-num-seqs", "64"]
    r.apply(body)
    twin = twin_deployment_name("qwen", revision)
    r.wait(lambda: twin in r.names(LWS_API, "leaderworkersets"), TIMEOUT, "a twin group")
    r.wait(lambda: len(group_pods(r, twin)) == 2, TIMEOUT, "the twin's leader and worker")

    def promoted() -> dict[str, Any] | None:
        st = r.status()
        new = (st.get("stable") or {}).get("revision")
        passed = (st.get("lastGate") or {}).get("outcome") == "Passed"
        return st if st.get("phase") == "Serving" and new != revision and passed else None

    status = r.wait(promoted, TIMEOUT, "the new revision promoted")
    only = [deployment_name("qwen", status["stable"]["revision"])]
    r.wait(lambda: r.names(LWS_API, "leaderworkersets") == only, TIMEOUT, "twin and old gone")


def test_without_leaderworkerset_a_multi_node_edit_is_refused_and_the_stable_serves(
    tmp_path: Path,
) -> None:
    r = Rollout(tmp_path)  # no LWS CRD, no --multi-node
    r.start_operator()
    try:
        r.apply(resource(image="vllm/vllm-openai:v0.22.0"))
        serving = r.wait_phase("Serving", gate="Passed", timeout=TIMEOUT)["stable"]["revision"]
        deployments = r.names("apps/v1", "deployments")
        r.apply(two_nodes())
        stalled = r.wait(lambda: refused(r), TIMEOUT, "Stalled=MultiNodeUnavailable")
        assert "install LeaderWorkerSet" in stalled["message"]
        assert r.serving_revision() == serving
        assert r.names("apps/v1", "deployments") == deployments  # nothing half-created
        assert r.objects("batch/v1", "jobs") == [] or all(
            j["metadata"]["labels"].get(labels.REVISION_LABEL) == serving
            for j in r.objects("batch/v1", "jobs")
        )
    finally:
        r.close()


def test_with_multi_node_but_no_lws_crd_nothing_is_created_until_it_is_installed(
    tmp_path: Path,
) -> None:
    r = Rollout(tmp_path, multi_node=True)  # --multi-node, but the LWS CRD is not installed
    r.start_operator()
    try:
        r.apply(two_nodes())
        stalled = r.wait(lambda: refused(r), TIMEOUT, "Stalled=MultiNodeUnavailable")
        assert "leaderworkersets.leaderworkerset.x-k8s.io/v1" in stalled["message"]
        assert "lws/releases/download/v0.10.0/manifests.yaml" in stalled["message"]
        # Nothing of the revision was created: no candidate Service, set, Job or budget.
        for api, plural in (
            ("v1", "services"),
            ("apps/v1", "deployments"),
            ("batch/v1", "jobs"),
            ("policy/v1", "poddisruptionbudgets"),
        ):
            assert r.objects(api, plural) == [], plural
        # LeaderWorkerSet installed while the operator runs: the revision rolls out, no restart.
        r.cluster.create(yaml.safe_load(LWS_CRD.read_text()))
        status = r.wait_phase("Serving", gate="Passed", timeout=TIMEOUT)
        revision = status["stable"]["revision"]
        assert r.names(LWS_API, "leaderworkersets") == [deployment_name("qwen", revision)]
        assert refused(r) is None
    finally:
        r.close()


def test_calibrate_on_a_group_runs_its_aa_job_against_a_twin_group(groups: Rollout) -> None:
    r = groups
    gate = {
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
        "thresholds": {"slo": {"ttftMs": {"p50": 60000}, "maxErrorPercent": 5}},
    }
    r.apply(two_nodes(gate=gate))
    before = r.wait_phase("Serving", gate="Passed", timeout=TIMEOUT)
    stable = before["stable"]["revision"]
    r.annotate("qwen", labels.CALIBRATE_ANNOTATION, "2")  # the fit needs two A/A runs

    def calibration() -> dict[str, Any]:
        return dict(r.status().get("calibration") or {})

    done = r.wait(
        lambda: calibration() if calibration().get("phase") in ("Done", "Abandoned") else None,
        TIMEOUT,
        "the calibration finished",
    )
    assert done["phase"] == "Done", done.get("message")
    assert done["revision"] == stable
    assert len(done["runs"]) == 2
    assert "ttft" in done["proposal"]["floors"]
    # Its twin was a whole group: a second LeaderWorkerSet of the stable's size, now gone.
    twin = twin_deployment_name("qwen", stable)
    (added,) = [
        v["metadata"]
        for v in r.cluster.history(LWS_API, "leaderworkersets", twin)
        if v["_event"] == "ADDED"
    ]
    assert added["labels"][labels.COMPONENT_LABEL] == labels.COMPONENT_TWIN
    r.wait(lambda: twin not in r.names(LWS_API, "leaderworkersets"), TIMEOUT, "the twin gone")
    after = r.status()
    assert after["history"] == before["history"]  # no verdict
    assert r.serving_revision() == stable


def test_api_discovery_tells_whether_leaderworkersets_are_served() -> None:
    """What the shell asks before a multi-node revision (``Kube.serves``): the group version
    is not found (404) without the CRD, and lists ``leaderworkersets`` once it is installed."""
    with DevCluster() as cluster:
        kube = Kube(api_client_for(cluster.url))
        try:
            assert asyncio.run(kube.serves("Deployment")) is True
            assert asyncio.run(kube.serves("LeaderWorkerSet")) is False
            cluster.create(yaml.safe_load(LWS_CRD.read_text()))
            assert asyncio.run(kube.serves("LeaderWorkerSet")) is True
        finally:
            kube.close()


HPA = ("autoscaling/v2", "horizontalpodautoscalers")


def test_the_autoscaler_scales_whole_groups_and_the_operator_keeps_their_count(
    groups: Rollout,
) -> None:
    r = groups
    r.apply(two_nodes(autoscaling={"minReplicas": 1, "maxReplicas": 3}))
    revision = r.wait_phase("Serving", gate="Passed", timeout=TIMEOUT)["stable"]["revision"]
    lws_name = deployment_name("qwen", revision)
    hpa = r.wait(lambda: r.cluster.get(*HPA, "qwen"), TIMEOUT, "the autoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "name": lws_name,
    }

    # The HPA's write: two groups, through the set's scale subresource.
    r.cluster.patch(LWS_API, "leaderworkersets", lws_name, {"spec": {"replicas": 2}},
                    subresource="scale")  # fmt: skip
    r.wait(lambda: "serves (2/2 Ready)" in r.status().get("message", ""), TIMEOUT,
           "two whole groups Ready, as the operator sees them")  # fmt: skip
    pods = group_pods(r, lws_name)
    assert sorted(pods) == sorted(
        [f"{lws_name}-0", f"{lws_name}-0-1", f"{lws_name}-1", f"{lws_name}-1-1"]
    )
    # More passes (a spec edit that rolls nothing: the autoscaler's bounds) leave the count.
    r.apply(two_nodes(autoscaling={"minReplicas": 1, "maxReplicas": 4}))
    r.wait(lambda: r.cluster.get(*HPA, "qwen")["spec"]["maxReplicas"] == 4, TIMEOUT,
           "a pass after the scale moved the autoscaler's bound")  # fmt: skip
    r.wait(lambda: r.status().get("observedGeneration") == r.get()["metadata"]["generation"],
           TIMEOUT, "the edit observed")  # fmt: skip
    assert r.cluster.get(LWS_API, "leaderworkersets", lws_name)["spec"]["replicas"] == 2
    counts = [v["spec"]["replicas"] for v in r.cluster.history(LWS_API, "leaderworkersets",
                                                                lws_name)]  # fmt: skip
    assert counts[counts.index(2) :] == [2] * (len(counts) - counts.index(2)), counts
    assert r.status()["stable"]["revision"] == revision  # nothing rolled
