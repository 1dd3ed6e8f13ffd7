"""README's test command runs the suite on pytest-xdist workers, longest tests first, then
the ``timing`` tests alone (issue 44).

The plan lives in the root ``conftest.py``; these tests hold what it promises: README and
``.ci/run`` run the same two pytest calls, whose ``-m`` expressions split the suite in two
with no test in both or neither, the second on no workers; ``-n auto`` sizes the workers for
a machine whose tests mostly wait, and the collection starts with the tests that would
otherwise be the run's tail (ruff and mypy, then ``slow`` ones, then integration tests).
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _plan() -> ModuleType:
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _readme_command() -> str:
    found = re.search(
        r"<!-- test-command:begin -->\n```sh\n(.*?)\n```\n<!-- test-command:end -->", README, re.S
    )
    assert found, "README has no test-command block"
    return found.group(1).strip()


def _pytest_calls(command: str) -> list[list[str]]:
    """The arguments of each ``.venv/bin/python -m pytest`` call of ``command``."""
    calls = [shlex.split(part) for part in command.split(" && ")]
    return [call[3:] for call in calls if call[:3] == [".venv/bin/python", "-m", "pytest"]]


def test_readme_and_ci_run_the_same_two_phase_command() -> None:
    command = _readme_command()
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command in ci_lines
    assert command.split(" && ")[-1].startswith(".venv/bin/python -m pytest")
    parallel, alone = _pytest_calls(command)
    assert parallel[parallel.index("-m") + 1] == "not timing"
    assert parallel[parallel.index("-n") + 1] == "auto"
    assert parallel[parallel.index("--dist") + 1] == "loadgroup"  # xdist_group marks hold
    assert alone == ["-m", "timing"]  # no -n: one process, one test at a time


def test_every_test_is_in_exactly_one_phase() -> None:
    """The two calls' ``-m`` expressions, applied to modules with and without ``timing``
    tests (whole modules and single tests marked), select each test exactly once."""
    files = [
        "tests/integration/rollout/test_rollout.py",  # one test of the module is timing
        "tests/integration/bench/test_bench_paired_sim.py",  # the whole module
        "tests/unit/test_cli_help.py",  # none
    ]

    def collected(*args: str) -> list[str]:
        listed = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert listed.returncode == 0, listed.stdout + listed.stderr
        return [line for line in listed.stdout.splitlines() if "::" in line]

    everything = collected(*files)
    parallel, alone = (
        call[call.index("-m") : call.index("-m") + 2] for call in _pytest_calls(_readme_command())
    )
    first, second = collected(*parallel, *files), collected(*alone, *files)
    assert first
    assert second
    assert not set(first) & set(second)
    assert sorted(first + second) == sorted(everything)
    assert "tests/integration/rollout/test_rollout.py::test_published_upgrade_story" in second
    assert all("test_bench_paired_sim" in test for test in second if "bench" in test)


@pytest.mark.timing
def test_a_timing_test_under_xdist_joins_the_timing_group(request: pytest.FixtureRequest) -> None:
    """Run under xdist all the same (``pytest -n 4``, no ``-m``), the ``timing`` tests share one
    group: no two of them side by side."""
    group = request.node.get_closest_marker("xdist_group")
    assert group is not None
    assert group.args == ("timing",)
    if getattr(request.config.option, "loadgroup", False):  # in a loadgroup worker
        assert request.node.nodeid.endswith("@timing"), request.node.nodeid


def test_the_benchmark_reads_the_same_command() -> None:
    spec = importlib.util.spec_from_file_location(
        "suite_wall_time", ROOT / "benchmarks" / "suite_wall_time.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.readme_command(ROOT / "README.md") == _readme_command()
    # each phase writes its own JUnit report: the outcomes and the slowest tests are of both
    command, reports = module.with_reports(_readme_command(), Path("/r"))
    assert reports == [Path("/r/junit-2.xml"), Path("/r/junit-3.xml")]
    parallel, alone = _pytest_calls(command)
    assert parallel[-1] == alone[-1].replace("3", "2") == "--junitxml=/r/junit-2.xml"


def test_auto_workers_wait_more_than_they_compute() -> None:
    plan = _plan()
    assert [plan.auto_workers(cores) for cores in (1, 2, 4)] == [2, 4, 8]
    assert plan.auto_workers(64) == plan.MAX_WORKERS  # memory, not cores, bounds a big machine


def test_the_tail_of_a_serial_run_is_collected_first() -> None:
    """Given in the opposite order, the collection puts ruff and mypy first, then groups,
    then ``slow`` tests, then integration tests, then unit tests."""
    files = [
        "tests/unit/test_cli_help.py",
        "tests/integration/sim/test_sim_startup.py",
        "tests/integration/bench/test_readme_laptop.py",
        "tests/unit/gate/test_gate_noise_model.py",
        "tests/unit/test_static_checks.py",
    ]
    listed = subprocess.run(
        # without xdist: the order is the conftest's own, and its xdist hook must not break it
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    order = [line.split("::", 1)[0] for line in listed.stdout.splitlines() if "::" in line]
    firsts = [path for n, path in enumerate(order) if path not in order[:n]]
    assert firsts == list(reversed(files)), order
    ruff_and_mypy = [line for line in listed.stdout.splitlines() if "static_checks" in line]
    assert listed.stdout.splitlines()[: len(ruff_and_mypy)] == ruff_and_mypy


def test_xdist_follows_the_collection_order(pytestconfig: pytest.Config) -> None:
    """Groups are not moved ahead of ruff and mypy by their size: the order above holds."""
    if not pytestconfig.pluginmanager.hasplugin("xdist"):
        pytest.skip("pytest-xdist is not loaded (-p no:xdist): there is no schedule to check")
    assert pytestconfig.option.loadscopereorder is False


@pytest.mark.xdist_group("xdist-check")
def test_xdist_groups_hold_on_this_pytest(request: pytest.FixtureRequest) -> None:
    """pytest-xdist's loadgroup tells the controller a test's group by appending ``@group`` to
    its node id in the worker; pytest 9.2 ignores that write (pytest-xdist#1386), and every
    group is then silently spread over all workers. pyproject.toml pins pytest below 9.2."""
    item = request.node
    before = item.nodeid
    if getattr(request.config.option, "loadgroup", False):  # in a loadgroup worker
        assert before.endswith("@xdist-check"), before
    try:
        item._nodeid = f"{before}@probe"
        assert item.nodeid == f"{before}@probe", "this pytest ignores xdist's group suffix"
    finally:
        item._nodeid = before
