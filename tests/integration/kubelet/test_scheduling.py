"""The local kubelet schedules like kube-scheduler on one node: selectors and affinity count.

A pod whose nodeSelector (or required node affinity) the node does not satisfy stays
Pending with PodScheduled=False/Unschedulable and a FailedScheduling Event, and never runs;
one that matches the node's labels runs. Before, every pod was bound to the one node.
"""

from __future__ import annotations

from collections.abc import Callable

from devcluster import DevCluster
from devcluster.kubelet import Kubelet

from .helpers import condition, pods_of, wait, web_deployment

LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H200-SIM"}


def test_unmatched_selector_stays_pending_with_failed_scheduling(
    devcluster: DevCluster, make_kubelet: Callable[..., Kubelet]
) -> None:
    kubelet = make_kubelet(node_labels=LABELS)
    elsewhere = web_deployment("elsewhere", labels={"app": "elsewhere"})
    elsewhere["spec"]["template"]["spec"]["nodeSelector"] = {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"
    }
    here = web_deployment("here", labels={"app": "here"})
    here["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.present": "true"}
    devcluster.create(elsewhere)
    devcluster.create(here)

    wait(
        lambda: [p["status"].get("phase") for p in pods_of(devcluster, app="here")] == ["Running"],
        what="the matching pod running",
    )
    pod = wait(
        lambda: (p := pods_of(devcluster, app="elsewhere")) and p[0].get("status") and p[0],
        what="the pending pod's status",
    )
    name = pod["metadata"]["name"]
    scheduled = condition(pod["status"], "PodScheduled")
    assert scheduled is not None
    assert scheduled["status"] == "False"
    assert scheduled["reason"] == "Unschedulable"
    assert "didn't match Pod's node affinity/selector" in scheduled["message"]
    events = wait(
        lambda: [
            e
            for e in devcluster.list("v1", "events", "default")
            if e.get("reason") == "FailedScheduling"
            and (e.get("involvedObject") or {}).get("name") == name
        ],
        what="FailedScheduling event",
    )
    assert len(events) == 1
    assert events[0]["type"] == "Warning"
    assert events[0]["message"] == scheduled["message"]
    assert kubelet.pod_address("default", name) is None  # never started
    assert pod["status"]["phase"] == "Pending"
    assert not (pod.get("spec") or {}).get("nodeName")
