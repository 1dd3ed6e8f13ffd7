"""kopf runs for real against the devcluster: each reaction exactly once, status patches,
adoption with uid-bearing ownerReferences and garbage collection of the children."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kopf

from devcluster import DevCluster, OperatorThread

from .crd import API_VERSION, GROUP, PLURAL, VERSION, widget, widget_crd


def make_registry(seen: Counter[str], lock: threading.Lock) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    def created(body: Any, name: str, namespace: str, patch: Any, memo: Any, **_: Any) -> None:
        with lock:
            seen[f"create:{name}"] += 1
        child = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-config"},
            "data": {"size": str(body["spec"]["size"])},
        }
        kopf.adopt(child, owner=body)
        import kubernetes

        config = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(memo.kubeconfig, client_configuration=config)
        with kubernetes.client.ApiClient(config) as client:
            kubernetes.client.CoreV1Api(client).create_namespaced_config_map(namespace, child)
        patch.status["phase"] = "Created"
        kopf.info(body, reason="Created", message="first event")
        kopf.info(body, reason="Created", message="second event")

    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry)
    def updated(name: str, patch: Any, **_: Any) -> None:
        with lock:
            seen[f"update:{name}"] += 1
        patch.status["phase"] = "Updated"

    @kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry)
    def deleted(name: str, **_: Any) -> None:
        with lock:
            seen[f"delete:{name}"] += 1

    return registry


def test_kopf_sees_each_change_once_and_children_are_collected(
    devcluster: DevCluster, run_operator: Callable[..., OperatorThread], tmp_path: Path
) -> None:
    devcluster.create(widget_crd())
    seen: Counter[str] = Counter()
    lock = threading.Lock()
    # The handler's client reads a kubeconfig: it verifies the HTTPS server with its CA.
    kubeconfig = str(devcluster.write_kubeconfig(tmp_path / "kubeconfig"))
    run_operator(make_registry(seen, lock), memo=kopf.Memo(kubeconfig=kubeconfig))

    devcluster.create(widget("w1", size=3))
    status = devcluster.wait_for(
        lambda: (
            devcluster.get(API_VERSION, PLURAL, "w1").get("status", {}).get("phase") == "Created"
        ),
        message="status phase Created",
    )
    assert status
    child = devcluster.wait_for(lambda: devcluster.get("v1", "configmaps", "w1-config"))
    owner = devcluster.get(API_VERSION, PLURAL, "w1")
    ref = child["metadata"]["ownerReferences"][0]
    assert ref["uid"] == owner["metadata"]["uid"]
    assert ref["kind"] == "Widget"

    uid = owner["metadata"]["uid"]
    selector = f"involvedObject.uid={uid}"
    devcluster.wait_for(
        lambda: len(devcluster.list("v1", "events", "default", field_selector=selector)) == 2
    )
    posted = devcluster.list("v1", "events", "default", field_selector=selector)
    names = {e["metadata"]["name"] for e in posted}
    assert len(names) == 2  # generateName resolved to distinct names

    devcluster.patch(API_VERSION, PLURAL, "w1", {"spec": {"size": 4}})
    devcluster.wait_for(
        lambda: devcluster.get(API_VERSION, PLURAL, "w1")["status"].get("phase") == "Updated",
        message="status phase Updated",
    )

    devcluster.delete(API_VERSION, PLURAL, "w1")
    devcluster.wait_for(
        lambda: not devcluster.exists(API_VERSION, PLURAL, "w1"), message="owner gone"
    )
    devcluster.wait_for(
        lambda: not devcluster.exists("v1", "configmaps", "w1-config"), message="child collected"
    )
    with lock:
        assert seen == {"create:w1": 1, "update:w1": 1, "delete:w1": 1}


def test_kopf_in_namespaced_mode(
    devcluster: DevCluster, run_operator: Callable[..., OperatorThread]
) -> None:
    devcluster.create(widget_crd())
    registry = kopf.OperatorRegistry()
    created: list[str] = []

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    def on_create(name: str, namespace: str, **_: Any) -> None:
        created.append(f"{namespace}/{name}")

    devcluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    run_operator(registry, namespaces=["default"])
    devcluster.create(widget("mine"))
    devcluster.create(widget("theirs", namespace="other"))
    devcluster.wait_for(lambda: created, message="namespaced operator saw its widget")
    assert created == ["default/mine"]


def test_restarted_operator_does_not_replay_creation(devcluster: DevCluster) -> None:
    import time

    devcluster.create(widget_crd())
    registry = kopf.OperatorRegistry()
    created: list[str] = []
    resumed: list[str] = []

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    def on_create(name: str, **_: Any) -> None:
        created.append(name)

    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry)
    def on_resume(name: str, **_: Any) -> None:
        resumed.append(name)

    with OperatorThread(registry, devcluster):
        devcluster.create(widget("w"))
        devcluster.wait_for(lambda: created, message="created once")
        devcluster.wait_for(
            lambda: (
                "kopf.zalando.org/last-handled-configuration"
                in devcluster.get(API_VERSION, PLURAL, "w")["metadata"].get("annotations", {})
            )
        )
        started = time.monotonic()
    assert time.monotonic() - started < 3.0  # stop is fast

    with OperatorThread(registry, devcluster):  # same registry, second run
        devcluster.wait_for(lambda: resumed, message="resumed after restart")
    assert created == ["w"]
    assert resumed == ["w"]


def test_kopf_with_server_side_initial_streaming(
    devcluster: DevCluster, run_operator: Callable[..., OperatorThread]
) -> None:
    devcluster.create(widget_crd())
    devcluster.create(widget("before"))
    registry = kopf.OperatorRegistry()
    seen: list[str] = []

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    def on_create(name: str, **_: Any) -> None:
        seen.append(name)

    def streaming(settings: kopf.OperatorSettings) -> None:
        settings.watching.initial_streaming = True  # sendInitialEvents + initial bookmark

    run_operator(registry, settings=streaming)
    devcluster.wait_for(lambda: seen == ["before"], message="existing widget handled")
    devcluster.create(widget("after"))
    devcluster.wait_for(lambda: seen == ["before", "after"], message="new widget handled")


def test_the_runner_login_wins_over_a_login_of_the_registry(devcluster: DevCluster) -> None:
    # The runner's login is a registry handler with a top priority (no private kopf vault):
    # a registry that brings its own login, here to a port nothing listens on, still talks
    # to the devcluster, and kopf's fallback logins (kubeconfig, in-cluster) never run.
    devcluster.create(widget_crd())
    registry = kopf.OperatorRegistry()
    created: list[str] = []
    logins: list[str] = []

    @kopf.on.login(registry=registry)
    def elsewhere(**_: Any) -> kopf.ConnectionInfo:
        logins.append("elsewhere")
        return kopf.ConnectionInfo(server="http://127.0.0.1:9", priority=100)

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    def on_create(name: str, **_: Any) -> None:
        created.append(name)

    with OperatorThread(registry, devcluster):
        devcluster.create(widget("w"))
        devcluster.wait_for(lambda: created == ["w"], message="created through the devcluster")
    assert logins == ["elsewhere"]  # it ran, and lost
