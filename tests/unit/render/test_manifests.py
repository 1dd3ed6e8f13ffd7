"""Rendered manifests: valid for Kubernetes, and carrying what vLLM pods need."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from render_cases import EXAMPLES, load_example

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.engine import entrypoint
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import (
    render_all,
    render_candidate_service,
    render_deployment,
    render_serving_service,
    revision_hash,
)
from vllm_operator.render.labels import LAUNCH_PLAN_ANNOTATION, REVISION_LABEL, ROLE_LABEL

KUBERNETES_VERSIONS = ["1.30", kubernetes_validate.latest_version()]


def rendered(raw: dict[str, Any]) -> list[dict[str, Any]]:
    return render_all(parse_vllm_deployment(raw))


def container_of(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def test_there_are_three_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_manifest_of_every_example_validates(example: Path, version: str) -> None:
    manifests = rendered(load_example(example))
    assert [m["kind"] for m in manifests] == ["Deployment", "Service", "Service"]
    for manifest in manifests:
        kubernetes_validate.validate(manifest, version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_a_fully_loaded_spec_validates(resource: dict[str, Any], version: str) -> None:
    resource["spec"]["model"].update(
        revision="main",
        hfTokenSecret={"name": "hf", "key": "token"},
        weightsCache={"claimName": "w", "subPath": "hf", "readOnly": True},
    )
    resource["spec"]["engine"].update(
        compileCache={"claimName": "c"}, env=[{"name": "X", "value": "$(Y)"}]
    )
    resource["spec"]["resources"] = {
        "gpus": 2,
        "cpu": "500m",
        "memory": "64e9",
        "gpuResourceName": "amd.com/gpu",
    }
    resource["spec"]["scheduling"] = {
        "nodeSelector": {"k": "v"},
        "tolerations": [
            {
                "key": "g",
                "operator": "Equal",
                "value": "x",
                "effect": "NoExecute",
                "tolerationSeconds": 5,
            }
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}
                    ]
                }
            }
        },
        "runtimeClassName": "nvidia",
        "priorityClassName": "high",
    }
    resource["spec"]["service"] = {"port": 9000, "type": "LoadBalancer"}
    for manifest in rendered(resource):
        kubernetes_validate.validate(manifest, version, strict=True)


def test_v017_example_runs_throughput_and_not_eager() -> None:
    deployment = rendered(
        load_example(Path("examples/qwen3-30b-a3b-v0.17-throughput.yaml").resolve())
    )[0]
    args = container_of(deployment)["args"]
    i = args.index("--performance-mode")
    assert args[i + 1] == "throughput"
    assert "--enforce-eager" not in args


def test_v016_example_has_neither_mode_flag() -> None:
    path = next(p for p in EXAMPLES if "v0.16" in p.name)
    container = container_of(rendered(load_example(path))[0])
    assert "--performance-mode" not in container["args"]
    assert "--enforce-eager" not in container["args"]
    assert container["image"].endswith(":v0.16.0")


def test_deployment_pod_essentials(resource: dict[str, Any]) -> None:
    resource["spec"]["model"]["hfTokenSecret"] = {"name": "hf-secret", "key": "tok"}
    resource["spec"]["model"]["weightsCache"] = {"claimName": "weights"}
    resource["spec"]["resources"] = {"gpus": 1, "sharedMemory": "8Gi"}
    resource["spec"]["engine"]["env"] = [{"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}]
    deployment = rendered(resource)[0]
    pod = deployment["spec"]["template"]["spec"]
    container = container_of(deployment)
    assert pod["enableServiceLinks"] is False
    assert container["command"] == entrypoint.command()
    env = {e["name"]: e for e in container["env"]}
    assert env["VLLMOP_LIBRARY_PATH_FIX"]["value"] == "strip-cuda"
    # vLLM warns about unknown VLLM_* variables: the operator sets only names vLLM reads.
    assert {n for n in env if n.startswith("VLLM_")} == {"VLLM_CACHE_ROOT", "VLLM_LOGGING_LEVEL"}
    assert env["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf-secret", "key": "tok"}}
    assert "value" not in env["HF_TOKEN"]
    assert env["VLLM_LOGGING_LEVEL"]["value"] == "DEBUG"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert (
        volumes[mounts[env["HF_HOME"]["value"]]]["persistentVolumeClaim"]["claimName"] == "weights"
    )
    assert volumes[mounts[env["VLLM_CACHE_ROOT"]["value"]]]["emptyDir"] == {}
    assert volumes[mounts["/dev/shm"]]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert container["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    assert container["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    # The vllm image user (UID 2000, GID 0); every place it writes is a volume of its own.
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 2000,
        "runAsGroup": 0,
        "fsGroup": 0,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert env["HOME"]["value"] == "/home/vllm"
    assert volumes[mounts["/home/vllm"]]["emptyDir"] == {}
    assert env["USER"]["value"] == "vllm"  # getpass.getuser() without a passwd entry
    assert container["startupProbe"]["httpGet"]["path"] == "/health"
    strategy = deployment["spec"]["strategy"]
    assert strategy["rollingUpdate"]["maxSurge"] == 0


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_api_key_secret_reaches_vllm_as_env_never_as_argv(
    resource: dict[str, Any], version: str
) -> None:
    resource["spec"]["engine"]["apiKeySecret"] = {"name": "vllm-key", "key": "api-key"}
    deployment = rendered(resource)[0]
    kubernetes_validate.validate(deployment, version, strict=True)
    container = container_of(deployment)
    keyed = [e for e in container["env"] if e["name"] == "VLLM_API_KEY"]
    assert keyed == [
        {
            "name": "VLLM_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "vllm-key", "key": "api-key"}},
        }
    ]
    assert not any("api-key" in arg or "VLLM_API_KEY" in arg for arg in container["args"])
    del resource["spec"]["engine"]["apiKeySecret"]
    plain = container_of(rendered(resource)[0])
    assert all(e["name"] != "VLLM_API_KEY" for e in plain["env"])


def test_names_labels_and_selectors_are_consistent(resource: dict[str, Any]) -> None:
    vd = parse_vllm_deployment(resource)
    launch = plan_launch(vd.spec)
    revision = revision_hash(vd.spec, launch)
    deployment = render_deployment(vd, launch, revision, 3)
    serving = render_serving_service(vd, revision)
    candidate = render_candidate_service(vd, revision)
    assert deployment["metadata"]["name"] == f"qwen--{revision}"
    assert deployment["metadata"]["namespace"] == "ml"
    assert deployment["spec"]["replicas"] == 3
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pod_labels[REVISION_LABEL] == revision
    assert ROLE_LABEL not in pod_labels
    for key, value in deployment["spec"]["selector"]["matchLabels"].items():
        assert pod_labels[key] == value
    assert serving["metadata"]["name"] == "qwen"
    assert candidate["metadata"]["name"] == "qwen--candidate"
    for service in (serving, candidate):
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
        assert service["spec"]["ports"][0]["port"] == 8000
        assert "ownerReferences" not in service["metadata"]
    assert "ownerReferences" not in deployment["metadata"]
    assert pod_labels["app.kubernetes.io/managed-by"] == "vllm-operator"
    assert pod_labels["vllm-operator.dev/deployment"] == "qwen"


def test_launch_plan_annotation_summarises_the_revision(resource: dict[str, Any]) -> None:
    deployment = rendered(resource)[0]
    plan = json.loads(deployment["metadata"]["annotations"][LAUNCH_PLAN_ANNOTATION])
    assert plan == {
        "compiled": True,
        "image": "vllm/vllm-openai:v0.17.0",
        "keyFlags": ["--tensor-parallel-size 1", "--performance-mode throughput"],
        "libraryPathFix": "strip-cuda",
        "performanceMode": "throughput",
        "version": "0.17.0",
    }


def test_eager_pods_get_the_shorter_startup_budget(resource: dict[str, Any]) -> None:
    resource["spec"]["engine"]["performanceMode"] = "eager"
    startup = container_of(rendered(resource)[0])["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] == 900
    resource["spec"]["probes"] = {"warmupBudgetSeconds": 3000}
    startup = container_of(rendered(resource)[0])["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] == 3000


def test_user_dollar_strings_survive_kubelet_expansion(resource: dict[str, Any]) -> None:
    resource["spec"]["engine"]["extraArgs"] = ["--chat-template", "$(HOME)$$x"]
    resource["spec"]["engine"]["env"] = [{"name": "X", "value": "$(HF_HOME)"}]
    container = container_of(rendered(resource)[0])
    assert container["args"][-1] == "$$(HOME)$$$$x"
    assert {"name": "X", "value": "$$(HF_HOME)"} in container["env"]
