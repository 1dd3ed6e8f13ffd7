"""Native sidecars on the local kubelet: a mesh's injected proxy, reported, crashed, restarted.

A canary counts only the server container's restarts (issue 39); that rule needs a cluster
whose pods have sidecars that restart. The kubelet injects a mesh's proxy (``Faults``'s
``mesh_sidecars``), reports it in ``initContainerStatuses`` and restarts it when it dies
(``crash_sidecar``), as Kubernetes does with an init container of ``restartPolicy: Always``.
"""

from __future__ import annotations

from collections.abc import Callable

from devcluster import DevCluster
from devcluster.kubelet import Kubelet
from devcluster.kubelet_faults import MESH_PROXY, Faults, Match
from devcluster.kubelet_sidecars import crash_sidecar

from .helpers import Obj, condition, container_status, pods_of, process_gone, wait, web_deployment


def _proxy(pod: Obj) -> Obj:
    statuses = (pod.get("status") or {}).get("initContainerStatuses") or []
    return next((dict(s) for s in statuses if s.get("name") == MESH_PROXY), {})


def test_an_injected_sidecar_is_reported_and_restarted_alone(
    devcluster: DevCluster, make_kubelet: Callable[..., Kubelet]
) -> None:
    kubelet = make_kubelet(faults=Faults(mesh_sidecars=(Match(labels={"app": "meshed"}),)))
    devcluster.create(web_deployment("meshed"))
    devcluster.create(web_deployment("plain"))

    def running(app: str) -> Obj | None:
        pods = pods_of(devcluster, app=app)
        ready = pods and condition(pods[0]["status"], "Ready")["status"] == "True"
        return pods[0] if ready else None

    pod = wait(lambda: running("meshed"), what="the meshed pod Ready")
    (proxy,) = pod["spec"]["initContainers"]  # admitted with the mesh's proxy, in the API
    assert (proxy["name"], proxy["restartPolicy"]) == (MESH_PROXY, "Always")
    first = _proxy(pod)
    assert (first["ready"], first["restartCount"]) == (True, 0), first
    assert "running" in first["state"]
    plain = wait(lambda: running("plain"), what="the plain pod Ready")
    assert "initContainers" not in plain["spec"]
    assert "initContainerStatuses" not in plain["status"]

    name = pod["metadata"]["name"]
    pid = crash_sidecar(kubelet.workdir, "default", name, MESH_PROXY)
    wait(lambda: process_gone(pid), what="the proxy killed")

    def restarted() -> Obj | None:
        now = pods_of(devcluster, app="meshed")[0]
        proxy = _proxy(now)
        return now if proxy.get("restartCount") == 1 and proxy.get("ready") else None

    after = wait(restarted, what="the proxy restarted and Ready")
    proxy = _proxy(after)
    assert proxy["lastState"]["terminated"]["exitCode"] == 137  # SIGKILL, as the OOM killer
    assert proxy["lastState"]["terminated"]["reason"] == "Error"
    server = container_status(after)
    assert server["restartCount"] == 0  # the server container never stopped
    assert "running" in server["state"]
    assert condition(after["status"], "Ready")["status"] == "True"
    assert pid not in kubelet.pids()
    assert len(kubelet.pids()) == 3  # two web servers and the proxy's new instance
