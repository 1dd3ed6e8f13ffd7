"""Run model-written Python against test cases, in a separate, limited process.

Generated code is untrusted: it may loop forever, allocate without bound, fork, or write
files. It never runs in the benchmark's process. Each run gets a fresh interpreter in
isolated mode (``sys.executable -I``: no user site, no ``PYTHON*`` variables, no current
directory on ``sys.path``), an empty temporary working directory, a minimal environment,
CPU-time, memory, file-size and process-count limits set by the child on itself before the
code is loaded, and a wall-clock timeout after which the whole process group is killed.
This is containment for honest mistakes, not a security boundary against a hostile model;
the benchmark Job's pod (non-root, no service account token) is the outer wall.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

_HARNESS = r"""
import resource, sys
def limit(which, value):
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        pass
limit(resource.RLIMIT_CPU, {cpu})
limit(resource.RLIMIT_AS, {memory})
limit(resource.RLIMIT_FSIZE, 1 << 20)
limit(resource.RLIMIT_NPROC, 64)
ns = {{"__name__": "__main__"}}
solution = open("solution.py", encoding="utf-8").read()
tests = open("tests.py", encoding="utf-8").read()
try:
    exec(compile(solution, "solution.py", "exec"), ns)
except BaseException as exc:
    print(f"solution failed to load: {{type(exc).__name__}}: {{exc}}", file=sys.stderr)
    sys.exit(3)
exec(compile(tests, "tests.py", "exec"), ns)
print("{marker}")
"""


@dataclass(frozen=True)
class RunResult:
    """How a run ended: passed, or why not (with the tail of its output)."""

    passed: bool
    detail: str


async def run_tests(
    code: str, tests: str, *, limit_seconds: float = 10.0, memory_mb: int = 512
) -> RunResult:
    """Execute ``code`` then ``tests`` (plain asserts) in a limited child interpreter."""
    with tempfile.TemporaryDirectory(prefix="bench-pytests-") as tmp:
        root = Path(tmp)
        (root / "solution.py").write_text(code, encoding="utf-8")
        (root / "tests.py").write_text(tests, encoding="utf-8")
        marker = f"ALL TESTS PASSED {secrets.token_hex(8)}"
        harness = _HARNESS.format(
            cpu=max(1, int(limit_seconds) + 1), memory=memory_mb << 20, marker=marker
        )
        (root / "harness.py").write_text(harness, encoding="utf-8")
        env = {"PATH": os.defpath, "LANG": "C.UTF-8", "HOME": tmp}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "harness.py",
            cwd=tmp,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), limit_seconds)
        except TimeoutError:
            _kill_group(proc)
            await proc.wait()
            return RunResult(False, f"timed out after {limit_seconds:g} s")
        finally:
            if proc.returncode is None:
                _kill_group(proc)
                with contextlib.suppress(ProcessLookupError):
                    await proc.wait()
    text = (out + err).decode("utf-8", "replace").strip()
    tail = text[-400:]
    if proc.returncode == 0 and marker in text:
        return RunResult(True, "all test cases passed")
    return RunResult(False, f"exit {proc.returncode}: {tail}")


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
