"""devcluster is generic: it imports nothing of vllm-operator, and images come from hooks.

The product (vllm-operator) depends on devcluster for its tests and demo, never the other
way round; what a vLLM image is (the ``vllm`` program, its environment) reaches the kubelet
only through ``devcluster.images.ImageHooks``. These tests fail on an import of
``vllm_operator`` anywhere in the package, static or at import time, and show the kubelet
running a pod with a product's hooks and without any.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kmock
import pytest

import devcluster
from devcluster import DevCluster
from devcluster.images import ImageHooks, NoImageHooks
from devcluster.kubelet import Kubelet

PACKAGE = Path(devcluster.__file__).resolve().parent
PRODUCT = ("vllm_operator", "vllm_operator_demo")


def foreign_imports(source: str, forbidden: tuple[str, ...] = PRODUCT) -> list[str]:
    """Absolute imports in ``source`` of a module under one of the ``forbidden`` packages."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [n for n in names if n.split(".")[0] in forbidden]
    return found


def test_the_import_check_sees_every_form_of_import() -> None:
    source = (
        "import os\nimport vllm_operator\nfrom vllm_operator.sim import vllm_shim\n"
        "def f():\n    import vllm_operator_demo.pods as p\n"
        "from . import kubelet\nfrom vllm_operatorx import y\n"
    )
    assert foreign_imports(source) == [
        "vllm_operator",
        "vllm_operator.sim",
        "vllm_operator_demo.pods",
    ]


def test_no_devcluster_module_imports_the_product() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 20  # the package itself, not an empty directory
    offenders = {
        str(path.relative_to(PACKAGE)): found
        for path in modules
        if (found := foreign_imports(path.read_text()))
    }
    assert offenders == {}


def test_devcluster_imports_with_the_product_unimportable() -> None:
    # Import time too (a dynamic import would pass the AST check): every devcluster module
    # loads in an interpreter where vllm_operator cannot be imported at all.
    script = """
import importlib, importlib.abc, pkgutil, sys
PRODUCT = ("vllm_operator", "vllm_operator_demo")
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in PRODUCT:
            raise ImportError(f"devcluster imported {name}")
        return None
sys.meta_path.insert(0, Refuse())
import devcluster
names = [m.name for m in pkgutil.walk_packages(devcluster.__path__, "devcluster.")]
for name in names:
    importlib.import_module(name)
leaked = sorted(m for m in sys.modules if m.split(".")[0] in PRODUCT)
print(len(names), leaked)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    count, leaked = done.stdout.split(maxsplit=1)
    assert int(count) > 20
    assert leaked.strip() == "[]"


class GreeterImages:
    """A product's hooks: a ``greet`` program the host lacks, and an env baked into images."""

    def install(self, bindir: Path) -> Path | None:
        bindir.mkdir(parents=True, exist_ok=True)
        program = bindir / "greet"
        program.write_text('#!/bin/sh\necho "$GREETING from $IMAGE_FLAVOUR"\n')
        program.chmod(0o755)
        return bindir

    def env(self, image: str) -> Mapping[str, str]:
        if image.startswith("example/greeter:"):
            return {"GREETING": "hello", "IMAGE_FLAVOUR": "image"}
        return {}


