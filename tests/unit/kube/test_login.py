"""kopf's login follows `run --kubeconfig/--context`, not only KUBECONFIG.

Before, kopf's ``login_via_client`` loaded the default kubeconfig whatever ``--kubeconfig``
said, so kopf's watches and the operator's own client could talk to different clusters.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from vllm_operator.kube.client import login_for


def _kubeconfig(path: Path) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "a", "cluster": {"server": "https://a.example:6443"}},
            {
                "name": "b",
                "cluster": {"server": "https://b.example:6443", "insecure-skip-tls-verify": True},
            },
        ],
        "users": [
            {"name": "ua", "user": {"token": "token-a"}},
            {"name": "ub", "user": {"token": "token-b"}},
        ],
        "contexts": [
            {"name": "ctx-a", "context": {"cluster": "a", "user": "ua"}},
            {"name": "ctx-b", "context": {"cluster": "b", "user": "ub"}},
        ],
        "current-context": "ctx-a",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_given_file_and_its_current_context(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "kc")
    info = login_for(kubeconfig=str(path))
    assert info.server == "https://a.example:6443"
    assert (info.scheme, info.token) == ("Bearer", "token-a")
    assert info.insecure is False


def test_the_given_context(tmp_path: Path) -> None:
    info = login_for(kubeconfig=str(_kubeconfig(tmp_path / "kc")), context="ctx-b")
    assert info.server == "https://b.example:6443"
    assert info.token == "token-b"
    assert info.insecure is True
