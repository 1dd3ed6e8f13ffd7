"""The kind e2e script's VLLMDeployment renders, and its pod would really start the simulator.

``hack/e2e-kind.sh`` cannot run here (no container runtime), so the parts that can be
checked without one are: the example is a valid resource, the operator renders it, the
rendered pod asks for the fake GPU the script advertises, and the simulator (the image's
``vllm`` shim) accepts the exact argv and environment of the rendered container, listening
on every interface on the Service's port.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.render import render_all

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "hack" / "kind" / "vllmd-sim.yaml"
SCRIPT = ROOT / "hack" / "e2e-kind.sh"


def _container() -> dict[str, Any]:
    vd = parse_vllm_deployment(yaml.safe_load(EXAMPLE.read_text(encoding="utf-8")))
    (deployment,) = [m for m in render_all(vd) if m["kind"] == "Deployment"]
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def test_example_renders_with_the_fake_gpu_the_script_advertises() -> None:
    container = _container()
    script = SCRIPT.read_text(encoding="utf-8")
    fake_gpu = "vllm-operator.dev/sim-gpu"
    assert f"FAKE_GPU={fake_gpu}" in script
    assert container["resources"]["limits"][fake_gpu] == "1"
    assert container["image"] == "vllm-operator:dev"
    assert "image: vllm-operator:dev" in EXAMPLE.read_text(encoding="utf-8")  # sed target


def test_simulator_accepts_the_rendered_container() -> None:
    sim_cli = pytest.importorskip("vllm_operator.commands.sim")
    container = _container()
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    # The entrypoint ends in `exec vllm serve "$@"`; the shim drops `serve`.
    assert container["command"][-2].rstrip().endswith('exec vllm serve "$@"')
    config = sim_cli.config_from_args(list(container["args"]), "vllm", env)
    assert str(config.version) == "0.17.0"
    # The stand-in's version is explicit, and the same as the one the flags were checked for.
    assert env["VLLMOP_SIM_VERSION"] == env["VLLMOP_VLLM_VERSION"] == "0.17.0"
    assert config.time_scale == pytest.approx(0.05)
    assert config.host == "0.0.0.0"
    assert config.port == container["ports"][0]["containerPort"]
    assert "qwen" in config.served_model_names


SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__"}


def shell_scripts() -> list[Path]:
    """Every shell script of the repository: *.sh, or a sh/bash shebang (e.g. .ci/run).

    Files git ignores (a venv, a local .gpu/ kit) are not the project's and are left out;
    new files not yet added are checked.
    """
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode == 0:
        candidates = [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    else:  # not a git checkout (an unpacked archive): every file
        candidates = sorted(ROOT.rglob("*"))
    found = []
    for path in sorted(candidates):
        if SKIP_DIRS & set(path.relative_to(ROOT).parts) or not path.is_file():
            continue
        with path.open("rb") as f:
            first = f.readline(200)
        if path.suffix == ".sh" or re.match(rb"#!\s*\S*(/env\s+)?\S*\b(ba|da)?sh\b", first):
            found.append(path)
    return found


def _shellcheck(paths: list[Path], *options: str) -> None:
    # CI installs shellcheck (hack/ci-tools.sh) and sets VLLMOP_REQUIRE_SHELLCHECK: never skip.
    if shutil.which("shellcheck") is None:
        if os.environ.get("VLLMOP_REQUIRE_SHELLCHECK"):
            pytest.fail("shellcheck is required here (VLLMOP_REQUIRE_SHELLCHECK is set)")
        pytest.skip("shellcheck not installed (hack/ci-tools.sh installs it)")
    result = subprocess.run(
        ["shellcheck", *options, *map(str, paths)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_shell_script_is_found() -> None:
    names = {str(p.relative_to(ROOT)) for p in shell_scripts()}
    assert {"hack/e2e-kind.sh", "hack/update-crds.sh", "hack/image-test.sh", ".ci/run"} <= names
    assert not any(n.endswith(".py") for n in names)


def test_scripts_are_shellcheck_clean() -> None:
    _shellcheck(shell_scripts())


def test_rendered_entrypoint_is_shellcheck_clean(tmp_path: Path) -> None:
    # The exact bytes the rendered vLLM container runs with /bin/sh -c (POSIX sh).
    command = _container()["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    script = tmp_path / "entrypoint.sh"
    script.write_text("#!/bin/sh\n" + command[2], encoding="utf-8")
    _shellcheck([script], "--shell=sh")