def greet_job(name: str, image: str, env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    container = {"name": "main", "image": image, "command": ["greet"], "env": env or []}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def finished(cluster: DevCluster, name: str, timeout: float = 20.0) -> str:
    """The Job's final condition type (Complete or Failed), waited for."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = cluster.get("batch/v1", "jobs", name).get("status") or {}
        for cond in status.get("conditions") or []:
            if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
                return str(cond["type"])
        time.sleep(0.05)
    raise AssertionError(f"job {name} did not finish within {timeout} s")


def pod_log(kubelet: Kubelet, job: str) -> str:
    (key,) = [k for k in kubelet.runtimes if k[1].startswith(f"{job}-")]
    return kubelet.pod_log(*key)


def test_the_kubelet_runs_images_through_the_hooks(devcluster: DevCluster, tmp_path: Path) -> None:
    hooks: ImageHooks = GreeterImages()
    with Kubelet(devcluster, tmp_path / "kubelet", time_scale=0.01, images=hooks) as kubelet:
        devcluster.create(greet_job("baked", "example/greeter:1"))
        # The pod's own env wins over the image's, as in a container.
        devcluster.create(
            greet_job("own", "example/greeter:1", [{"name": "IMAGE_FLAVOUR", "value": "pod"}])
        )
        devcluster.create(greet_job("plain", "example/other:1"))  # no env from the hooks
        assert [finished(devcluster, n) for n in ("baked", "own", "plain")] == ["Complete"] * 3
        assert pod_log(kubelet, "baked") == "hello from image\n"
        assert pod_log(kubelet, "own") == "hello from pod\n"
        assert pod_log(kubelet, "plain") == " from \n"


def test_without_hooks_pods_get_no_image_programs_or_env(
    devcluster: DevCluster, tmp_path: Path
) -> None:
    assert NoImageHooks().env("vllm/vllm-openai:v0.17.0") == {}
    with Kubelet(devcluster, tmp_path / "kubelet", time_scale=0.01) as kubelet:
        assert isinstance(kubelet.images, NoImageHooks)
        devcluster.create(greet_job("nohooks", "example/greeter:1"))
        assert finished(devcluster, "nohooks") == "Failed"  # no `greet` on this host
        assert not (tmp_path / "kubelet" / "bin").exists()
        (pod,) = devcluster.list("v1", "pods", "default", label_selector="job-name=nohooks")
        (status,) = pod["status"]["containerStatuses"]
        terminated = status["state"]["terminated"]
        # As containerd reports a container whose program is missing.
        assert terminated["reason"] == "StartError"
        assert terminated["exitCode"] == 128
        assert terminated["message"].startswith('exec: "greet": ')
        assert kubelet.pids() == []


# --- kmock's public API only -------------------------------------------------------------
ACTION_CASES = [
    ("GET", "/api/v1/namespaces/default/pods", {}, "LIST"),
    ("GET", "/api/v1/pods", {"watch": "true"}, "WATCH"),
    ("GET", "/api/v1/watch/namespaces/default/pods", {}, "WATCH"),  # legacy watch prefix
    ("GET", "/api/v1/namespaces/default/pods/p", {"watch": "true"}, "WATCH"),
    ("POST", "/apis/apps/v1/namespaces/default/deployments", {}, "CREATE"),
    ("GET", "/apis/apps/v1/namespaces/default/deployments/d", {}, "FETCH"),
    ("PATCH", "/apis/apps/v1/namespaces/default/deployments/d/status", {}, "UPDATE"),
    ("DELETE", "/api/v1/namespaces/default/pods/p", {}, "DELETE"),
    ("PUT", "/api/v1/namespaces/default/pods/p", {}, None),
    ("DELETE", "/api/v1/namespaces/default/pods", {}, None),
    ("GET", "/api/v1/namespaces", {}, "LIST"),  # the path kmock's own parser gets wrong
    ("GET", "/version", {}, None),
]


@pytest.mark.parametrize(("method", "path", "query", "expected"), ACTION_CASES)
def test_request_actions_follow_kmocks_rules(
    method: str, path: str, query: dict[str, str], expected: str | None
) -> None:
    from kmock._internal import parsing  # the oracle only: devcluster no longer imports it

    from devcluster.resources import Registry
    from devcluster.routing import action, parse_route

    route = parse_route(path, Registry())
    assert action(route, method, query) == expected
    if route is not None:
        watch = {"watch": "true"} if route.legacy_watch else {}
        parsed = parsing.ParsedPath(
            route.group, route.version, route.plural, route.namespace, route.name
        )
        guessed = parsing.guess_k8s(parsed, kmock.method(method), {**query, **watch})
        assert (guessed.value if guessed else None) == expected


def test_reactions_select_by_action_and_name(devcluster: DevCluster) -> None:
    assert devcluster.server is not None
    (
        devcluster.server[
            kmock.action.FETCH, kmock.resource("", "v1", "configmaps"), kmock.name("b")
        ]
        << 418
    )
    devcluster.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {}}
    )
    base = devcluster.url + "/api/v1/namespaces/default/configmaps"
    assert devcluster.http.get(f"{base}/b").status_code == 418
    assert devcluster.http.get(f"{base}/a").status_code == 200  # another name
    assert devcluster.http.get(base).status_code == 200  # a LIST, not a FETCH
    fetches = list(devcluster.server[kmock.action.FETCH, kmock.resource("", "v1", "configmaps")])
    assert [r.name for r in fetches] == ["b", "a"]
