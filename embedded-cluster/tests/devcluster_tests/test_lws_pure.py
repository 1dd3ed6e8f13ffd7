"""The embedded LeaderWorkerSet controller's rules (lws v0.10.0), as pure functions."""

from __future__ import annotations

import copy
from typing import Any

from devcluster import lws_controller as lc
from devcluster.kubelet_launch import GroupPorts, rewrite_master

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def lws(replicas: int = 1, size: int = 2, policy: str = lc.RECREATE_GROUP) -> Obj:
    pod = {
        "metadata": {"labels": {"app": "m"}},
        "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}]}]},
    }
    worker = copy.deepcopy(pod)
    worker["spec"]["containers"][0]["args"] = ["--headless"]
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "m", "namespace": "ns", "uid": "u-1", "generation": 3},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": size,
                "restartPolicy": policy,
                "leaderTemplate": pod,
                "workerTemplate": worker,
            },
        },
    }


def running(pods: list[Obj], *, ready: bool = True, restarts: int = 0) -> list[Obj]:
    """The plan's pods as the kubelet leaves them: created, running, maybe Ready."""
    out = []
    for pod in copy.deepcopy(pods):
        pod["status"] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "c", "restartCount": restarts}],
        }
        out.append(pod)
    return out


def names(pods: list[Obj]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods)


def test_a_group_is_a_leader_and_workers_with_lws_labels_annotations_and_env() -> None:
    plan = lc.lws_plan(lws(size=3), [], NOW)
    assert names(plan.create) == ["m-0", "m-0-1", "m-0-2"]
    by_name = {p["metadata"]["name"]: p for p in plan.create}
    leader, worker = by_name["m-0"], by_name["m-0-2"]
    for pod, index in ((leader, "0"), (worker, "2")):
        labels = pod["metadata"]["labels"]
        assert labels["app"] == "m"
        assert labels[lc.NAME_LABEL] == "m"
        assert labels[lc.GROUP_INDEX_LABEL] == "0"
        assert labels[lc.WORKER_INDEX_LABEL] == index
        assert labels[lc.GROUP_KEY_LABEL] == lc.group_key("ns", "m-0")  # one key per group
        assert labels[lc.REVISION_LABEL] == lc.revision_key(lws(size=3))
        assert pod["metadata"]["annotations"][lc.SIZE_ANNOTATION] == "3"
        assert pod["metadata"]["ownerReferences"][0]["uid"] == "u-1"
        assert pod["spec"]["subdomain"] == "m"
        env = pod["spec"]["containers"][0]["env"]
        # LWS's variables first, so the template's $(VAR) references expand; user env after.
        assert env == [
            {"name": "LWS_LEADER_ADDRESS", "value": "m-0.m.ns"},
            {"name": "LWS_GROUP_SIZE", "value": "3"},
            {"name": "LWS_WORKER_INDEX", "value": index},
            {"name": "A", "value": "1"},
        ]
    assert worker["metadata"]["annotations"][lc.LEADER_NAME_ANNOTATION] == "m-0"
    assert lc.LEADER_NAME_ANNOTATION not in leader["metadata"]["annotations"]
    assert worker["spec"]["containers"][0]["args"] == ["--headless"]  # the worker template
    assert "args" not in leader["spec"]["containers"][0]


def test_status_counts_groups_ready_only_when_every_pod_is_ready() -> None:
    set_ = lws(replicas=2)
    pods = running(lc.lws_plan(set_, [], NOW).create)
    plan = lc.lws_plan(set_, pods, NOW)
    assert plan.create == []
    assert plan.delete == []
    assert plan.status is not None
    assert plan.status["replicas"] == 2
    assert plan.status["readyReplicas"] == 2
    assert plan.status["hpaPodSelector"] == (
        "leaderworkerset.sigs.k8s.io/name=m,leaderworkerset.sigs.k8s.io/worker-index=0"
    )
    conditions = {c["type"]: c for c in plan.status["conditions"]}
    assert conditions["Available"]["status"] == "True"
    assert conditions["Available"]["reason"] == "AllGroupsReady"
    assert conditions["Available"]["observedGeneration"] == 3
    assert "Progressing" not in conditions  # appears only once it was True
    # One worker not Ready: that group is not ready, the set is Progressing.
    pods[-1]["status"]["conditions"][0]["status"] = "False"
    set_["status"] = plan.status
    later = lc.lws_plan(set_, pods, NOW + 5).status
    assert later is not None
    assert later["readyReplicas"] == 1
    after = {c["type"]: c for c in later["conditions"]}
    assert after["Progressing"]["status"] == "True"
    assert after["Progressing"]["reason"] == "GroupsProgressing"
    assert after["Available"]["status"] == "False"


