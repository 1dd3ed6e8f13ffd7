"""Measure the system calls the python-tests child makes once its seccomp filter is loaded.

How the allow list in ``operator/vllm_operator/bench/sandbox/syscalls.py`` was derived and
how to check it after a Python or glibc upgrade: run the real child
(``bench/sandbox/child.py``, with every wall) under ``strace -f`` on each interpreter, with every
builtin suite's python-tests (and a reference answer for each) plus a wide honest workload,
and list the calls made after the filter was loaded, with the ``fcntl`` commands, ``ioctl``
requests, ``prctl`` options and ``renameat2`` flags, and every call the filter refused. A
refused call in an honest run is a call the table is missing (or one Python copes without:
say so there).

    python hack/sandbox_syscalls.py /root/.pyenv/versions/3.1{1,2,3}*/bin/python3

Needs strace and, for each interpreter, nothing installed: ``pyseccomp`` (one pure-Python
file) is put on its path from this environment. As root the child drops to nobody, as in
the sandbox.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyseccomp
import yaml

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "operator" / "vllm_operator" / "bench"
SANDBOX = BENCH / "sandbox"
REFERENCE_ANSWERS = {
    "code-1": (
        "def is_palindrome(text: str) -> bool:\n"
        "    cleaned = [c.lower() for c in text if c.isalnum()]\n"
        "    return cleaned == cleaned[::-1]\n"
    ),
}
"""A correct answer for each builtin python-tests prompt, by prompt id."""
WORKLOAD = """
import bisect, collections, dataclasses, datetime, decimal, fractions, functools, hashlib
import heapq, itertools, json, math, random, re, statistics, string, tempfile, threading
import typing, unicodedata, copy, enum, textwrap, zlib, base64, struct, array, io, csv
import pathlib, time, operator, abc, contextlib, numbers, shutil, uuid, pprint, difflib
import concurrent.futures, html, sqlite3, xml.etree.ElementTree, glob, fnmatch, calendar
import queue, weakref, inspect, traceback, warnings, logging, os, sys
with open('notes.txt', 'w') as fh:
    fh.write('kept')
with tempfile.NamedTemporaryFile('w') as fh:
    fh.write('temp')
with tempfile.TemporaryDirectory() as d:
    pathlib.Path(d, 'x').write_text('y')
os.makedirs('a/b')
os.rename('notes.txt', 'a/b/notes.txt')
shutil.copyfile('a/b/notes.txt', 'c.txt')
os.listdir('.'); glob.glob('*'); os.stat('c.txt'); pathlib.Path('.').resolve()
box = []
t = threading.Thread(target=lambda: box.append(hashlib.sha256(b'x').hexdigest()))
t.start(); t.join()
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    assert list(ex.map(lambda x: x * 2, range(10)))[3] == 6
q = queue.Queue(); q.put(1); q.get(timeout=1); threading.Event().wait(0.01)
time.sleep(0.01); time.time(); time.monotonic(); time.process_time(); time.perf_counter()
datetime.datetime.now(); random.random(); random.SystemRandom().random(); uuid.uuid4()
sqlite3.connect(':memory:').execute('select 3').fetchone()
con = sqlite3.connect('db.sqlite'); con.execute('create table t(x)'); con.commit(); con.close()
zlib.compress(b'x' * 1000); json.dumps({'a': [1]}); decimal.Decimal('1.1') + 1
logging.getLogger('x').warning('w'); os.cpu_count(); os.sched_getaffinity(0)
x = [list(range(1000)) for _ in range(2000)]; del x
big = bytearray(50 << 20); del big
print('ok'); sys.stderr.write('err\\n')
"""


def jobs() -> list[tuple[str, str, list[dict[str, object]]]]:
    """(name, code, calls) of every builtin suite's python-tests, and the wide workload."""
    found = []
    for suite in sorted((BENCH / "quality" / "data").glob("*.yaml")):
        for prompt in yaml.safe_load(suite.read_text()).get("tests", []):
            for check in prompt.get("assert", []):
                if check.get("type") == "python-tests":
                    answer = REFERENCE_ANSWERS.get(prompt["id"])
                    if answer is None:
                        sys.exit(f"no reference answer for {suite.name}:{prompt['id']}: add one")
                    calls = [
                        {
                            "function": check["function"],
                            "args": case.get("args", []),
                            "kwargs": case.get("kwargs", {}),
                        }
                        for case in check["cases"]
                    ]
                    found.append((f"{suite.stem}:{prompt['id']}", answer, calls))
    probe = "\ndef probe():\n    return len(box[0])\n"
    found.append(("workload", WORKLOAD + probe, [{"function": "probe", "args": [], "kwargs": {}}]))
    return found


