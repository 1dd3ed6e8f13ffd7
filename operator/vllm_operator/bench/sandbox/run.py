"""Run one answer's code against its tests, then kill everything the run left behind.

This runs in a process of its own, never in the benchmark's: in the cluster it is the
sandbox container of the benchmark Job pod (``vllm-operator sandbox serve``, see
``bench.sandbox.exchange``), on a laptop a helper process bench starts for each test when the
user passed ``--allow-code-execution``. Each run:

1. gets a fresh scratch directory under the scratch root (a size-limited volume in the
   cluster) and a minimal environment (no secrets: nothing of bench's environment);
2. starts ``child`` (``python -I -B``) in its own session; the child lowers its
   rlimits, drops root if it has it (to ``RUN_AS``, which owns the scratch directory),
   applies the kernel's limits to itself (Landlock and a seccomp allow list, see
   ``kernel``) and installs its audit hook before compiling the model's code; where
   the kernel cannot enforce its limits the code is not run (a not-run result); its output goes
   to a file capped by ``RLIMIT_FSIZE``, so output cannot grow this process's memory, and
   ``RLIMIT_NPROC`` allows only a few processes beyond what its uid already runs;
3. waits at most the test's time limit, measuring the scratch directory meanwhile (every
   ``scratch.POLL_SECONDS``: past ``scratch.WRITE_BUDGET_BYTES`` on disk, ``MAX_ENTRIES``
   names or ``MAX_DEPTH`` levels the child is stopped and the check fails, as it does when
   the directory is over the budget once the child has exited), then kills the child's
   process group and every process that is left: with PID 1 of its own PID namespace (the
   sidecar container), ``kill(-1)`` reaches everything else in the namespace; otherwise this
   process is a child subreaper (``PR_SET_CHILD_SUBREAPER``), so a double fork + ``setsid``
   still leaves the escapee among its descendants, which are found in ``/proc`` and killed
   until none remain. Only then is the scratch directory removed (``scratch.remove_tree``: any mode,
   any depth, never raising); a run whose directory cannot be removed fails.

This process also makes itself non-dumpable, so code running as the same uid can neither
ptrace it nor read its ``/proc/<pid>/`` files.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from vllm_operator.bench.sandbox.scratch import POLL_SECONDS, measure, remove_tree

CHILD = Path(__file__).with_name("child.py")
KERNEL_REFUSED = 4
"""``child.KERNEL_REFUSED``: the child did not run the code (no kernel limits)."""
REFUSED_PREFIX = "sandbox: not run: "
"""``child.REFUSED_PREFIX``, the first line of such a child's output."""
MAX_CODE_BYTES = 256 * 1024
"""Code plus tests of one job; more is refused unread."""
OUTPUT_BYTES = 1 << 20
"""The child's output file and every file it writes stop at this size (RLIMIT_FSIZE)."""
TAIL_BYTES = 4096
EXTRA_PROCESSES = 16
"""Processes the code may add to its uid's count (a second wall behind the hook's no-fork)."""
KILL_ROUNDS = 100
RUN_AS = (65534, 65534)
"""The uid and gid the child drops to when this process is root (``nobody``)."""

_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class RunResult:
    """How a run ended. ``ran`` is False when the code was not run at all (refused)."""

    passed: bool
    detail: str
    ran: bool = True

    def to_json(self) -> dict[str, object]:
        return {"passed": self.passed, "detail": self.detail[-600:], "ran": self.ran}

    @classmethod
    def from_json(cls, data: object) -> RunResult:
        """Parse an answer of the sandbox; anything malformed is a not-run result."""
        if (
            isinstance(data, dict)
            and isinstance(data.get("passed"), bool)
            and isinstance(data.get("detail"), str)
            and isinstance(data.get("ran", True), bool)
        ):
            ran = bool(data.get("ran", True))
            return cls(bool(data["passed"]) and ran, str(data["detail"])[-600:], ran)
        return cls(False, "the sandbox answered something that is not a result", ran=False)


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def set_nondumpable() -> bool:
    """Same-uid processes can no longer ptrace this one or read its ``/proc`` files."""
    return _prctl(_PR_SET_DUMPABLE, 0)


def harden_self() -> bool:
    """Non-dumpable and child subreaper; False where the platform does not allow it."""
    dumpable = set_nondumpable()
    reaper = _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    return dumpable and reaper


def _parents() -> dict[int, int]:
    """pid -> parent pid of every visible process (Linux ``/proc``)."""
    out: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    stat = fh.read(1024)
            except OSError:
                continue
            fields = stat.rsplit(b")", 1)[-1].split()
            if len(fields) > 1 and fields[1].isdigit():
                out[int(entry.name)] = int(fields[1])
    return out


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, theirs, ...), from ``/proc``."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def uid_processes(uid: int | None = None) -> int:
    """Processes of ``uid`` (this one's by default; what ``RLIMIT_NPROC`` counts)."""
    uid = os.getuid() if uid is None else uid
    count = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    count += entry.stat(follow_symlinks=False).st_uid == uid
    return count


