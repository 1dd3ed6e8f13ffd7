"""Generated code runs in a limited child process, never in the benchmark's."""

from __future__ import annotations

import os
import sys

from vllm_operator.bench.pyexec import run_tests


async def test_code_runs_in_another_isolated_process() -> None:
    code = "import os, sys\nPID = os.getpid()\nFLAGS = sys.flags.isolated\nCWD = os.getcwd()"
    tests = f"assert PID != {os.getpid()}\nassert FLAGS == 1\nassert 'bench-pytests-' in CWD"
    result = await run_tests(code, tests)
    assert result.passed, result.detail


async def test_environment_is_not_inherited() -> None:
    os.environ.setdefault("BENCH_SECRET_FOR_TEST", "x")
    result = await run_tests("import os", "assert 'BENCH_SECRET_FOR_TEST' not in os.environ")
    assert result.passed, result.detail


async def test_memory_limit_stops_a_runaway_allocation() -> None:
    result = await run_tests("x = bytearray(2 * 1024 ** 3)", "assert True", memory_mb=256)
    assert not result.passed
    assert "MemoryError" in result.detail


async def test_timeout_kills_the_process_group() -> None:
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "time.sleep(60)"
    )
    result = await run_tests(code, "assert True", limit_seconds=1.0)
    assert not result.passed
    assert result.detail == "timed out after 1 s"


async def test_failing_assertion_reports_its_line() -> None:
    result = await run_tests("def f():\n    return 1", "assert f() == 1\nassert f() == 2, 'two'")
    assert not result.passed
    assert "AssertionError: two" in result.detail
    assert sys.executable  # the child used the same interpreter
