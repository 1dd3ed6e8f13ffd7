"""Failures a GPU cluster shows a rollout: crash loops, image pulls, no node, never Ready."""

from __future__ import annotations

from collections.abc import Callable

from devcluster import DevCluster
from devcluster.kubelet import Kubelet
from devcluster.kubelet_faults import Faults, Match

from .helpers import condition, container_status, pods_of, status_of, wait, web_deployment


def _crash_deployment() -> dict[str, object]:
    manifest = web_deployment("crash")
    container = manifest["spec"]["template"]["spec"]["containers"][0]  # type: ignore[index]
    container["command"] = [
        "sh",
        "-c",
        "echo loading >&2; echo 'error: unknown flag --x' >&2; exit 2",
    ]
    container["args"] = []
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    return manifest


def test_crash_loop_reports_last_message(devcluster: DevCluster, kubelet: Kubelet) -> None:
    devcluster.create(_crash_deployment())
    pod = wait(
        lambda: next(
            (
                p
                for p in pods_of(devcluster, app="crash")
                if container_status(p).get("restartCount", 0) >= 2
            ),
            None,
        ),
        what="two restarts",
    )
    cs = container_status(pod)
    last = cs["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (2, "Error")
    assert last["message"].endswith("error: unknown flag --x")  # log tail (FallbackToLogsOnError)
    waiting = wait(
        lambda: container_status(pods_of(devcluster, app="crash")[0])["state"].get("waiting"),
        what="waiting in back-off",
    )
    assert waiting["reason"] == "CrashLoopBackOff"
    assert "error: unknown flag --x" in waiting["message"]
    assert pod["status"]["phase"] == "Running"
    assert condition(pod["status"], "Ready")["status"] == "False"  # type: ignore[index]
    deploy = status_of(devcluster, "apps/v1", "deployments", "crash")
    assert deploy.get("readyReplicas") == 0
    assert condition(deploy, "Available")["status"] == "False"  # type: ignore[index]


def test_image_pull_unschedulable_and_never_ready(
    devcluster: DevCluster, make_kubelet: Callable[..., Kubelet]
) -> None:
    kubelet = make_kubelet(
        faults=Faults(
            image_pull=(Match(image="registry.invalid/*"),),
            unschedulable=(Match(labels={"pool": "none"}),),
            never_ready=(Match(labels={"app": "stuck"}),),
            gpu_capacity=1,
        )
    )
    devcluster.create(web_deployment("pull", image="registry.invalid/web:1"))
    devcluster.create(web_deployment("nonode", labels={"app": "nonode", "pool": "none"}))
    devcluster.create(web_deployment("stuck"))
    gpu = web_deployment("gpu", replicas=2)
    gpu["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "1"}
    }
    devcluster.create(gpu)

    pulled = wait(
        lambda: (
            container_status(pods_of(devcluster, app="pull")[0])["state"]["waiting"]["reason"]
            == "ImagePullBackOff"
            and pods_of(devcluster, app="pull")[0]
        ),
        what="ImagePullBackOff",
    )
    waiting = container_status(pulled)["state"]["waiting"]
    assert waiting["message"] == 'Back-off pulling image "registry.invalid/web:1"'
    assert pulled["status"]["phase"] == "Pending"
    assert kubelet.pod_address("default", pulled["metadata"]["name"]) is None  # never started

    # Wait on the condition itself: a status can be written before its conditions are.
    scheduled = wait(
        lambda: condition(pods_of(devcluster, app="nonode")[0]["status"], "PodScheduled"),
        what="the PodScheduled condition",
    )
    assert scheduled == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": scheduled["message"],
    }

    # One GPU on the node: the second replica waits; scaling down drops the waiting one first.
    wait(lambda: status_of(devcluster, "apps/v1", "deployments", "gpu").get("readyReplicas") == 1)
    pending = wait(
        lambda: [
            scheduled
            for p in pods_of(devcluster, app="gpu")
            if p["status"].get("phase") == "Pending"
            if (scheduled := condition(p["status"], "PodScheduled"))
        ],
        what="the waiting replica's PodScheduled condition",
    )
    assert len(pending) == 1
    assert "Insufficient nvidia.com/gpu" in pending[0]["message"]
    devcluster.patch("apps/v1", "deployments", "gpu", {"spec": {"replicas": 1}})
    wait(
        lambda: [p["status"].get("phase") for p in pods_of(devcluster, app="gpu")] == ["Running"],
        what="the GPU freed",
    )

    stuck = wait(
        lambda: (p := pods_of(devcluster, app="stuck")[0])["status"]["phase"] == "Running" and p,
        what="stuck pod running",
    )
    assert container_status(stuck)["ready"] is False
    assert status_of(devcluster, "apps/v1", "deployments", "stuck").get("readyReplicas") == 0