def test_a_restarted_worker_recreates_its_whole_group_and_only_it() -> None:
    set_ = lws(replicas=2)
    pods = running(lc.lws_plan(set_, [], NOW).create)
    for pod in pods:
        if pod["metadata"]["name"] == "m-1-1":
            pod["status"]["containerStatuses"][0]["restartCount"] = 1
    plan = lc.lws_plan(set_, pods, NOW)
    assert sorted(plan.delete) == ["m-1", "m-1-1"]
    assert plan.create == []  # the names are reused: created once the old pods are gone
    remaining = [p for p in pods if p["metadata"]["name"] not in plan.delete]
    assert names(lc.lws_plan(set_, remaining, NOW).create) == ["m-1", "m-1-1"]


def test_a_failed_leader_recreates_the_group_too() -> None:
    set_ = lws()
    pods = running(lc.lws_plan(set_, [], NOW).create)
    pods[0]["status"]["phase"] = "Failed"
    assert sorted(lc.lws_plan(set_, pods, NOW).delete) == ["m-0", "m-0-1"]


def test_restart_policy_none_replaces_only_the_pod() -> None:
    set_ = lws(policy="None")
    pods = running(lc.lws_plan(set_, [], NOW).create)
    worker = next(p for p in pods if p["metadata"]["name"] == "m-0-1")
    worker["status"]["phase"] = "Failed"
    plan = lc.lws_plan(set_, pods, NOW)
    assert plan.delete == ["m-0-1"]
    assert names(plan.create) == ["m-0-1"]


def test_scaling_adds_and_removes_whole_groups() -> None:
    set_ = lws(replicas=1)
    pods = running(lc.lws_plan(set_, [], NOW).create)
    set_["spec"]["replicas"] = 3
    assert names(lc.lws_plan(set_, pods, NOW).create) == ["m-1", "m-1-1", "m-2", "m-2-1"]
    more = running(lc.lws_plan(set_, pods, NOW).create)
    set_["spec"]["replicas"] = 1
    plan = lc.lws_plan(set_, pods + more, NOW)
    assert sorted(plan.delete) == ["m-1", "m-1-1", "m-2", "m-2-1"]


def test_a_template_change_recreates_the_outdated_groups() -> None:
    set_ = lws()
    pods = running(lc.lws_plan(set_, [], NOW).create)
    set_["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "j"
    assert sorted(lc.lws_plan(set_, pods, NOW).delete) == ["m-0", "m-0-1"]


def test_pods_of_other_owners_are_left_alone() -> None:
    stranger = running(lc.lws_plan(lws(), [], NOW).create)
    for pod in stranger:
        pod["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    plan = lc.lws_plan(lws(), stranger, NOW)
    assert plan.delete == []
    assert names(plan.create) == ["m-0", "m-0-1"]


def test_the_master_address_of_a_group_maps_to_one_local_port_per_leader() -> None:
    ports = GroupPorts()
    argv = ["vllm", "--master-addr", "m-0.m.ns", "--master-port", "29501", "--port", "8000"]
    leader = rewrite_master(argv, "ns", ports.get)
    worker = rewrite_master(
        ["--master-port", "29501", "--master-addr", "m-0.m.ns"], "ns", ports.get
    )
    other = rewrite_master(["--master-addr", "m-1.m.ns", "--master-port", "29501"], "ns", ports.get)
    assert leader[2] == "127.0.0.1"
    assert leader[-1] == "8000"
    assert leader[4] == worker[1] != other[3]  # one group shares a port; groups differ
    # Not a pod's DNS name (an IP, a Service URL host elsewhere): left as written.
    plain = ["--master-addr", "10.0.0.1", "--master-port", "29501"]
    assert rewrite_master(plain, "ns", ports.get) == plain
    assert rewrite_master(argv, "ns", None) == argv
