"""The layers of docs/architecture.md hold, and the check that says so can fail.

``lint-imports`` (import-linter, contracts in pyproject.toml ``[tool.importlinter]``) runs on
the real tree like ruff and mypy do in ``test_static_checks.py``. A check that passes on the
tree proves nothing by itself, so the same check runs on a copy of the package with one
forbidden import added per case and must name the contract that import breaks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operator" / "vllm_operator"

CORE_PURE = (
    "The pure core does no I/O: no kopf, kubernetes, HTTP client, shell, command or test cluster"
)
LAYERS = "The core in layers: api < engine < render, gate < rollout"
TOOLS = "bench and sim, and their commands, are independent of the operator's shell"
COMMANDS_TOP = "The commands are the top: nothing else imports them"
KUBE_BELOW = "The API client is below the handlers: kube imports no handlers"
SHELL_HELPERS = "metrics and election serve the handlers, never the reverse"
FOUNDATION = "errors and booleans are the foundation: they import nothing from the package"
PRODUCT = "Product code never imports the embedded cluster or the demo"
SANDBOX_APART = (
    "The sandbox is a room apart: it imports nothing of the HTTP client, quality, load, page "
    "or runner"
)
HTTP_ALONE = "The HTTP client knows no suite, load, sandbox, page or gate"
QUALITY_NO_LOAD = "The quality suite knows no load sweep, page or runner"
PAGE_NO_RUNNER = "The report page reads reports: it imports nothing of the runner"
CANARY_JUDGE_APART = (
    "The canary is a room: its measurements and judge import nothing of the planner"
)
CONTRACTS = [
    CORE_PURE,
    LAYERS,
    TOOLS,
    COMMANDS_TOP,
    KUBE_BELOW,
    SHELL_HELPERS,
    FOUNDATION,
    PRODUCT,
    SANDBOX_APART,
    HTTP_ALONE,
    QUALITY_NO_LOAD,
    PAGE_NO_RUNNER,
    CANARY_JUDGE_APART,
]


def _lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    found = Path(sys.executable).parent / "lint-imports"
    tool = str(found) if found.exists() else shutil.which("lint-imports")
    if tool is None:
        pytest.fail("lint-imports is not installed: pip install -e '.[test]'")
    env = {**os.environ, "COLUMNS": "500"}  # one line per contract, whatever the terminal
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [tool, "--no-cache", "--no-logo", "pyproject.toml"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_every_contract_is_kept_on_the_tree() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    names = [c["name"] for c in declared["contracts"]]
    assert sorted(names) == sorted(CONTRACTS)
    for name in names:
        assert f"{name} KEPT" in result.stdout, result.stdout


# (file in the package, line appended to it) for each case, and the contract it breaks.
FORBIDDEN: dict[str, tuple[list[tuple[str, str]], str]] = {
    "api imports render": ([("api/crd.py", "from vllm_operator.render import names")], LAYERS),
    "engine imports rollout": ([("engine/version.py", "import vllm_operator.rollout")], LAYERS),
    "render imports gate (siblings)": ([("render/job.py", "import vllm_operator.gate")], LAYERS),
    "gate imports kopf": ([("gate/finding.py", "import kopf")], CORE_PURE),
    "rollout imports the kube client": (
        [("rollout/steps.py", "from vllm_operator.kube import client")],
        CORE_PURE,
    ),
    "core reaches httpx indirectly": (
        [("config.py", "import httpx"), ("render/labels.py", "from vllm_operator import config")],
        CORE_PURE,
    ),
    "api parses arguments": ([("api/crd.py", "import argparse")], CORE_PURE),
    "rollout starts a process": ([("rollout/steps.py", "import subprocess")], CORE_PURE),
    "render opens a socket": ([("render/job.py", "import socket")], CORE_PURE),
    "engine imports a command": (
        [("engine/version.py", "import vllm_operator.commands.render")],
        CORE_PURE,
    ),
    "rollout reads the operator's config": (
        [("rollout/context.py", "from vllm_operator import config")],
        CORE_PURE,
    ),
    "election imports kopf": ([("election.py", "import kopf")], CORE_PURE),
    "bench imports the handlers": ([("bench/stats.py", "import vllm_operator.handlers")], TOOLS),
    "sim imports kopf": ([("sim/noise.py", "import kopf")], TOOLS),
    "the bench command imports kopf": ([("commands/bench.py", "import kopf")], TOOLS),
    "the sim command imports the planner": (
        [("commands/sim.py", "import vllm_operator.rollout")],
        TOOLS,
    ),
    "handlers import a command": (
        [("handlers/queue.py", "from vllm_operator.commands import run")],
        COMMANDS_TOP,
    ),
    "bench imports a command": (
        [("bench/stats.py", "import vllm_operator.commands.judge")],
        COMMANDS_TOP,
    ),
    "kube imports the handlers": (
        [("kube/changes.py", "import vllm_operator.handlers.caches")],
        KUBE_BELOW,
    ),
    "metrics imports the handlers": (
        [("metrics.py", "from vllm_operator.handlers import queue")],
        SHELL_HELPERS,
    ),
    "election imports the kube client": (
        [("election.py", "import vllm_operator.kube.client")],
        SHELL_HELPERS,
    ),
    "errors imports the api": ([("errors.py", "from vllm_operator.api import status")], FOUNDATION),
    "booleans imports config": ([("booleans.py", "import vllm_operator.config")], FOUNDATION),
    "a command imports devcluster": ([("commands/render.py", "import devcluster")], PRODUCT),
    "handlers import the demo": ([("handlers/queue.py", "import vllm_operator_demo")], PRODUCT),
    "the sandbox imports the HTTP client": (
        [("bench/sandbox/exchange.py", "from vllm_operator.bench.http import transport")],
        SANDBOX_APART,
    ),
    "the sandbox child reaches aiohttp": (
        [("bench/sandbox/run.py", "import aiohttp")],
        SANDBOX_APART,
    ),
    "the HTTP client imports the suite": (
        [("bench/http/request.py", "from vllm_operator.bench.quality import suite")],
        HTTP_ALONE,
    ),
    "the HTTP client judges": (
        [("bench/http/sse.py", "import vllm_operator.gate.slo")],
        HTTP_ALONE,
    ),
    "the quality suite imports the load sweep": (
        [("bench/quality/run.py", "import vllm_operator.bench.load.send")],
        QUALITY_NO_LOAD,
    ),
    "the canary's judge imports the planner": (
        [("rollout/canary/analysis.py", "import vllm_operator.rollout.planner")],
        CANARY_JUDGE_APART,
    ),
    "the canary's record imports what the shell reads": (
        [
            ("rollout/canary/record.py", "from vllm_operator.rollout.canary import reads"),
        ],
        CANARY_JUDGE_APART,
    ),
    "the page imports the runner": (
        [("bench/page/charts.py", "from vllm_operator.bench import runner")],
        PAGE_NO_RUNNER,
    ),
    "the page reaches the runner through the report": (
        [("bench/report.py", "import vllm_operator.bench.settle")],
        PAGE_NO_RUNNER,
    ),
}


@pytest.mark.parametrize("case", sorted(FORBIDDEN))
def test_a_forbidden_import_breaks_its_contract(case: str, tmp_path: Path) -> None:
    edits, contract = FORBIDDEN[case]
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src / "vllm_operator", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for relative, line in edits:
        target = src / "vllm_operator" / relative
        assert target.exists(), f"{relative} moved: update the case"
        target.write_text(target.read_text() + f"\n{line}  # added by the test\n")
    result = _lint_imports(tmp_path, pythonpath=src)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert f"{contract} BROKEN" in output, output
    # The report names the copy's offending module, so the copy (not the tree) was linted.
    module = "vllm_operator." + edits[-1][0].removesuffix(".py").replace("/", ".")
    assert module in output, output