def reap() -> None:
    """Collect exited children (as a subreaper or PID 1, orphans become ours)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_leftovers() -> int:
    """Kill every process this one left (see the module docstring); return how many rounds."""
    me = os.getpid()
    for rounds in range(1, KILL_ROUNDS + 1):
        if me == 1:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                reap()
                return rounds
        else:
            pids = descendants(me)
            if not pids:
                reap()
                return rounds
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        reap()
        time.sleep(0.005)
    return KILL_ROUNDS


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            return fh.read(TAIL_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def run_one(
    code: str,
    tests: str,
    *,
    limit_seconds: float,
    scratch_root: Path,
    memory_mb: int = 512,
    guard: bool = True,
    kernel: bool = True,
    minimum_landlock_abi: int = 1,
) -> RunResult:
    """Run ``code`` then ``tests`` in a limited child; kill all it leaves; say how it went.

    ``guard`` (the audit hook) and ``kernel`` (Landlock and seccomp) are switched off only by
    tests that show what each of the other walls holds alone; ``minimum_landlock_abi`` is
    the oldest Landlock ABI the child accepts before it refuses to run the code.
    """
    if len(code.encode()) + len(tests.encode()) > MAX_CODE_BYTES:
        return RunResult(False, f"code and tests exceed {MAX_CODE_BYTES} bytes: not run")
    scratch_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=scratch_root))
    try:
        result = _run_in(
            scratch, code, tests, limit_seconds, memory_mb, (guard, kernel, minimum_landlock_abi)
        )
    finally:
        kill_leftovers()
        removal = remove_tree(scratch)
    if not removal.removed:
        return RunResult(False, f"its scratch directory was not removed: {removal.detail}")
    return result


def _run_in(  # noqa: PLR0917 - private
    scratch: Path,
    code: str,
    tests: str,
    limit_seconds: float,
    memory_mb: int,
    walls: tuple[bool, bool, int],
) -> RunResult:
    work = scratch / "work"
    work.mkdir()
    uid, gid = RUN_AS if os.geteuid() == 0 else (os.getuid(), os.getgid())
    if (uid, gid) != (os.getuid(), os.getgid()):
        os.chown(work, uid, gid)  # the child drops to uid before any code runs
        scratch.chmod(0o711)  # searchable, so that the work directory's full path works
    output = scratch / "output"
    marker = f"ALL TESTS PASSED {secrets.token_hex(16)}"
    job = {
        "code": code,
        "tests": tests,
        "marker": marker,
        "cpu_seconds": max(1, int(limit_seconds) + 1),
        "memory_bytes": memory_mb << 20,
        "file_bytes": OUTPUT_BYTES,
        # RLIMIT_NPROC counts every process of the uid: allow a few beyond what exists.
        "processes": uid_processes(uid) + EXTRA_PROCESSES,
        "uid": uid,
        "gid": gid,
        "guard": walls[0],
        "kernel": walls[1],
        "minimum_landlock_abi": walls[2],
    }
    env = {"PATH": os.defpath, "LANG": "C.UTF-8", "HOME": str(work), "TMPDIR": str(work)}
    with output.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-B", str(CHILD)],
            cwd=work,
            env=env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    try:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
        stopped = _wait(proc, scratch, limit_seconds)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    stopped = stopped or _over_budget(scratch)
    if stopped:
        return RunResult(False, stopped)
    text = _tail(output).strip()
    if proc.returncode == KERNEL_REFUSED and text.startswith(REFUSED_PREFIX):
        return RunResult(False, text.splitlines()[0], ran=False)
    if proc.returncode == 0 and marker in text.splitlines():
        return RunResult(True, "all test cases passed")
    return RunResult(False, f"exit {proc.returncode}: {text[-400:]}")


def _over_budget(scratch: Path) -> str | None:
    over = measure(scratch).exceeded
    return f"stopped: its scratch directory holds {over}" if over else None


def _wait(proc: subprocess.Popen[bytes], scratch: Path, limit_seconds: float) -> str | None:
    """Wait for the child while measuring its scratch directory; why it was stopped early
    (the time limit, the scratch budget), or None when it exited by itself."""
    ends = time.monotonic() + limit_seconds
    while True:
        try:
            proc.wait(timeout=max(0.0, min(POLL_SECONDS, ends - time.monotonic())))
            return None
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() >= ends:
            return f"timed out after {limit_seconds:g} s"
        over = _over_budget(scratch)
        if over:
            return over