def after_filter(trace: Path) -> list[str]:
    lines = trace.read_text().splitlines()
    loads = [i for i, line in enumerate(lines) if "seccomp(SECCOMP_SET_MODE_FILTER" in line]
    return lines[loads[-1] + 1 :] if loads else []


def measure(python: str, work: Path) -> dict[str, object]:
    path = work / "path"
    path.mkdir(exist_ok=True)
    shutil.copy(pyseccomp.__file__, path / "pyseccomp.py")
    calls: collections.Counter[str] = collections.Counter()
    details: set[str] = set()
    refused: set[str] = set()
    for name, code, calls_made in jobs():
        scratch = Path(tempfile.mkdtemp(dir=work))
        uid = 65534 if os.geteuid() == 0 else os.getuid()
        os.chown(scratch, uid, uid)
        status_read, status_write = os.pipe()
        result = scratch / "result"
        result_fd = os.open(result, os.O_WRONLY | os.O_CREAT, 0o600)
        job = {
            "code": code,
            "calls": calls_made,
            "status_fd": status_write,
            "result_fd": result_fd,
            "cpu_seconds": 30,
            "memory_bytes": 512 << 20,
            "file_bytes": 1 << 20,
            "uid": uid,
            "gid": uid,
        }
        trace = work / "trace"
        out = subprocess.run(
            [
                "strace",
                "-f",
                "-qq",
                "-o",
                str(trace),
                python,
                "-B",
                str(SANDBOX / "child.py"),
            ],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            cwd=scratch,
            env={"PATH": os.defpath, "PYTHONPATH": str(path), "TMPDIR": str(scratch)},
            timeout=120,
            check=False,
            pass_fds=(status_write, result_fd),
        )
        for fd in (status_write, result_fd):
            os.close(fd)
        status = os.read(status_read, 4096).decode()
        os.close(status_read)
        outcomes = result.read_text().splitlines()
        if (
            status.strip() != "armed"
            or len(outcomes) != len(calls_made)
            or "raised" in str(outcomes)
        ):
            sys.exit(
                f"{python} {name}: the run failed: {status} {outcomes} "
                f"{out.stdout[-800:]}{out.stderr[-800:]}"
            )
        for line in after_filter(trace):
            match = re.match(r"^\d+\s+(?:<\.\.\. )?(\w+)\((.*)", line)
            if not match or "resumed>" in line:
                continue
            call, rest = match.groups()
            calls[call] += 1
            if call in ("fcntl", "ioctl", "prctl", "renameat2"):
                args = rest.split(", ")
                which = {"prctl": 0, "renameat2": 4}.get(call, 1)
                details.add(f"{call} {args[which].split(')')[0] if len(args) > which else '?'}")
            if "= -1 EPERM" in line or "= -1 ENOSYS" in line:
                refused.add(f"{call}: {line.split('=')[-1].strip()}")
        shutil.rmtree(scratch, ignore_errors=True)
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return {
        "python": version,
        "calls": dict(sorted(calls.items())),
        "count": len(calls),
        "arguments": sorted(details),
        "refused": sorted(refused),
    }


def main(argv: list[str]) -> int:
    if shutil.which("strace") is None:
        sys.exit("strace is needed (Debian: apt-get install strace)")
    sys.path.insert(0, str(SANDBOX))
    import syscalls  # noqa: PLC0415 - the table beside the child, not the package

    allowed = set(syscalls.allowed_names())
    seen: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        work.chmod(0o711)
        for python in argv or [sys.executable]:
            figures = measure(python, work)
            seen.update(figures["calls"])  # type: ignore[arg-type]
            print(json.dumps(figures, indent=1))
    print(f"allowed by the table: {len(allowed)}; made in these runs: {len(seen)}")
    print("made but not in the table:", sorted(seen - allowed - {"clone3"}))
    print("in the table, not made here:", sorted(allowed - seen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
