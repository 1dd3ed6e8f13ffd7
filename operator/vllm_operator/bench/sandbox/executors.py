"""Where a python-tests check runs the model's code, seen from bench: never in bench.

Code in a model's answer is written by the side being measured, so it must not be able to
read bench's key, signal bench, write bench's summary or reach the network. Bench therefore
never runs it in its own process or as a plain child with its own identity. Three
executors, chosen once from the command line:

- ``Refused`` (the default): nothing runs; the check is reported as refused (not run), with
  how to enable it. A refused check never passes, and in a gated run it is a measurement
  fault (``code_refused``): the verdict is Error, never Passed.
- ``ExchangeSandbox`` (``--sandbox-dir``, what the benchmark Job uses): the code is handed
  to the sandbox container of the Job pod through a shared directory and its answer read
  back (``bench.sandbox.exchange``, run by ``vllm-operator sandbox serve``). No answer in
  time is a not-run result, not a failure.
- ``LocalSandbox`` (``--allow-code-execution``, for a laptop): a helper process
  (``vllm-operator sandbox run-one``) per test, with the same child limits, audit hook and
  kill of leftovers, but the user's own uid and network namespace: weaker, documented so.
  Bench makes itself non-dumpable first, so same-uid code cannot read its ``/proc`` files.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from vllm_operator.bench.sandbox.exchange import (
    READY_FILE,
    RESULT_BYTES,
    read_bounded,
    write_new,
)
from vllm_operator.bench.sandbox.run import Call, RunResult, set_nondumpable

REFUSED_HINT = (
    "python-tests refused: bench does not run code from a server's answers unless asked; "
    "rerun with --allow-code-execution (local sandbox, weaker) or --sandbox-dir DIR (the "
    "benchmark Job's sandbox container)"
)
READY_WAIT_SECONDS = 30.0
"""How long bench waits for the sandbox container to announce itself (first test only)."""
ANSWER_GRACE_SECONDS = 10.0
"""Pick-up and start-up time the sandbox gets on top of a test's own time limit."""


class Executor(Protocol):
    """Runs one answer's code and calls somewhere that is not bench; gives back outputs."""

    async def run(self, code: str, calls: Sequence[Call], *, limit_seconds: float) -> RunResult:
        """What each call returned or raised; the caller compares them (no verdict here)."""


class Refused:
    """No code execution: every python-tests check is refused with ``reason``."""

    def __init__(self, reason: str = REFUSED_HINT) -> None:
        self.reason = reason

    async def run(self, code: str, calls: Sequence[Call], *, limit_seconds: float) -> RunResult:
        return RunResult(False, self.reason)


def _job(code: str, calls: Sequence[Call], limit_seconds: float) -> bytes:
    job = {"code": code, "calls": [c.to_json() for c in calls], "limit_seconds": limit_seconds}
    return json.dumps(job).encode()


class ExchangeSandbox:
    """The Job pod's sandbox container, reached through the shared exchange directory."""

    def __init__(self, directory: Path, *, ready_wait: float = READY_WAIT_SECONDS) -> None:
        self.directory = directory
        self.ready_wait = ready_wait
        self._ready: bool | None = None

    async def _wait_ready(self) -> bool:
        if self._ready is None:
            ends = time.monotonic() + self.ready_wait
            # Polling: the file comes from another container; no event crosses to bench.
            while not (self.directory / READY_FILE).exists() and time.monotonic() < ends:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            self._ready = (self.directory / READY_FILE).exists()
        return self._ready

    async def run(self, code: str, calls: Sequence[Call], *, limit_seconds: float) -> RunResult:
        if not await self._wait_ready():
            return RunResult(
                False,
                f"python-tests refused: no sandbox answers in {self.directory} "
                f"(its container did not start within {self.ready_wait:g} s)",
            )
        token = secrets.token_hex(16)
        request = self.directory / f"req-{token}.json"
        answer = self.directory / f"res-{token}.json"
        if not write_new(request, _job(code, calls, limit_seconds)):
            return RunResult(False, f"cannot write a job into {self.directory}")
        ends = time.monotonic() + limit_seconds + ANSWER_GRACE_SECONDS
        try:
            while time.monotonic() < ends:
                data = read_bounded(answer, RESULT_BYTES)
                if data is not None:
                    return _parse(data)
                await asyncio.sleep(0.02)
        finally:
            for path in (request, answer):
                with contextlib.suppress(OSError):
                    path.unlink()
        return RunResult(
            False,
            f"the sandbox did not answer within {limit_seconds + ANSWER_GRACE_SECONDS:g} s",
        )


class LocalSandbox:
    """A helper process per test on this machine (``--allow-code-execution``)."""

    def __init__(self, scratch_root: Path | None = None) -> None:
        self.scratch_root = scratch_root or Path(tempfile.gettempdir())
        set_nondumpable()  # bench itself: same-uid code cannot read /proc/<bench>/environ

    async def run(self, code: str, calls: Sequence[Call], *, limit_seconds: float) -> RunResult:
        scratch = Path(tempfile.mkdtemp(prefix="bench-sandbox-", dir=self.scratch_root))
        if os.geteuid() == 0:
            os.chmod(scratch, 0o711)  # the code runs as nobody: its path must work
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-m",
            "vllm_operator.commands",  # `vllm-operator sandbox run-one`, as the docstring says
            "sandbox",
            "run-one",
            "--scratch",
            str(scratch),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={"PATH": os.defpath, "LANG": "C.UTF-8"},
        )
        try:
            assert proc.stdin is not None
            assert proc.stdout is not None
            proc.stdin.write(_job(code, calls, limit_seconds))
            await proc.stdin.drain()
            proc.stdin.close()
            data = await asyncio.wait_for(
                _read_to_end(proc.stdout, RESULT_BYTES + 1), limit_seconds + ANSWER_GRACE_SECONDS
            )
            await asyncio.wait_for(proc.wait(), ANSWER_GRACE_SECONDS)
        except TimeoutError:
            return RunResult(False, "the local sandbox did not answer in time")
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
            with contextlib.suppress(OSError):
                os.rmdir(scratch)
        if len(data) > RESULT_BYTES:
            return RunResult(False, "the local sandbox answered too much")
        return _parse(data)


async def _read_to_end(stream: asyncio.StreamReader, limit: int) -> bytes:
    """Everything up to EOF, but never more than ``limit`` bytes."""
    data = b""
    while len(data) < limit:
        piece = await stream.read(limit - len(data))
        if not piece:
            break
        data += piece
    return data


def _parse(data: bytes) -> RunResult:
    try:
        return RunResult.from_json(json.loads(data))
    except (ValueError, RecursionError):
        return RunResult(False, "the sandbox answered something that is not JSON")


def executor_for(*, allow_code_execution: bool, sandbox_dir: str | None) -> Executor:
    """The executor the command line asked for (``Refused`` unless one was)."""
    if sandbox_dir:
        return ExchangeSandbox(Path(sandbox_dir))
    if allow_code_execution:
        return LocalSandbox()
    return Refused()
