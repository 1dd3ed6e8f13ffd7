"""Manifests and waits shared by the kubelet tests.

Pods here run either the simulator (through the rendered vLLM entrypoint and the ``vllm``
shim) or tiny Python programs whose behaviour a test controls, so every status the kubelet
writes comes from a real process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devcluster import DevCluster

Obj = dict[str, Any]

# A web server taking ``--port N``: /health is 200 unless the file named by env
# NOT_READY_FILE exists; every other path answers "hello <pod name>".
WEB_SERVER = r"""
import http.server, os, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        flag = os.environ.get("NOT_READY_FILE")
        code = 503 if self.path == "/health" and flag and os.path.exists(flag) else 200
        body = ("hello " + os.environ.get("HOSTNAME", "")).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def web_deployment(
    name: str,
    *,
    replicas: int = 1,
    labels: dict[str, str] | None = None,
    image: str = "example/web:1",
    env: list[Obj] | None = None,
) -> Obj:
    labels = labels or {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "Recreate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": image,
                            "command": ["python", "-c", WEB_SERVER],
                            "args": ["--port", "8000"],
                            "env": env or [],
                            "ports": [{"name": "http", "containerPort": 8000}],
                            "readinessProbe": {
                                "httpGet": {"path": "/health", "port": "http"},
                                "periodSeconds": 5,
                                "failureThreshold": 1,
                            },
                        }
                    ]
                },
            },
        },
    }


def service(name: str, selector: dict[str, str], port: int = 8000) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": selector, "ports": [{"port": port, "targetPort": "http"}]},
    }


def job(name: str, command: list[str], **spec: Any) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "backoffLimit": 0,
            **spec,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "job", "image": "example/job:1", "command": command}],
                }
            },
        },
    }


def status_of(cluster: DevCluster, api: str, plural: str, name: str) -> Obj:
    return cluster.get(api, plural, name).get("status") or {}


def condition(status: Obj, ctype: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == ctype), None)


def pods_of(cluster: DevCluster, **labels: str) -> list[Obj]:
    selector = ",".join(f"{k}={v}" for k, v in labels.items()) or None
    return cluster.list("v1", "pods", "default", label_selector=selector)


def container_status(pod: Obj) -> Obj:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return dict(statuses[0])


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (gone, or a zombie someone else must reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait(condition_fn: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition_fn()
        except Exception:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.05)
