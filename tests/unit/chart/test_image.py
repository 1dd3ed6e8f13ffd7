"""The Dockerfile, checked by reading (no container engine here) and by running its shim.

What must hold: two stages, nothing but the virtualenv copied into the final one, a numeric
non-root USER, `vllm-operator` as the entrypoint, the build context limited by
.dockerignore, and a `vllm` shim that turns `vllm serve ARGS` into `vllm-operator sim ARGS`
with every argument intact. The image (and any `pip install .` of the operator) carries no
embedded cluster: neither the devcluster distribution nor kmock is among its dependencies or
in its build context, and no operator module imports them (`hack/image-test.sh` also looks
for them in the built image).
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = (ROOT / "operator" / "Dockerfile").read_text(encoding="utf-8")


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", DOCKERFILE)
    result = []
    for line in joined.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions():
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def test_two_stages_and_a_clean_final_stage() -> None:
    build, final = _stages()
    assert build[0][1].endswith("AS build")
    final_text = " ".join(args for _, args in final)
    for tool in ("apt-get", "gcc", "build-essential", "pip install", "apk add"):
        assert tool not in final_text, tool
    copies = [args for kind, args in final if kind == "COPY"]
    assert copies == ["--from=build /opt/vllm-operator /opt/vllm-operator"]


def test_runs_as_numeric_non_root_user_with_the_cli_entrypoint() -> None:
    final = _stages()[-1]
    (user,) = [args for kind, args in final if kind == "USER"]
    uid, _, gid = user.partition(":")
    assert int(uid) > 0
    assert int(gid) > 0
    assert [kind for kind, _ in final][-2:] == ["ENTRYPOINT", "CMD"]
    assert dict(final)["ENTRYPOINT"] == '["vllm-operator"]'
    assert "python:3.11-slim" in DOCKERFILE


def test_dockerignore_sends_only_what_the_build_needs() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    allowed = {line[1:] for line in lines if line.startswith("!")}
    assert {"pyproject.toml", "README.md", "operator/"} <= allowed
    copied = {args.split()[0] for kind, args in _stages()[0] if kind == "COPY"}
    copied |= {part for kind, args in _stages()[0] if kind == "COPY" for part in args.split()[:-1]}
    for source in copied:
        assert source in allowed, source


def _shim_text() -> str:
    match = re.search(r"printf '%s\\n' \\\n(.*?)> /opt/vllm-operator/bin/vllm", DOCKERFILE, re.S)
    assert match, "the shim is written with printf in the build stage"
    lines = shlex.split(match.group(1).replace("\\\n", " "))
    return "\n".join(lines) + "\n"


def test_vllm_shim_runs_the_simulator_with_every_argument(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "vllm"
    shim.write_text(_shim_text(), encoding="utf-8")
    shim.chmod(0o755)
    fake_cli = bin_dir / "vllm-operator"
    fake_cli.write_text('#!/bin/sh\nfor a in "$@"; do printf "<%s>" "$a"; done\n', "utf-8")
    fake_cli.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    argv = ["vllm", "serve", "Qwen/Qwen3 x", "--port", "8000", "--served-model-name", "a;b $c"]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    assert out == "<sim><Qwen/Qwen3 x><--port><8000><--served-model-name><a;b $c>"


# The embedded cluster's distribution, its packages and what only it needs.
TEST_CLUSTER_DISTS = {"kmock", "vllm-operator-devcluster"}
TEST_CLUSTER_MODULES = {"devcluster", "kmock", "vllm_operator_demo"}


def _dist_name(requirement: str) -> str:
    name = re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0]
    return name.lower().replace("_", "-")


def test_the_operator_distribution_depends_on_no_test_cluster() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = list(project["dependencies"])
    declared += [r for extra in project["optional-dependencies"].values() for r in extra]
    assert {_dist_name(r) for r in declared} & TEST_CLUSTER_DISTS == set()
    # What pip resolves for `pip install .` (this checkout's installed metadata).
    installed = importlib.metadata.requires("vllm-operator") or []
    runtime = {_dist_name(r) for r in installed if "extra ==" not in r}
    assert "kopf" in runtime  # the metadata was read, not an empty list
    assert runtime & TEST_CLUSTER_DISTS == set()
    assert _dist_name("kmock==0.8") == "kmock"
    assert _dist_name("vllm_operator_devcluster[x]>=1") == "vllm-operator-devcluster"


def test_the_build_context_and_package_leave_the_test_cluster_out() -> None:
    allowed = {
        line.strip()[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip().startswith("!")
    }
    assert "embedded-cluster" not in allowed
    assert all(not a.startswith("embedded-cluster") for a in allowed)
    joined = re.sub(r"\\\n", " ", DOCKERFILE)
    installs = re.findall(r"/opt/vllm-operator/bin/pip install ([^&\n]*)", joined)
    assert [i.strip() for i in installs] == ["."]  # the operator alone, no extras
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]
    assert setuptools["packages"]["find"] == {"where": ["operator"], "include": ["vllm_operator*"]}
    packages = {p.name for p in (ROOT / "operator").iterdir() if (p / "__init__.py").exists()}
    assert packages == {"vllm_operator"}


def test_no_operator_module_imports_the_test_cluster() -> None:
    sources = sorted((ROOT / "operator" / "vllm_operator").rglob("*.py"))
    assert len(sources) > 50
    offenders = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [
                f"{path.relative_to(ROOT)}: {n}"
                for n in names
                if n.split(".")[0] in TEST_CLUSTER_MODULES
            ]
    assert offenders == []
