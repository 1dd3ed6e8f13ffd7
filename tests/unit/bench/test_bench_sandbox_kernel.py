"""The kernel's walls around model-written code: each attack of issue 20 has no effect.

Each attack is an answer a hostile model could give, written so that its python-tests check
passes when the attack works, and each test checks the attack's effect from outside: no
connection reaches a loopback listener, no file appears, memory is not rewritten. Every
attack runs twice: with every wall (what bench does), and with the audit hook switched off,
which shows that the kernel's limits (Landlock and seccomp) hold alone. Before the kernel
layer, the first three attacks passed the audit hook and all of them passed the walls that
were left without it.

Landlock is in the kernels CI runs on (ABI 7 when this was written); where it is missing the
tests are skipped with the reason, and ``test_a_kernel_without_the_limits_refuses_to_run``
shows what the sandbox does there instead.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_probe import held, probe, why

from vllm_operator.bench.sandbox import kernel as sandbox_kernel
from vllm_operator.bench.sandbox import syscalls as sandbox_syscalls
from vllm_operator.bench.sandbox.run import RunResult, run_one

ABI = sandbox_kernel.landlock_abi()
pytestmark = [
    pytest.mark.skipif(
        ABI < 1, reason="the kernel has no Landlock (Linux 5.13+ with landlock in its LSM list)"
    ),
    # code run as nobody, forking and counted against its uid: with the other sandbox modules,
    # one at a time (conftest.py)
    pytest.mark.xdist_group("sandbox"),
]
WALLS = [
    pytest.param({}, id="all-walls"),
    pytest.param({"guard": False}, id="kernel-alone"),
]

LOAD = """
import importlib.machinery, importlib.util, os, sys

def load(name):
    # An extension module loaded by hand under a dotted name: the hook judges "evade".
    for d in sys.path:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(d, name + suffix)
            if os.path.exists(path):
                alias = "evade." + name
                loader = importlib.machinery.ExtensionFileLoader(alias, path)
                spec = importlib.util.spec_from_file_location(alias, path, loader=loader)
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                return module
    return __import__(name)

