"""Where the test suite's CPU goes: CPU seconds per test and per module (issue 44).

README's first test phase is CPU-bound on two cores (about 1,050 CPU seconds for 9.5 minutes
of wall time), so only less CPU makes it faster, and the machine it is measured on is shared:
CPU seconds, unlike wall time, barely change with the load beside the run.

Two uses, one file:

- a pytest plugin: ``PYTHONPATH=benchmarks pytest -p suite_cpu ...`` (xdist workers load it
  too) writes, for every test, the CPU its worker spent on it (setup, call and teardown:
  ``RUSAGE_SELF``, threads included) and the CPU of the child processes that ended and were
  waited for meanwhile (``RUSAGE_CHILDREN``: simulators, kubectl, spawned interpreters, the
  sandbox, mypy, ruff, Chromium) to one JSON line per test in ``$SUITE_CPU_DIR/<worker>.jsonl``.
  A child started by a module-scoped fixture counts when it ends, at the module's last test:
  per module the sum is right. Grandchildren re-parented to init (daemons that detach) are
  not seen: the run's total beside the sum shows how much that leaves out.
- a report: ``python benchmarks/suite_cpu.py DIR [--top 30] [--before OTHER_DIR]`` prints the
  top modules by CPU seconds (and the change from a run ``--before`` it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ENV = "SUITE_CPU_DIR"


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    del nextitem
    folder = os.environ.get(ENV)
    if not folder:
        yield
        return
    self0, kids0 = _cpu()
    wall0 = time.monotonic()
    yield
    self1, kids1 = _cpu()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    line = {
        "test": item.nodeid,
        "module": item.nodeid.split("::", 1)[0],
        "self": round(self1 - self0, 3),
        "children": round(kids1 - kids0, 3),
        "wall": round(time.monotonic() - wall0, 3),
    }
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / f"{worker}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def per_module(folder: Path) -> dict[str, dict[str, float]]:
    """CPU seconds (self, children, total), wall seconds and test count per module."""
    sums: dict[str, dict[str, float]] = defaultdict(
        lambda: {"self": 0.0, "children": 0.0, "cpu": 0.0, "wall": 0.0, "tests": 0.0}
    )
    for path in sorted(folder.glob("*.jsonl")):
        for raw in path.read_text(encoding="utf-8").splitlines():
            rec: dict[str, Any] = json.loads(raw)
            row = sums[rec["module"]]
            row["self"] += rec["self"]
            row["children"] += rec["children"]
            row["cpu"] += rec["self"] + rec["children"]
            row["wall"] += rec["wall"]
            row["tests"] += 1
    return dict(sums)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the SUITE_CPU_DIR of a run")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--before", type=Path, help="an earlier run's folder, to compare")
    args = parser.parse_args()
    now = per_module(args.folder)
    before = per_module(args.before) if args.before else {}
    total = sum(r["cpu"] for r in now.values())
    print(
        f"{len(now)} modules, {sum(r['tests'] for r in now.values()):.0f} tests, {total:.1f} CPU s"
    )
    if before:
        print(f"before: {sum(r['cpu'] for r in before.values()):.1f} CPU s")
    head = f"{'CPU s':>8} {'self':>7} {'child':>7} {'tests':>5}"
    print(head + ("  before" if before else "") + "  module")
    for module, row in sorted(now.items(), key=lambda kv: -kv[1]["cpu"])[: args.top]:
        old = before.get(module, {}).get("cpu")
        was = f"  {old:6.1f}" if old is not None else ("       -" if before else "")
        print(
            f"{row['cpu']:8.1f} {row['self']:7.1f} {row['children']:7.1f} {row['tests']:5.0f}"
            f"{was}  {module}"
        )


if __name__ == "__main__":
    main()
