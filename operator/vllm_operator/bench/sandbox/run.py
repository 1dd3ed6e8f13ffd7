"""Run one answer's code and calls, then kill everything the run left behind.

This runs in a process of its own, never in the benchmark's: in the cluster it is the
sandbox container of the benchmark Job pod (``vllm-operator sandbox serve``, see
``bench.sandbox.exchange``), on a laptop a helper process bench starts for each test when the
user passed ``--allow-code-execution``. It never runs answer code itself and never sees an
expected value: it hands the child the code and the calls (function name and arguments),
and gives back what each call returned or raised (``Outcome``), bounded and typed; bench
compares them with the expected values (``bench.quality.cases``). Each run:

1. gets a fresh scratch directory under the scratch root (a size-limited volume in the
   cluster) and a minimal environment (no secrets: nothing of bench's environment);
2. starts ``child`` (``python -I -B``) in its own session; the child lowers its
   rlimits, drops root if it has it (to ``RUN_AS``, which owns the scratch directory),
   applies the kernel's limits to itself (Landlock and a seccomp allow list, see
   ``kernel``) and installs its audit hook before compiling the model's code; where
   the kernel cannot enforce its limits the code is not run (a not-run result). Its
   output goes to a file capped by ``RLIMIT_FSIZE``, so output cannot grow this process's
   memory, and ``RLIMIT_NPROC`` allows only a few processes beyond what its uid already runs;
3. learns from a *status pipe* whether the child armed itself (or why it refused): the
   child writes there and closes it before any answer code is compiled, so what the answer
   prints or its exit status can never make a run "not run"; the outcomes come back in a
   *result file* outside the answer's working directory, read at most ``OUTCOMES_BYTES``
   and parsed line by line (a line that is not the next call's outcome spoils them all);
4. waits at most the test's time limit, measuring the scratch directory meanwhile (every
   ``scratch.POLL_SECONDS``: past ``scratch.WRITE_BUDGET_BYTES`` on disk, ``MAX_ENTRIES``
   names or ``MAX_DEPTH`` levels the child is stopped and the check fails, as it does when
   the directory is over the budget once the child has exited), then kills the child's
   process group and every process that is left: with PID 1 of its own PID namespace (the
   sidecar container), ``kill(-1)`` reaches everything else in the namespace; otherwise this
   process is a child subreaper (``PR_SET_CHILD_SUBREAPER``), so a double fork + ``setsid``
   still leaves the escapee among its descendants, which are found in ``/proc`` and killed
   until none remain. Only then is the scratch directory removed (``scratch.remove_tree``:
   any mode, any depth, never raising); a run whose directory cannot be removed fails.

This process also makes itself non-dumpable, so code running as the same uid can neither
ptrace it nor read its ``/proc/<pid>/`` files.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vllm_operator.bench.sandbox.scratch import POLL_SECONDS, measure, remove_tree

CHILD = Path(__file__).with_name("child.py")
REFUSED_PREFIX = "sandbox: not run: "
"""``child.REFUSED_PREFIX``: how a refusal on the child's status pipe begins."""
STATUS_BYTES = 4096
TIMED_OUT = "timed out after"
MAX_CODE_BYTES = 256 * 1024
"""Code plus calls of one job; more is refused unread."""
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


MAX_CALLS = 100
"""Calls of one job (cases of one check)."""
OUTCOMES_BYTES = 48 * 1024
"""The most of the result file read back; a longer one is a failed run."""
MAX_DEPTH = 32
"""Deepest nesting of lists and objects in an argument or a returned value."""
MAX_RAISED_CHARS = 300


