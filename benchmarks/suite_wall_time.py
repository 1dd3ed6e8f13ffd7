"""Wall, user and system time of README's test command, and its ten slowest tests (issue 44).

Target: at most 10 minutes of wall time on a quiet 2-core machine, at most 20 with two busy
loops beside it (``--busy-loops 2``). The command is read from README (the block between
``<!-- test-command:begin -->`` and ``<!-- test-command:end -->``, the one ``.ci/run``
runs), so the figures are always those of the command people type. By default it runs on a
fresh clone of this checkout's HEAD in a temporary directory (venv and install included, as
a new user would); ``--here`` runs it in this checkout instead (uncommitted changes included,
the existing ``.venv`` reused). Only a JUnit XML report is added to each pytest call of the
command (the parallel phase and the ``timing`` phase), to find the slowest tests and count the
outcomes; it changes nothing that runs.

User and system time are those of every process the command started (``RUSAGE_CHILDREN``),
the load average before and after says how busy the machine was. Figures are appended to
``benchmarks/results/suite_wall_time.json`` (one entry per run).

Run: ``.venv/bin/python benchmarks/suite_wall_time.py [--here] [--busy-loops 2] [--runs 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "suite_wall_time.json"
QUIET_TARGET_SECONDS = 600.0
BUSY_TARGET_SECONDS = 1200.0
BUSY_LOOP = "while True: pass"


def readme_command(readme: Path) -> str:
    """The test command as README shows it (one line; must end in a pytest call)."""
    text = readme.read_text(encoding="utf-8")
    found = re.search(
        r"<!-- test-command:begin -->\n```sh\n(.*?)\n```\n<!-- test-command:end -->", text, re.S
    )
    if found is None:
        raise SystemExit(f"{readme}: no test-command block (<!-- test-command:begin -->)")
    command = found.group(1).strip()
    if "\n" in command or "-m pytest" not in command.rsplit("&&", 1)[-1]:
        raise SystemExit(f"{readme}: the test command is not one line ending in a pytest call")
    return command


def with_reports(command: str, reports: Path) -> tuple[str, list[Path]]:
    """``command`` with a JUnit XML report added to each of its pytest calls, and the reports."""
    parts = command.split(" && ")
    paths: list[Path] = []
    for n, part in enumerate(parts):
        if "-m pytest" in part:
            paths.append(reports / f"junit-{n}.xml")
            parts[n] = f"{part} --junitxml={paths[-1]}"
    return " && ".join(parts), paths


def slowest(
    junits: list[Path], count: int = 10
) -> tuple[dict[str, int], list[dict[str, Any]], list[str]]:
    """Outcome counts, the ``count`` slowest tests (setup, call and teardown) and the failed
    tests of the reports."""
    outcomes = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    times: list[dict[str, Any]] = []
    failed: list[str] = []
    cases = [case for junit in junits for case in ET.parse(junit).getroot().iter("testcase")]
    for case in cases:
        kinds = {child.tag for child in case}
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if "failure" in kinds:
            outcomes["failed"] += 1
            failed.append(name)
        elif "error" in kinds:
            outcomes["error"] += 1
            failed.append(name)
        elif "skipped" in kinds:
            outcomes["skipped"] += 1
        else:
            outcomes["passed"] += 1
        times.append({"test": name, "seconds": round(float(case.get("time", "0")), 1)})
    times.sort(key=lambda t: -float(t["seconds"]))
    return outcomes, times[:count], failed


def phase_seconds(junit: Path) -> float:
    """Wall time of one pytest call, as its report gives it."""
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    return round(float(suite.get("time", "0")), 1) if suite is not None else 0.0


def fresh_clone(into: Path) -> Path:
    """A clone of this checkout's HEAD, as a new user would have it."""
    clone = into / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    return clone


def run_once(command: str, cwd: Path, reports: Path, busy_loops: int) -> dict[str, Any]:
    command, junits = with_reports(command, reports)
    loops = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(busy_loops)]
    try:
        load_before = os.getloadavg()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        proc = subprocess.run(["bash", "-c", command], cwd=cwd, check=False)
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_after = os.getloadavg()
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    written = [junit for junit in junits if junit.exists()]
    outcomes, top, failed = slowest(written)
    target = BUSY_TARGET_SECONDS if busy_loops else QUIET_TARGET_SECONDS
    return {
        "exit_code": proc.returncode,
        "wall_seconds": round(wall, 1),
        "pytest_call_seconds": [phase_seconds(junit) for junit in written],
        "user_seconds": round(after.ru_utime - before.ru_utime, 1),
        "system_seconds": round(after.ru_stime - before.ru_stime, 1),
        "busy_loops": busy_loops,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "cpus": len(os.sched_getaffinity(0)),
        "outcomes": outcomes,
        "target_seconds": target,
        "within_target": wall <= target,
        "slowest_tests": top,
        "failed_tests": failed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--here", action="store_true", help="run in this checkout, no clone")
    parser.add_argument("--busy-loops", type=int, default=0, help="CPU-bound loops beside it")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    command = readme_command(ROOT / "README.md")
    runs: list[dict[str, Any]] = []
    for n in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="suite-wall-time-") as tmp:
            cwd = ROOT if args.here else fresh_clone(Path(tmp))
            result = run_once(command, cwd, Path(tmp), args.busy_loops)
        result = {
            "command": command,
            "tree": "this checkout" if args.here else "fresh clone of HEAD",
            "run": n + 1,
            **result,
        }
        runs.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "slowest_tests"}, indent=2))
        print("ten slowest tests:")
        for entry in result["slowest_tests"]:
            print(f"  {entry['seconds']:7.1f} s  {entry['test']}")
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps([*previous, *runs], indent=2) + "\n")
    ok = all(r["exit_code"] == 0 and r["within_target"] for r in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
