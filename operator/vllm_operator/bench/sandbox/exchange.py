"""The python-tests sandbox as a process of its own: the exchange with bench, and its loops.

``serve`` is what the benchmark Job's sandbox container runs (a native sidecar, another
uid, its own PID namespace, no secrets; see ``render.job`` and docs/security-sandbox.md).
Bench and the sandbox share only an exchange directory (an emptyDir): bench drops a job
file ``req-<token>.json`` (token: 128 random bits, so nothing in the sandbox can guess the
name of a future job or answer), the sandbox takes it, runs it with ``bench.sandbox.run`` and
answers ``res-<token>.json``. Files are the channel rather than a socket so that bench
listens on nothing the sandbox could reach; both sides open files with ``O_NOFOLLOW``,
accept only regular files, and read at most a fixed size, so a planted symlink, FIFO or
huge file in the exchange directory cannot redirect a write (into bench's termination
log, say) or exhaust memory.

``run_one_stdio`` runs a single job from stdin and prints its result: it is the helper
process bench starts for ``--allow-code-execution`` on a laptop. The command line of both
(``vllm-operator sandbox serve|run-one``) is ``commands.sandbox``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import sys
import time
from pathlib import Path
from types import FrameType

from vllm_operator.bench.sandbox.run import (
    MAX_CALLS,
    MAX_CODE_BYTES,
    OUTCOMES_BYTES,
    Call,
    RunResult,
    harden_self,
    reap,
    run_one,
)

READY_FILE = "ready"
RESULT_BYTES = OUTCOMES_BYTES + 8192
JOB_BYTES = MAX_CODE_BYTES + 4096
POLL_SECONDS = 0.02
_TOKEN = re.compile(r"^[0-9a-f]{32}$")


def read_bounded(path: Path, limit: int) -> bytes | None:
    """The file's bytes if it is a regular file (not a link, FIFO, device) of <= ``limit``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = os.read(fd, limit + 1)
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


def write_new(path: Path, data: bytes) -> bool:
    """Write ``data`` to a new file at ``path`` (never following or reusing what is there)."""
    tmp = path.with_name(f".tmp-{os.urandom(8).hex()}-{path.name}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except OSError:
        return False
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    try:
        os.chmod(tmp, 0o644)  # readable by the other container's uid whatever the umask
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    return True


def parse_job(data: bytes) -> tuple[str, list[Call], float] | None:
    """(code, calls, limit seconds) from a job file, or None when it is not a valid job."""
    try:
        job = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(job, dict):
        return None
    code, raw, limit = job.get("code"), job.get("calls"), job.get("limit_seconds")
    if not (isinstance(code, str) and isinstance(raw, list) and len(raw) <= MAX_CALLS):
        return None
    calls = [Call.from_json(c) for c in raw]
    if not isinstance(limit, (int, float)) or isinstance(limit, bool) or not 0 < limit <= 120:
        return None
    if any(c is None for c in calls):
        return None
    return code, [c for c in calls if c is not None], float(limit)


def serve_once(exchange: Path, scratch: Path) -> int:
    """Run every job waiting in ``exchange``; return how many were answered."""
    answered = 0
    for entry in sorted(exchange.glob("req-*.json")):
        token = entry.name[len("req-") : -len(".json")]
        if not _TOKEN.match(token):
            continue
        data = read_bounded(entry, JOB_BYTES)
        with contextlib.suppress(OSError):
            entry.unlink()
        job = parse_job(data) if data is not None else None
        if job is None:
            result = RunResult(False, "the job file is not a valid sandbox job")
        else:
            code, calls, limit = job
            result = run_one(code, calls, limit_seconds=limit, scratch_root=scratch)
        write_new(exchange / f"res-{token}.json", json.dumps(result.to_json()).encode())
        answered += 1
    reap()
    return answered


def serve(exchange: Path, scratch: Path, *, stop_after: float | None = None) -> None:
    """Answer jobs until SIGTERM (the kubelet stops the sidecar when bench has exited)."""
    harden_self()
    stopping = False

    def _stop(_sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    exchange.mkdir(parents=True, exist_ok=True)
    write_new(exchange / READY_FILE, str(os.getpid()).encode())
    ends = None if stop_after is None else time.monotonic() + stop_after
    while not stopping and (ends is None or time.monotonic() < ends):
        if serve_once(exchange, scratch) == 0:
            time.sleep(POLL_SECONDS)


def run_one_stdio(scratch: Path) -> int:
    """One job from stdin, its result as JSON on stdout (the laptop helper)."""
    harden_self()
    data = sys.stdin.buffer.read(JOB_BYTES + 1)
    job = parse_job(data) if len(data) <= JOB_BYTES else None
    if job is None:
        result = RunResult(False, "the job is not a valid sandbox job")
    else:
        code, calls, limit = job
        result = run_one(code, calls, limit_seconds=limit, scratch_root=scratch)
    sys.stdout.write(json.dumps(result.to_json()) + "\n")
    sys.stdout.flush()
    return 0
