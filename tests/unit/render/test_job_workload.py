"""The benchmark Job of a non-study workload: `--workload-json`, and the dataset mounted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.workload import WorkloadSpec
from vllm_operator.bench.dataset import DatasetTraffic
from vllm_operator.commands.bench import config_from_args, parser
from vllm_operator.render.job import (
    DATASET_CLAIM_MOUNT,
    DATASET_MOUNT,
    EXCHANGE_MOUNT,
    render_job,
)

VERSIONS = ["1.30", kubernetes_validate.latest_version()]


def vd(workload: dict[str, Any] | None = None) -> VLLMDeployment:
    gate: dict[str, Any] = {"timeoutSeconds": 900}
    if workload is not None:
        gate["workload"] = workload
    return parse_vllm_deployment(
        {
            "apiVersion": "vllm-operator.dev/v1alpha1",
            "kind": "VLLMDeployment",
            "metadata": {"name": "qwen", "namespace": "ml"},
            "spec": {
                "model": {"name": "Qwen/Qwen3-8B"},
                "engine": {"image": "vllm/vllm-openai:v0.17.0"},
                "gate": gate,
            },
        }
    )


def job_of(workload: dict[str, Any] | None) -> dict[str, Any]:
    return render_job(vd(workload), "0123456789", 1, image="op:1")


def parts(job: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return container["args"], pod["volumes"], container["volumeMounts"]


def option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


DATASET_CM = {
    "dataset": {"configMap": "prompts", "key": "team.jsonl", "maxOutputTokens": 256},
    "seed": 9,
    "load": {"mode": "rate", "rates": [2, 4], "secondsPerLevel": 10},
}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_configmap_dataset_is_mounted_at_a_fixed_path(version: str) -> None:
    job = job_of(DATASET_CM)
    kubernetes_validate.validate(job, version, strict=True)
    args, volumes, mounts = parts(job)
    wire = option(args, "--workload-json")
    assert wire is not None
    assert WorkloadSpec.model_validate(json.loads(wire)) == vd(DATASET_CM).spec.gate.workload
    assert option(args, "--dataset") == f"{DATASET_MOUNT}/dataset"
    (volume,) = [v for v in volumes if v["name"] == "dataset"]
    # The user's key is projected under our fixed name: the path bench reads is ours.
    assert volume["configMap"] == {
        "name": "prompts",
        "items": [{"key": "team.jsonl", "path": "dataset"}],
    }
    assert {"name": "dataset", "mountPath": DATASET_MOUNT, "readOnly": True} in mounts


@pytest.mark.parametrize("version", VERSIONS)
def test_a_claim_dataset_is_mounted_read_only_with_its_path(version: str) -> None:
    workload = {"dataset": {"persistentVolumeClaim": "data", "path": "sets/a.json"}}
    job = job_of(workload)
    kubernetes_validate.validate(job, version, strict=True)
    args, volumes, mounts = parts(job)
    assert option(args, "--dataset") == f"{DATASET_CLAIM_MOUNT}/sets/a.json"
    (volume,) = [v for v in volumes if v["name"] == "dataset"]
    assert volume["persistentVolumeClaim"] == {"claimName": "data", "readOnly": True}
    assert {"name": "dataset", "mountPath": DATASET_CLAIM_MOUNT, "readOnly": True} in mounts


def test_a_synthetic_workload_passes_only_its_json() -> None:
    workload = {"synthetic": {"inputTokens": {"mean": 512}, "outputTokens": {"mean": 64}}}
    args, volumes, mounts = parts(job_of(workload))
    assert json.loads(option(args, "--workload-json") or "")["synthetic"]["inputTokens"] == {
        "distribution": "fixed",
        "mean": 512,
        "spread": 0.0,
        "min": 1,
        "max": 131072,
    }
    assert "--dataset" not in args
    assert [v["name"] for v in volumes] == ["exchange", "scratch"]
    assert [m["mountPath"] for m in mounts] == [EXCHANGE_MOUNT]


def test_the_study_renders_as_before_whatever_its_seed_and_load() -> None:
    default = job_of(None)
    for workload in ({"builtin": "study"}, {"builtin": "study", "seed": 4}, {"seed": 1}):
        assert job_of(workload) == default
    args, _, _ = parts(default)
    assert "--workload-json" not in args
    assert "--dataset" not in args


def test_bench_reads_the_rendered_arguments(tmp_path: Path) -> None:
    """The Job's argv is a command line bench accepts: the dataset is read from the path."""
    args, _, _ = parts(job_of(DATASET_CM))
    local = tmp_path / "dataset"
    local.write_text('{"messages": [{"role": "user", "content": "hello"}]}\n')
    args[args.index("--dataset") + 1] = str(local)
    args[args.index("--sandbox-dir") + 1] = str(tmp_path)
    config = config_from_args(parser("bench").parse_args(args[1:]))
    assert isinstance(config.traffic, DatasetTraffic)
    assert config.workload.seed == 9
    assert config.traffic.request(0).max_tokens == 256


def test_the_readme_example_is_a_valid_dataset_gate(tmp_path: Path) -> None:
    """README's "Gate on your own traffic" CR and ConfigMap: parsed, rendered, read by bench."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Gate on your own traffic", 1)[1].split("\n## ", 1)[0]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    config_map, cr = yaml.safe_load_all(block)
    cr["metadata"]["namespace"] = "default"
    job = render_job(parse_vllm_deployment(cr), "0123456789", 1, image="op:1")
    args, volumes, _ = parts(job)
    (volume,) = [v for v in volumes if v["name"] == "dataset"]
    key = volume["configMap"]["items"][0]["key"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    local = tmp_path / "dataset"
    local.write_text(config_map["data"][key])
    args[args.index("--dataset") + 1] = str(local)
    args[args.index("--sandbox-dir") + 1] = str(tmp_path)
    config = config_from_args(parser("bench").parse_args(args[1:]))
    assert isinstance(config.traffic, DatasetTraffic)
    assert config.traffic.describe()["records"] == 3
    assert config.thresholds is not None
    assert config.thresholds.slo is not None