DONE = []
"""


def _run(code: str, tests: str, tmp_path: Path, walls: dict[str, Any]) -> RunResult:
    source, calls = probe(LOAD + code, tests)
    return run_one(source, calls, limit_seconds=10, scratch_root=tmp_path / "s", **walls)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback listener; a connection the attack completes waits in its backlog."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock
    sock.close()


def _connections(sock: socket.socket) -> int:
    sock.setblocking(False)
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


@pytest.fixture
def in_python_install() -> Iterator[Path]:
    """A directory inside the Python installation, which the sandbox may read but not write
    (on a laptop the user's own virtualenv is writable: a planted ``.pth`` runs next time)."""
    try:
        path = Path(tempfile.mkdtemp(prefix="sandbox-attack-", dir=sys.prefix))
    except PermissionError:
        pytest.skip("the Python installation is not writable here: nothing for it to reach")
    yield path
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


@pytest.mark.parametrize("walls", WALLS)
def test_attack_fork_exec_of_a_program(
    walls: dict[str, Any], tmp_path: Path, listener: socket.socket
) -> None:
    """``_posixsubprocess.fork_exec`` raises no audit event: a program that writes and
    connects, started outside the hook."""
    target = tmp_path / "escaped.txt"
    port = listener.getsockname()[1]
    script = (
        f"import socket; open({str(target)!r}, 'w').write('x'); "
        f"socket.create_connection(('127.0.0.1', {port}), timeout=2).close()"
    )
    code = (
        "exe = sys.executable.encode()\n"
        "r, w = os.pipe()\n"
        "pid = load('_posixsubprocess').fork_exec(\n"
        f"    [exe, b'-c', {script.encode()!r}], [exe], True, (w,), None, None,\n"
        "    -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1, None, True)\n"
        "os.close(w)\n"
        "assert not os.read(r, 1000), 'exec failed'\n"
        "os.waitpid(pid, 0)\n"
        "DONE.append(pid)\n"
    )
    result = _run(code, "assert DONE", tmp_path, walls)
    assert not held(result), why(result)
    assert not target.exists()
    assert _connections(listener) == 0


@pytest.mark.parametrize("walls", WALLS)
def test_attack_os_open_with_dir_fd(
    walls: dict[str, Any], tmp_path: Path, in_python_install: Path
) -> None:
    """The hook judged the relative name against the working directory, not ``dir_fd``."""
    code = (
        f"fd = os.open({str(in_python_install)!r}, os.O_RDONLY)\n"
        "w = os.open('planted.pth', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)\n"
        "os.write(w, b'import os')\n"
        "DONE.append(w)\n"
    )
    result = _run(code, "assert DONE", tmp_path, walls)
    assert not held(result), why(result)
    assert list(in_python_install.iterdir()) == []


@pytest.mark.parametrize("walls", WALLS)
@pytest.mark.parametrize("how", ["_socket", "ctypes"])
def test_attack_socket_below_the_socket_module(
    how: str, walls: dict[str, Any], tmp_path: Path, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    if how == "_socket":
        code = (
            f"s = load('_socket').socket(2, 1)\ns.connect(('127.0.0.1', {port}))\nDONE.append(s)\n"
        )
    else:
        code = (
            "import ctypes, struct\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "fd = libc.socket(2, 1, 0)\n"
            "assert fd >= 0, ctypes.get_errno()\n"
            f"addr = struct.pack('!HH4s8x', 2, {port}, bytes([127, 0, 0, 1]))\n"
            "addr = struct.pack('=H', 2) + addr[2:]\n"
            "assert libc.connect(fd, addr, len(addr)) == 0, ctypes.get_errno()\n"
            "DONE.append(fd)\n"
        )
    result = _run(code, "assert DONE", tmp_path, walls)
    assert not held(result), why(result)
    assert _connections(listener) == 0


@pytest.mark.parametrize("walls", WALLS)
def test_attack_execve_of_a_shell(walls: dict[str, Any], tmp_path: Path) -> None:
    target = tmp_path / "shell-was-here"
    code = f"os.execve('/bin/sh', ['sh', '-c', 'echo x > {target}'], {{}})\n"
    result = _run(code, "assert True", tmp_path, walls)
    assert not held(result), why(result)
    assert not target.exists()


@pytest.mark.parametrize("walls", WALLS)
def test_attack_rewriting_its_own_memory_through_proc_self_mem(
    walls: dict[str, Any], tmp_path: Path
) -> None:
    """/proc/self/mem writes reach any byte of the process (the hook, the marker, a verdict)."""
    code = (
        "FLAG = bytes([110, 111, 112, 101])\n"
        "where = id(FLAG) + sys.getsizeof(b'') - 1\n"
        "fd = os.open('/proc/self/mem', os.O_RDWR)\n"
        "try:\n"
        "    import mmap\n"
        "    view = mmap.mmap(fd, 4096, offset=where & ~4095)\n"
        "    view[where & 4095:(where & 4095) + 4] = b'yes!'\n"
        "except Exception:\n"
        "    os.pwrite(fd, b'yes!', where)\n"
    )
    result = _run(code, "assert FLAG == b'yes!'", tmp_path, walls)
    assert not held(result), why(result)
    assert "FLAG" not in result.detail or "solution failed to load" in result.detail


@pytest.mark.parametrize("walls", WALLS)
def test_attack_threads_racing_the_limits(
    walls: dict[str, Any], tmp_path: Path, listener: socket.socket
) -> None:
    """Threads started as early as model code can start any: every one is already limited."""
    target = tmp_path / "raced"
    port = listener.getsockname()[1]
    code = (
        "import threading, time\n"
        "def race():\n"
        "    ends = time.monotonic() + 1\n"
        "    while time.monotonic() < ends:\n"
        "        for attempt in (\n"
        f"            lambda: load('_socket').socket(2, 1).connect(('127.0.0.1', {port})),\n"
        f"            lambda: os.close(os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT)),\n"
        "        ):\n"
        "            try:\n"
        "                attempt()\n"
        "                DONE.append(1)\n"
        "            except Exception:\n"
        "                pass\n"
        "threads = [threading.Thread(target=race) for _ in range(4)]\n"
        "for t in threads:\n"
        "    t.start()\n"
        "for t in threads:\n"
        "    t.join()\n"
    )
    result = _run(code, "assert DONE", tmp_path, walls)
    assert not held(result), why(result)
    assert not target.exists()
    assert _connections(listener) == 0


def test_limits_are_never_applied_beside_another_thread(tmp_path: Path) -> None:
    """Landlock restricts the calling thread only: a second thread would stay free."""
    script = (
        "import sys, threading\n"
        "from vllm_operator.bench.sandbox import kernel as k\n"
        "stop = threading.Event()\n"
        "threading.Thread(target=stop.wait).start()\n"
        "try:\n"
        "    k.apply(sys.argv[1])\n"
        "    print('applied')\n"
        "except k.KernelLimitsUnavailable as exc:\n"
        "    print('refused:', exc)\n"
        "stop.set()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.stdout.startswith("refused: the process must be single-threaded"), out.stdout


def test_a_kernel_without_the_limits_refuses_to_run(
    tmp_path: Path, listener: socket.socket
) -> None:
    """Stated behaviour where the kernel lacks what is needed: not run, not run unguarded.

    A Landlock ABI beyond this kernel's stands in for a kernel without Landlock; the code
    (which would connect, with the hook off) never starts.
    """
    port = listener.getsockname()[1]
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
    result = run_one(
        code,
        [],
        limit_seconds=10,
        scratch_root=tmp_path,
        guard=False,
        minimum_landlock_abi=ABI + 1,
    )
    assert result.ran is False
    assert "kernel limits unavailable" in result.detail
    assert f"Landlock ABI is {ABI}" in result.detail
    assert _connections(listener) == 0


def test_honest_code_still_has_what_tests_use(tmp_path: Path) -> None:
    """The standard library, threads and files in the scratch directory keep working."""
    code = (
        "import bisect, collections, dataclasses, datetime, decimal, fractions, functools\n"
        "import hashlib, heapq, itertools, json, math, random, re, statistics, string\n"
        "import tempfile, threading, typing, unicodedata\n"
        "import concurrent.futures, html, sqlite3, xml.etree.ElementTree  # package submodules\n"
        "def solve(xs):\n"
        "    return sorted(xs)\n"
        "with open('notes.txt', 'w') as fh:\n"
        "    fh.write('kept')\n"
        "with tempfile.NamedTemporaryFile('w') as fh:\n"
        "    fh.write('temp')\n"
        "os.makedirs('a/b')\n"
        "os.rename('notes.txt', 'a/b/notes.txt')\n"
        "box = []\n"
        "t = threading.Thread(target=lambda: box.append(hashlib.sha256(b'x').hexdigest()))\n"
        "t.start()\n"
        "t.join()\n"
    )
    tests = (
        "assert solve([3, 1, 2]) == [1, 2, 3]\n"
        "assert open('a/b/notes.txt').read() == 'kept'\n"
        "assert len(box[0]) == 64\n"
        "assert decimal.Decimal('1.1') + decimal.Decimal('2.2') == decimal.Decimal('3.3')\n"
        "assert random.Random(1).random() < 1\n"
        "assert sqlite3.connect(':memory:').execute('select 3').fetchone() == (3,)\n"
    )
    result = _run(code, tests, tmp_path, {})
    assert held(result), why(result)


def test_the_allow_list_names_calls_libseccomp_knows() -> None:
    """Each allowed name resolves on this machine: a misspelt name would silently allow
    nothing (and honest code would fail), so the table is checked against libseccomp."""
    import pyseccomp

    unknown = [
        name
        for name in sandbox_syscalls.allowed_names()
        if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) == -1
    ]
    assert unknown == []
    assert os.path.realpath(sys.base_prefix) in sandbox_kernel.read_only_roots()


@pytest.mark.parametrize("walls", WALLS)
def test_attack_signalling_a_process_outside_the_sandbox(
    walls: dict[str, Any], tmp_path: Path
) -> None:
    """Bench (same uid on a laptop) is out of reach: Landlock scopes signals (ABI 6+),
    seccomp refuses them below that."""
    # Not a descendant of this process: run_one kills every descendant of its caller.
    spawn = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(p.pid)\n"
    )
    pid = int(subprocess.check_output([sys.executable, "-c", spawn], text=True, timeout=30))
    try:
        code = f"os.kill({pid}, 9)\nDONE.append(1)\n"
        result = _run(code, "assert DONE", tmp_path, walls)
        assert not held(result), why(result)
        assert Path(f"/proc/{pid}").exists()
        assert "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    finally:
        os.kill(pid, 9)
