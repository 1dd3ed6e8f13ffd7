"""How README's test command spreads the suite over pytest-xdist workers (issue 44).

Why here: this file sits above both test folders (``tests/`` and ``embedded-cluster/tests/``),
so one plan covers every test the command runs.

README's command runs pytest twice. First every test not marked ``timing``, on
pytest-xdist workers (``-m "not timing" -n auto --dist loadgroup``); then, in one process,
the tests marked ``timing`` (``-m timing``): those whose verdict rests on measured time (a
regression limit, a latency or rate table, a deadline, a silence bound), which on two cores
shared with three other workers measured the other workers' load and failed (issue 44: 6 to
18 of them per parallel run, the stories, HA takeover, bench paired/load/study, twin and
canary tests). Alone, they see the machine their bars were set on. A ``timing`` test run under
xdist all the same (``pytest -n 4`` with no ``-m``) is put in one ``xdist_group("timing")``
below, so at least no two of them run side by side. The two ``-m`` expressions partition
the suite: every test runs in exactly one phase.

Most of the suite's wall time is waiting (simulators, operators, subprocess starts), not
computing, so the command runs more workers than cores (``-n auto`` asks
``pytest_xdist_auto_num_workers`` below). Tests that cannot share the machine with others
carry an ``xdist_group`` mark in their own module (the command's ``--dist loadgroup`` runs a
group's tests one after another in one worker); every other test must be safe beside any
other, as any test may run at the same time as any other:

- ports: bind port 0 (or ask the OS for a free one), never a fixed port;
- files: ``tmp_path``/``tmp_path_factory``, never a fixed path, never a file in the checkout
  that another test reads (writes under the checkout go to a temporary copy);
- names: anything global to the machine (a tmux server, a process title, a lock, an
  environment variable of a child) carries a name of its own (``uuid4``), never a constant;
- processes: kill only the processes the test started (by pid or its own process group),
  never by name or uid; code run as ``nobody`` by the sandbox counts against that uid's
  process limit, so the modules that run hostile code as ``nobody`` (fork, signals,
  victims of that uid) are ``xdist_group("sandbox")``;
- time: wait on a condition with a generous deadline, never a fixed sleep or a tight bound on
  wall time (a worker shares the cores with three others and what they start); a test whose
  verdict is a measured time (not a bound on a wait) is marked ``timing``;
- state: no module-level state another test relies on; a costly fixture shared by a module
  (``scope="module"``) is best kept in one worker with an ``xdist_group`` of the module.

The order matters on few cores: a long test started last is the run's tail. The collection
order is the schedule (``pytest_configure`` turns off xdist's own reordering of groups by
size), and it puts the longest first: the ruff and mypy runs of ``test_static_checks``, then
the groups (each runs its tests one after another), then tests marked ``slow``, then
integration tests (they wait on processes), then the rest.

On two cores the first phase is CPU-bound (about 1,050 CPU seconds in 9.5 minutes), so only
less CPU makes it faster: ``benchmarks/suite_cpu.py`` (a plugin, ``PYTHONPATH=benchmarks
pytest -p suite_cpu``, and a report) says where it goes, per test and per module, child
processes included.
"""

from __future__ import annotations

import os

import pytest

WORKERS_PER_CORE = 2
"""Most tests wait more than they compute: two workers per core keep both cores busy."""
MAX_WORKERS = 12
"""Each worker and the processes its tests start take memory; more gains nothing here."""


def auto_workers(cores: int) -> int:
    """Workers for ``-n auto`` on a machine with ``cores`` usable cores."""
    return max(2, min(MAX_WORKERS, WORKERS_PER_CORE * cores))


@pytest.hookimpl(optionalhook=True)  # an xdist hook: pytest -p no:xdist runs all the same
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    del config
    return auto_workers(len(os.sched_getaffinity(0)))


def pytest_configure(config: pytest.Config) -> None:
    # xdist's loadgroup hands groups out largest first, before every single test; with this
    # off it follows the collection order, which start_rank sets.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def start_rank(item: pytest.Item) -> int:
    """Where a test goes in the run: lower starts earlier (see the module docstring)."""
    path = item.path.as_posix()
    if path.endswith("tests/unit/test_static_checks.py"):
        return 0
    if item.get_closest_marker("xdist_group") is not None:
        return 1
    if item.get_closest_marker("slow") is not None:
        return 2
    if "/tests/integration/" in path or "/embedded-cluster/tests/" in path:
        return 3
    return 4


TIMING_GROUP = "timing"
"""The xdist group of ``timing`` tests when they run under xdist at all (not README's way)."""


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    for item in items:
        if item.get_closest_marker("timing") is not None:
            item.add_marker(pytest.mark.xdist_group(TIMING_GROUP))
    items.sort(key=start_rank)  # stable: within a rank, collection order is kept