def json_depth(value: object) -> int:
    """How deeply lists and dicts nest in ``value`` (0 for a scalar), without recursion."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        item, depth = todo.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        if isinstance(item, list):
            todo.extend((x, depth + 1) for x in item)
        elif isinstance(item, dict):
            todo.extend((x, depth + 1) for x in item.values())
    return deepest


@dataclass(frozen=True)
class Call:
    """One call the child makes: ``function(*args, **kwargs)`` (JSON values only)."""

    function: str
    args: tuple[object, ...] = ()
    kwargs: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"function": self.function, "args": list(self.args), "kwargs": self.kwargs}

    @classmethod
    def from_json(cls, data: object) -> Call | None:
        """A call from a job file; None unless a function name, a list and an object."""
        if not isinstance(data, dict) or set(data) != {"function", "args", "kwargs"}:
            return None
        function, args, kwargs = data["function"], data["args"], data["kwargs"]
        if not (isinstance(function, str) and function.isidentifier()):
            return None
        if not (isinstance(args, list) and isinstance(kwargs, dict)):
            return None
        if json_depth(args) > MAX_DEPTH or json_depth(kwargs) > MAX_DEPTH:
            return None
        return cls(function, tuple(args), dict(kwargs))


@dataclass(frozen=True)
class Outcome:
    """What one call did: returned ``value`` (a JSON value), or ``raised`` (``Type: msg``)."""

    value: object = None
    raised: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"raised": self.raised} if self.raised is not None else {"returned": self.value}

    @classmethod
    def from_json(cls, data: object) -> Outcome | None:
        """Parse ``{"returned": v}`` or ``{"raised": "..."}``; None for anything else."""
        if not isinstance(data, dict):
            return None
        if set(data) == {"returned"} and json_depth(data["returned"]) <= MAX_DEPTH:
            return cls(data["returned"])
        if set(data) == {"raised"} and isinstance(data["raised"], str):
            return cls(raised=data["raised"][:MAX_RAISED_CHARS])
        return None


@dataclass(frozen=True)
class RunResult:
    """How a run ended: ``ran`` is False when the code was not run at all (refused); the
    outcomes of the calls made, in order (fewer than the calls when the run stopped)."""

    ran: bool
    detail: str
    outcomes: tuple[Outcome, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "ran": self.ran,
            "detail": self.detail[-600:],
            "outcomes": [o.to_json() for o in self.outcomes],
        }

    @classmethod
    def from_json(cls, data: object) -> RunResult:
        """Parse an answer of the sandbox; anything malformed is a not-run result."""
        bad = cls(False, "the sandbox answered something that is not a result")
        if not isinstance(data, dict) or not set(data) <= {"ran", "detail", "outcomes"}:
            return bad
        ran, detail, raw = data.get("ran"), data.get("detail"), data.get("outcomes", [])
        if not (isinstance(ran, bool) and isinstance(detail, str) and isinstance(raw, list)):
            return bad
        outcomes = [Outcome.from_json(o) for o in raw[: MAX_CALLS + 1]]
        if len(raw) > MAX_CALLS or any(o is None for o in outcomes):
            return bad
        return cls(ran, detail[-600:], tuple(o for o in outcomes if o is not None))


def parse_outcomes(data: bytes, calls: int) -> tuple[Outcome, ...] | str:
    """The outcomes in the child's result file, or why they are not outcomes.

    One JSON line per call, ``{"i": n, ...}`` with n counting from 0; an unfinished last
    line (the child was killed while writing) is dropped. Anything else, a line out of
    order or more lines than calls, spoils the whole file: only the answer's code could
    have written it, and the answer gets no say beyond its own outputs.
    """
    if len(data) > OUTCOMES_BYTES:
        return f"the outputs exceed {OUTCOMES_BYTES} bytes"
    lines = data.split(b"\n")[:-1]
    if len(lines) > calls:
        return "more outputs than calls"
    outcomes: list[Outcome] = []
    for line in lines:
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            return "an output that is not JSON"
        index = item.pop("i", None) if isinstance(item, dict) else None
        outcome = Outcome.from_json(item)
        if type(index) is not int or index != len(outcomes) or outcome is None:
            return "an output that is not the next call's outcome"
        outcomes.append(outcome)
    return tuple(outcomes)


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
    calls: Sequence[Call],
    *,
    limit_seconds: float,
    scratch_root: Path,
    memory_mb: int = 512,
    guard: bool = True,
    kernel: bool = True,
    minimum_landlock_abi: int = 1,
) -> RunResult:
    """Run ``code``, then make ``calls``, in a limited child; kill all it leaves; give back
    what each call returned or raised (never a verdict: the caller compares).

    ``guard`` (the audit hook) and ``kernel`` (Landlock and seccomp) are switched off only by
    tests that show what each of the other walls holds alone; ``minimum_landlock_abi`` is
    the oldest Landlock ABI the child accepts before it refuses to run the code.
    """
    job = json.dumps({"code": code, "calls": [c.to_json() for c in calls]})
    if len(job.encode()) > MAX_CODE_BYTES or len(calls) > MAX_CALLS:
        return RunResult(False, f"code and calls exceed {MAX_CODE_BYTES} bytes: not run")
    scratch_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=scratch_root))
    try:
        result = _run_in(
            scratch, code, calls, limit_seconds, memory_mb, (guard, kernel, minimum_landlock_abi)
        )
    finally:
        kill_leftovers()
        removal = remove_tree(scratch)
    if not removal.removed:
        return RunResult(True, f"its scratch directory was not removed: {removal.detail}")
    return result


def _run_in(  # noqa: PLR0917 - private
    scratch: Path,
    code: str,
    calls: Sequence[Call],
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
    output, result = scratch / "output", scratch / "result"
    status_read, status_write = os.pipe()
    job = {
        "code": code,
        "calls": [c.to_json() for c in calls],
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
    try:
        with output.open("wb") as out, result.open("wb") as res:
            job.update(status_fd=status_write, result_fd=res.fileno())
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", str(CHILD)],
                cwd=work,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                pass_fds=(status_write, res.fileno()),
            )
        os.close(status_write)
        status_write = -1
        stopped = _feed_and_wait(proc, json.dumps(job).encode(), scratch, limit_seconds)
        status = _read_status(status_read)
    finally:
        for fd in (status_read, status_write):
            if fd >= 0:
                os.close(fd)
    return _result(status, proc.returncode, stopped, limit_seconds, (output, result, calls))


def _feed_and_wait(
    proc: subprocess.Popen[bytes], job: bytes, scratch: Path, limit_seconds: float
) -> str | None:
    """Send the job, wait for the child at most ``limit_seconds`` while measuring its scratch
    directory, then kill its group; why it was stopped (the time limit, the scratch budget,
    also when over it after a normal exit), or None."""
    try:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(job)
            proc.stdin.close()
        stopped = _wait(proc, scratch, limit_seconds)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return stopped or _over_budget(scratch)


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
            return f"{TIMED_OUT} {limit_seconds:g} s"
        over = _over_budget(scratch)
        if over:
            return over


def _read_status(fd: int) -> str:
    """What the child said on its status pipe (it closed its end, or died)."""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, STATUS_BYTES).decode("utf-8", "replace").strip()
    except BlockingIOError:
        return ""  # a holder of the write end is still alive: the child never spoke


def _result(
    status: str,
    returncode: int,
    stopped: str | None,
    limit_seconds: float,
    files: tuple[Path, Path, Sequence[Call]],
) -> RunResult:
    """Judge how the run went from the status pipe first: only the child, before any answer
    code existed, could have written it. Then why it was stopped (no outcomes count then),
    then the outcomes, whatever the exit status."""
    output, result, calls = files
    if status.startswith("refused "):
        return RunResult(False, status.removeprefix("refused ").splitlines()[0])
    if status != "armed":
        timed_out = stopped is not None and stopped.startswith(TIMED_OUT)
        why = f"did not start within {limit_seconds:g} s" if timed_out else f"exit {returncode}"
        return RunResult(False, f"the sandbox stopped before it ran the code ({why})")
    if stopped:
        return RunResult(True, stopped)
    try:
        with result.open("rb") as fh:
            data = fh.read(OUTCOMES_BYTES + 1)
    except OSError:
        data = b""
    outcomes = parse_outcomes(data, len(calls))
    if isinstance(outcomes, str):
        return RunResult(True, f"exit {returncode}: {outcomes}")
    if returncode == 0 and len(outcomes) == len(calls):
        return RunResult(True, "", outcomes)
    return RunResult(True, f"exit {returncode}: {_tail(output).strip()[-400:]}", outcomes)
