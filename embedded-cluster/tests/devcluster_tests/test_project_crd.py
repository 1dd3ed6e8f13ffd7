"""The project's own CRD and examples on the devcluster: served, defaulted, pruned, and
printed by a real kubectl with the CRD's printer columns (what ``demo --keep`` relies on)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import DevCluster

from .test_clients import kubectl_binary

ROOT = Path(__file__).resolve().parents[3]
CRD_FILES = sorted((ROOT / "crds").glob("*.yaml"))
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def load_crd() -> dict[str, Any]:
    if not CRD_FILES:
        pytest.skip("no generated CRD in crds/ yet")
    docs = [d for d in yaml.safe_load_all(CRD_FILES[0].read_text()) if d]
    return dict(docs[0])


def test_project_crd_examples_and_kubectl_columns(devcluster: DevCluster, tmp_path: Path) -> None:
    import subprocess

    crd = load_crd()
    devcluster.create(crd)
    spec = crd["spec"]
    version = next(v for v in spec["versions"] if v.get("served", True))
    api_version = f"{spec['group']}/{version['name']}"
    plural = spec["names"]["plural"]
    created = []
    for index, path in enumerate(EXAMPLES):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == spec["names"]["kind"]:
                doc["metadata"]["namespace"] = "default"
                doc["metadata"]["name"] = f"example-{index}"
                doc["spec"]["noSuchField"] = True  # unknown fields are pruned, as on a cluster
                obj = devcluster.create(doc)
                assert "noSuchField" not in obj["spec"]
                created.append(obj["metadata"]["name"])
    if not created:
        pytest.skip("no example of the kind in examples/")
    assert [o["metadata"]["name"] for o in devcluster.list(api_version, plural)] == sorted(created)

    binary = kubectl_binary()
    short = (spec["names"].get("shortNames") or [plural])[0]
    done = subprocess.run(
        [
            binary,
            "--kubeconfig",
            str(devcluster.write_kubeconfig(tmp_path / "kc")),
            "--cache-dir",
            str(tmp_path / "cache"),
            "get",
            short,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0].split()
    wanted = ["NAME"] + [
        c["name"].upper()
        for c in version.get("additionalPrinterColumns", [])
        if not c.get("priority")
    ]
    assert header == wanted
    assert len(done.stdout.splitlines()) == 1 + len(created)
