"""A real kubectl against the embedded API: explain, field-level errors, apply, patches.

What a user of ``demo --keep`` types: ``kubectl explain vllmd.spec.engine`` reads the
CRD's schema from ``/openapi/v3``; an invalid object is refused with kubectl's own
rendering of the field causes ("The Deployment "d" is invalid: * spec.replicas: ...");
``kubectl apply`` of a changed Deployment keeps the fields it does not repeat (strategic
merge by container name); strategic merge on a custom resource is refused with 415.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import DevCluster

from .crd import GROUP, PLURAL, widget_crd
from .invalid_objects import CASES, Case, deployment
from .test_clients import kubectl_binary
from .test_refusals import _project_crd

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run(kubeconfig: Path, tmp_path: Path) -> Kubectl:
    binary = kubectl_binary()

    def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "c"), *args],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
            input=stdin,
        )

    return kubectl


def _vllmd(crd: dict[str, Any], name: str = "m", **resources: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "model": {"name": "Qwen/Qwen3-8B"},
        "engine": {"image": "vllm/vllm-openai:v0.17.0"},
    }
    if resources:
        spec["resources"] = resources
    return {
        "apiVersion": f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}",
        "kind": crd["spec"]["names"]["kind"],
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def test_kubectl_explain_reads_the_crd_schema(devcluster: DevCluster, run: Kubectl) -> None:
    devcluster.create(_project_crd())
    done = run("explain", "vllmd.spec.engine")
    assert done.returncode == 0, done.stderr
    assert "KIND:       VLLMDeployment" in done.stdout
    assert "FIELD: engine <Object>" in done.stdout
    assert "image\t<string> -required-" in done.stdout
    meta = run("explain", "vllmd.metadata.labels")
    assert meta.returncode == 0, meta.stderr
    assert "<map[string]string>" in meta.stdout


def test_kubectl_prints_the_field_causes_of_a_custom_resource(
    devcluster: DevCluster, run: Kubectl
) -> None:
    crd = _project_crd()
    devcluster.create(crd)
    done = run("apply", "-f", "-", stdin=yaml.safe_dump(_vllmd(crd, gpus="string")))
    assert done.returncode == 1
    assert 'The VLLMDeployment "m" is invalid: \n' in done.stderr
    assert (
        '* spec.resources.gpus: Invalid value: "string": '
        'spec.resources.gpus in body must be of type integer: "string"'
    ) in done.stderr
    # A type error blocks the CRD's CEL rules, and the server says so (hasBlockingErr).
    assert (
        "* <nil>: Invalid value: null: some validation rules were not checked because the"
        " object was invalid; correct the existing errors to complete validation"
    ) in done.stderr


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_kubectl_create_of_an_invalid_builtin_is_refused(run: Kubectl, case: Case) -> None:
    obj = case.build()
    done = run("create", "-f", "-", stdin=yaml.safe_dump(obj))
    assert done.returncode == 1
    if case.code == 400:
        assert "Error from server (BadRequest)" in done.stderr
    else:
        assert f'The {obj["kind"]} "{obj["metadata"]["name"]}" is invalid' in done.stderr
        assert f"{case.field}: " in done.stderr, done.stderr
    assert case.message in done.stderr


def test_kubectl_apply_twice_keeps_args_and_env(devcluster: DevCluster, run: Kubectl) -> None:
    """Client-side apply sends a strategic-merge patch: containers merge by name."""
    obj = deployment()
    first = run("apply", "-f", "-", stdin=yaml.safe_dump(obj))
    assert first.returncode == 0, first.stderr
    obj["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.18.0"
    obj["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "X", "value": "1"})
    second = run("apply", "-f", "-", stdin=yaml.safe_dump(obj))
    assert second.returncode == 0, second.stderr
    stored = devcluster.get("apps/v1", "deployments", "d")["spec"]["template"]["spec"]
    (container,) = stored["containers"]
    assert container["image"] == "vllm/vllm-openai:v0.18.0"
    assert container["args"] == ["--port", "8000"]
    assert container["env"] == [{"name": "HF_HOME", "value": "/cache"}, {"name": "X", "value": "1"}]
    assert container["ports"] == [{"name": "http", "containerPort": 8000}]
    del obj["spec"]["template"]["spec"]["containers"][0]["env"][0]
    third = run("apply", "-f", "-", stdin=yaml.safe_dump(obj))
    assert third.returncode == 0, third.stderr
    stored = devcluster.get("apps/v1", "deployments", "d")["spec"]["template"]["spec"]
    assert stored["containers"][0]["env"] == [{"name": "X", "value": "1"}]
    assert stored["containers"][0]["args"] == ["--port", "8000"]


def test_kubectl_strategic_patch_of_a_custom_resource_is_415(
    devcluster: DevCluster, run: Kubectl
) -> None:
    crd = _project_crd()
    devcluster.create(crd)
    devcluster.create(_vllmd(crd))
    done = run("patch", "vllmd", "m", "--type=strategic", "-p", '{"spec":{"replicas":2}}')
    assert done.returncode == 1
    assert "UnsupportedMediaType" in done.stderr or "unknown format" in done.stderr
    merged = run("patch", "vllmd", "m", "--type=merge", "-p", '{"spec":{"replicas":2}}')
    assert merged.returncode == 0, merged.stderr


def test_kubectl_unsupported_field_selector_is_a_bad_request(run: Kubectl) -> None:
    done = run("get", "configmaps", "--field-selector=data.a=1")
    assert done.returncode == 1
    assert "field label not supported: data.a" in done.stderr
    supported = run("get", "pods", "--field-selector=status.phase=Running")
    assert supported.returncode == 0, supported.stderr


def test_kubectl_explain_sees_a_changed_crd(devcluster: DevCluster, run: Kubectl) -> None:
    """The documents follow the registry: an updated CRD's schema is what explain shows."""
    devcluster.create(widget_crd())
    before = run("explain", "widgets.spec")
    assert before.returncode == 0, before.stderr
    assert "color" not in before.stdout
    path = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/color"
    devcluster.patch(
        "apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        f"{PLURAL}.{GROUP}",
        [{"op": "add", "path": path, "value": {"type": "string", "description": "Paint."}}],
    )
    after = run("explain", "widgets.spec")
    assert after.returncode == 0, after.stderr
    assert "color\t<string>" in after.stdout


def test_kubectl_strict_field_validation_refuses_unknown_fields(
    devcluster: DevCluster, run: Kubectl
) -> None:
    """kubectl sends ?fieldValidation=Strict: a typo in a custom resource is a 400, not a
    silently pruned field; other clients (no parameter) still get the pruning."""
    crd = _project_crd()
    devcluster.create(crd)
    body = _vllmd(crd)
    body["spec"]["replicaz"] = 2
    done = run("apply", "-f", "-", stdin=yaml.safe_dump(body))
    assert done.returncode == 1
    assert (
        'VLLMDeployment in version "v1alpha1" cannot be handled as a VLLMDeployment: strict'
        ' decoding error: unknown field "spec.replicaz"'
    ) in done.stderr
    assert not devcluster.exists(body["apiVersion"], crd["spec"]["names"]["plural"], "m")
    created = devcluster.create(body)  # the Python client sends no fieldValidation
    assert "replicaz" not in created["spec"]
