"""A relative --workdir (issue 42): `vllm-operator demo --workdir tmp/x` crash-looped every
pod with `exec: vllm: not found`, because the pods' PATH named the shim folder relative to a
current directory the pod does not share (each runs in a folder of its own)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devcluster import DevCluster
from devcluster.kubelet import Kubelet
from vllm_operator_demo.demo import build_parser
from vllm_operator_demo.demo_session import DEMO_NODE_LABELS
from vllm_operator_demo.pods import vllm_images

from .helpers import condition, container_status, job, pods_of, status_of, wait


def test_the_demo_resolves_a_relative_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = build_parser("vllm-operator demo").parse_args(["--workdir", "tmp/x"])
    assert args.workdir == tmp_path / "tmp" / "x"


def test_a_pod_finds_vllm_with_a_relative_kubelet_workdir(
    devcluster: DevCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    images = vllm_images()
    with Kubelet(
        devcluster, "rel/kubelet", time_scale=0.01, images=images, node_labels=DEMO_NODE_LABELS
    ) as kubelet:
        assert kubelet.workdir == tmp_path / "rel" / "kubelet"
        script = 'import json, shutil; print(json.dumps(shutil.which("vllm")))'
        devcluster.create(
            job("which", ["sh", "-c", f"python -c '{script}' > /dev/termination-log"])
        )
        wait(
            lambda: (
                condition(status_of(devcluster, "batch/v1", "jobs", "which"), "Complete")
                or condition(status_of(devcluster, "batch/v1", "jobs", "which"), "Failed")
            ),
            timeout=60,
            what="Job finished",
        )
        (pod,) = pods_of(devcluster, **{"job-name": "which"})
        found = json.loads(container_status(pod)["state"]["terminated"]["message"])
    assert found == str(tmp_path / "rel" / "kubelet" / "bin" / "vllm")
