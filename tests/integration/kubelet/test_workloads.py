"""The kubelet runs Deployments, Jobs and Services like a cluster would, over the API only."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
from collections.abc import Callable

import httpx

from devcluster import DevCluster
from devcluster.kubelet import ADDRESS_ANNOTATION, Kubelet

from .helpers import (
    condition,
    container_status,
    job,
    pods_of,
    process_gone,
    service,
    status_of,
    wait,
    web_deployment,
)


def _get(kubelet: Kubelet, svc: str, path: str = "/") -> str:
    address = kubelet.service_address("default", svc, 8000)
    assert address is not None
    return httpx.get(f"http://{address}{path}", timeout=5).text


def test_deployment_pods_become_ready_and_scale(devcluster: DevCluster, kubelet: Kubelet) -> None:
    created = devcluster.create(web_deployment("web", replicas=2))
    devcluster.create(service("web", {"app": "web"}))
    wait(
        lambda: status_of(devcluster, "apps/v1", "deployments", "web").get("readyReplicas") == 2,
        what="2 ready replicas",
    )
    status = status_of(devcluster, "apps/v1", "deployments", "web")
    assert status["availableReplicas"] == 2
    assert status["observedGeneration"] == created["metadata"]["generation"]
    assert condition(status, "Available")["status"] == "True"  # type: ignore[index]
    assert condition(status, "Progressing")["reason"] == "NewReplicaSetAvailable"  # type: ignore[index]
    pods = pods_of(devcluster, app="web")
    assert len(pods) == 2
    for pod in pods:
        assert re.fullmatch(r"web-[a-z0-9]{10}-[a-z0-9]{5}", pod["metadata"]["name"])
        (ref,) = pod["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["uid"]) == ("Deployment", created["metadata"]["uid"])
        assert pod["metadata"]["annotations"][ADDRESS_ANNOTATION].startswith("127.0.0.1:")
        cs = container_status(pod)
        assert cs["ready"]
        assert "running" in cs["state"]
    # The Service proxy spreads connections over both Ready pods.
    names = {pod["metadata"]["name"] for pod in pods}
    seen = {_get(kubelet, "web").removeprefix("hello ") for _ in range(6)}
    assert seen == names

    pids = kubelet.pids()
    devcluster.patch("apps/v1", "deployments", "web", {"spec": {"replicas": 0}})
    wait(lambda: not pods_of(devcluster, app="web"), what="pods deleted on scale to 0")
    wait(lambda: all(process_gone(p) for p in pids), what="processes stopped")
    wait(lambda: status_of(devcluster, "apps/v1", "deployments", "web").get("replicas") == 0)


def test_service_follows_selector_changes(devcluster: DevCluster, kubelet: Kubelet) -> None:
    for rev in ("a", "b"):
        devcluster.create(web_deployment(f"web-{rev}", labels={"app": "web", "rev": rev}))
    devcluster.create(service("web", {"app": "web", "rev": "a"}))
    for rev in ("a", "b"):
        wait(
            lambda rev=rev: (
                status_of(devcluster, "apps/v1", "deployments", f"web-{rev}").get("readyReplicas")
                == 1
            )
        )
    assert _get(kubelet, "web").startswith("hello web-a-")
    devcluster.patch("v1", "services", "web", {"spec": {"selector": {"app": "web", "rev": "b"}}})
    wait(lambda: _get(kubelet, "web").startswith("hello web-b-"), what="proxy switched to b")


def test_job_runs_to_complete_with_termination_message(
    devcluster: DevCluster, kubelet: Kubelet
) -> None:
    devcluster.create(web_deployment("web"))
    devcluster.create(service("web", {"app": "web"}))
    devcluster.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "token", "namespace": "default"},
            "data": {"token": base64.b64encode(b"s3cret").decode()},
        }
    )
    wait(lambda: status_of(devcluster, "apps/v1", "deployments", "web").get("readyReplicas") == 1)
    script = (
        "import json, os, sys, urllib.request\n"
        "body = urllib.request.urlopen(sys.argv[1]).read().decode()\n"
        "out = {'body': body, 'url': sys.argv[1], 'token': os.environ.get('TOKEN'),\n"
        "       'missing': os.environ.get('MISSING', 'absent')}\n"
        "open('/dev/termination-log', 'w').write(json.dumps(out))\n"
        "print('report line')\n"
    )
    manifest = job("bench", ["python", "-c", script, "http://web.default.svc.cluster.local:8000/"])
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "token", "key": "token"}}},
        {"name": "MISSING", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "token"}}},
    ]
    devcluster.create(manifest)
    wait(
        lambda: condition(status_of(devcluster, "batch/v1", "jobs", "bench"), "Complete"),
        what="Job Complete",
    )
    status = status_of(devcluster, "batch/v1", "jobs", "bench")
    assert (status["succeeded"], status["failed"], status["active"]) == (1, 0, 0)
    assert status["startTime"]
    assert status["completionTime"]
    (pod,) = pods_of(devcluster, **{"job-name": "bench"})
    assert pod["status"]["phase"] == "Succeeded"
    terminated = container_status(pod)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    message = json.loads(terminated["message"])
    assert message["body"].startswith("hello web-")
    assert message["url"].startswith("http://127.0.0.1:")  # rewritten to the Service proxy
    assert (message["token"], message["missing"]) == ("s3cret", "absent")
    # The container's output is served as the pod log by the API.
    log_url = f"{devcluster.url}/api/v1/namespaces/default/pods/{pod['metadata']['name']}/log"
    wait(
        lambda: "report line" in devcluster.http.get(log_url).text, what="pod log served by the API"
    )
    assert "report line" in kubelet.pod_log("default", pod["metadata"]["name"])


def test_job_failure_and_deadline(
    devcluster: DevCluster, make_kubelet: Callable[..., Kubelet]
) -> None:
    kubelet = make_kubelet(deadline_time_scale=0.02)  # activeDeadlineSeconds 60 -> 1.2 s
    devcluster.create(job("fails", ["sh", "-c", "echo bad input >&2; exit 3"]))
    devcluster.create(job("slow", ["sleep", "600"], activeDeadlineSeconds=60))
    failed = wait(
        lambda: condition(status_of(devcluster, "batch/v1", "jobs", "fails"), "Failed"),
        what="Job Failed",
    )
    assert failed["reason"] == "BackoffLimitExceeded"
    (pod,) = pods_of(devcluster, **{"job-name": "fails"})
    assert container_status(pod)["state"]["terminated"]["exitCode"] == 3
    slow_pid = wait(kubelet.pids, what="slow job running")[0]
    deadline = wait(
        lambda: condition(status_of(devcluster, "batch/v1", "jobs", "slow"), "Failed"),
        what="deadline exceeded",
    )
    assert deadline["reason"] == "DeadlineExceeded"
    wait(lambda: process_gone(slow_pid), what="deadline kills the pod")
    assert status_of(devcluster, "batch/v1", "jobs", "slow")["active"] == 0


def test_stop_kills_process_groups_and_closes_ports(
    devcluster: DevCluster, make_kubelet: Callable[..., Kubelet]
) -> None:
    kubelet = make_kubelet()
    manifest = web_deployment("web")
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    # The server starts a grandchild that would outlive a naive kill of the main process.
    container["command"] = [
        "sh",
        "-c",
        'sleep 600 & exec python -c "$0" "$@"',
        container["command"][2],
    ]
    devcluster.create(manifest)
    devcluster.create(service("web", {"app": "web"}))
    wait(lambda: status_of(devcluster, "apps/v1", "deployments", "web").get("readyReplicas") == 1)
    (pid,) = kubelet.pids()
    children = [
        int(p)
        for p in os.listdir("/proc")
        if p.isdigit() and _pgid(int(p)) == pid and int(p) != pid
    ]
    assert children, "the sleep grandchild is in the pod's process group"
    pod_port = int(
        kubelet.pod_address("default", pods_of(devcluster)[0]["metadata"]["name"]).split(":")[1]
    )  # type: ignore[union-attr]
    proxy_port = int(kubelet.service_address("default", "web", 8000).split(":")[1])  # type: ignore[union-attr]
    kubelet.stop()
    for p in [pid, *children]:
        assert process_gone(p), f"process {p} survived kubelet.stop()"
    for port in (pod_port, proxy_port):
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still open"


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return -1
