"""The seccomp allow list and the drop of root, checked by their effects (issue 31).

The seccomp filter was a deny list, and answer code with native code found what it did not
name: it made a copy of ``id`` set-user-ID root, changed modes and mtimes outside scratch,
left SysV shared memory for a later run, throttled and killed another process of its uid,
and reached privileged calls as root. Each group of that report is one test here, with
answer code in Python and as a native extension (``data/raw_syscalls.c``, compiled by
``cc``, written into scratch by the answer and loaded under a name the audit hook allows),
started by root and by an unprivileged user (``sandbox_identities``), with every wall and
with the kernel's alone (the audit hook off).

Every answer carries a control (something honest of the same kind that must work: a file in
scratch, a pipe, its own affinity) and reports each attack that was not refused; its tests
pass only when the control worked and no attack did, and each test then checks the effect
from outside: modes, owners, mtimes and xattrs of the files, IPC objects by key, the victim
process's scheduling class, affinity, nice value, CPU limit and state.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import platform
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_identities import (
    AS_NOBODY,
    NOBODY,
    Identity,
    as_nobody,
    in_process,
    new_base,
    probing,
    spawn_detached,
)
from sandbox_probe import held, why

from vllm_operator.bench.sandbox import kernel as sandbox_kernel
from vllm_operator.bench.sandbox import run as sandbox
from vllm_operator.bench.sandbox.run import RunResult, run_one

pytestmark = [
    # code run as nobody, forking and counted against its uid: with the other sandbox modules,
    # one at a time (conftest.py)
    pytest.mark.xdist_group("sandbox"),
    pytest.mark.skipif(
        sandbox_kernel.landlock_abi() < 1, reason="the kernel has no Landlock: nothing runs"
    ),
    pytest.mark.skipif(
        platform.machine() not in ("x86_64", "aarch64"),
        reason="the system call numbers below are those of x86_64 and arm64",
    ),
]
WALLS = [
    pytest.param({}, id="all-walls"),
    pytest.param({"guard": False}, id="kernel-alone"),
]
HOW = ["python", "native"]
AT_FDCWD = -100
EPERM = 1
EACCES = 13
_X86 = platform.machine() == "x86_64"
NR = {  # x86_64, arm64 (numbers from 424 on are the same on every architecture)
    "getpid": (39, 172),
    "openat": (257, 56),
    "mkdirat": (258, 34),
    "newfstatat": (262, 79),
    "utimensat": (280, 88),
    "fchmodat": (268, 53),
    "fchmodat2": (452, 452),
    "fchownat": (260, 54),
    "lsetxattr": (189, 6),
    "setxattr": (188, 5),
    "setxattrat": (463, 463),
    "file_setattr": (469, 469),
    "lgetxattr": (192, 9),
    "listxattr": (194, 11),
    "shmget": (29, 194),
    "msgget": (68, 186),
    "semget": (64, 190),
    "mq_open": (240, 180),
    "pipe2": (293, 59),
    "sched_setscheduler": (144, 119),
    "sched_setaffinity": (203, 122),
    "sched_getaffinity": (204, 123),
    "sched_setattr": (314, 274),
    "setpriority": (141, 140),
    "prlimit64": (302, 261),
    "ioprio_set": (251, 30),
    "kill": (62, 129),
    "tgkill": (234, 131),
    "get_robust_list": (274, 100),
    "reboot": (169, 142),
    "sethostname": (170, 161),
    "swapoff": (168, 225),
    "quotactl": (179, 60),
    "syslog": (103, 116),
    "fanotify_init": (300, 262),
    "inotify_init1": (294, 26),
    "setresuid": (117, 147),
    "clock_adjtime": (305, 266),
    "sysinfo": (99, 179),
    "uname": (63, 160),
}
MTIME_2009 = 1234567890
O_CREAT_WRONLY = 0o101
O_DIRECTORY = 0o200000 if _X86 else 0o40000


def _unavailable(reason: str) -> None:
    """Skip, saying why; in CI (``VLLMOP_REQUIRE_SANDBOX_TOOLS``, set by .ci/run) fail."""
    if os.environ.get("VLLMOP_REQUIRE_SANDBOX_TOOLS"):
        pytest.fail(f"{reason} (VLLMOP_REQUIRE_SANDBOX_TOOLS is set)")
    pytest.skip(reason)


def nr(name: str) -> int:
    return NR[name][0 if _X86 else 1]


def _number(name: str) -> str | int:
    """A call's number on this architecture; ``i386:<n>`` (the 32-bit ABI) as it is."""
    return name if name.startswith("i386:") else nr(name)


def hexa(data: bytes) -> str:
    return "h:" + data.hex()


@pytest.fixture(scope="module")
def helper_so(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The native extension, built from ``data/raw_syscalls.c`` (no Python.h needed)."""
    if shutil.which("cc") is None:
        _unavailable("no C compiler (cc): hack/ci-tools.sh installs gcc")
    out = tmp_path_factory.mktemp("native") / "helper.so"
    source = Path(__file__).with_name("data") / "raw_syscalls.c"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-s", "-o", str(out), str(source)], check=True)
    return out.read_bytes()


@pytest.fixture(scope="module", params=["root", "user"])
def identity(request: pytest.FixtureRequest) -> Iterator[Identity]:
    base = new_base()
    base.chmod(0o711)  # as LocalSandbox does: the work directory's full path must work
    try:
        if request.param == "root":
            if os.geteuid() != 0:
                pytest.skip("started as an unprivileged user: there is no root to drop")
            yield Identity("root", NOBODY, probing(in_process(base)), AS_NOBODY)
        elif os.geteuid() != 0:
            yield Identity("user", os.getuid(), probing(in_process(base)), [])
        else:
            runner = as_nobody(base)
            if isinstance(runner, str):
                _unavailable(runner)
            yield Identity("user", NOBODY, probing(runner), AS_NOBODY)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def outside(identity: Identity) -> Iterator[Path]:
    """Files outside scratch: ``plant`` (a copy of ``id``, root's when root started the
    sandbox) and ``target`` (the code's own uid: only the sandbox stands in the way)."""
    base = new_base()
    base.chmod(0o755)
    plant, target = base / "plant", base / "target"
    shutil.copy(shutil.which("id") or "/usr/bin/id", plant)
    plant.chmod(0o755)
    target.write_text("data")
    target.chmod(0o644)
    with contextlib.suppress(OSError):  # a file system without user xattrs: reads fail too
        os.setxattr(target, "user.secret", b"s3cret")
    os.chown(target, identity.uid, identity.uid)
    if identity.name == "user":
        os.chown(plant, identity.uid, identity.uid)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _state(path: Path) -> tuple[int, int, int, int, list[str]]:
    info = os.lstat(path)
    try:
        xattrs = sorted(os.listxattr(path, follow_symlinks=False))
    except OSError:
        xattrs = []
    return info.st_mode, info.st_uid, info.st_gid, info.st_mtime_ns, xattrs


def python_answer(attacks: dict[str, str], control: str, allowed: tuple[int, ...]) -> str:
    """Answer code: ``control`` must run; each attack (a statement) must be refused with a
    sandbox PermissionError or one of ``allowed`` errnos, else it is reported in WORKED."""
    lines = [
        "import os, sys, time, resource",
        "WORKED = []",
        control,
        "CONTROL = True",
    ]
    for name, statement in attacks.items():
        lines += [
            "try:",
            f"    {statement}",
            f"    WORKED.append({name!r})",
            "except ImportError as exc:",
            f"    WORKED.append(({name!r}, repr(exc))) if 'sandbox' not in str(exc) else None",
            "except OSError as exc:",
            f"    if exc.errno not in {allowed!r} and 'sandbox' not in str(exc):",
            f"        WORKED.append(({name!r}, repr(exc)))",
        ]
    return "\n".join(lines) + "\n"


def native_answer(
    so: bytes, calls: dict[str, list[object]], allowed: tuple[int, ...] = (EPERM,)
) -> str:
    """Answer code that writes the extension into scratch, loads it, and reports each call
    labelled ``ok_*`` that failed (CONTROL) and each other call that was not refused with
    one of ``allowed`` errnos (WORKED)."""
    cmds = "".join(
        f"{label} {' '.join(str(a) for a in (_number(str(args[0])), *args[1:]))}\n"
        for label, args in calls.items()
    )
    return (
        "import base64, importlib.machinery, importlib.util\n"
        f"open('helper.so', 'wb').write(base64.b64decode({base64.b64encode(so).decode()!r}))\n"
        f"open('cmds', 'w').write({cmds!r})\n"
        "loader = importlib.machinery.ExtensionFileLoader('helper', './helper.so')\n"
        "spec = importlib.util.spec_from_file_location('helper', './helper.so', loader=loader)\n"
        "try:\n"
        "    importlib.util.module_from_spec(spec)\n"
        "except SystemError:\n"
        "    pass  # PyInit_helper made its calls and returned NULL\n"
        "RESULTS = {l.split()[0]: (int(l.split()[1]), int(l.split()[2]))"
        " for l in open('results')}\n"
        f"assert len(RESULTS) == {len(calls)}, RESULTS\n"
        "CONTROL = all(r >= 0 for k, (r, e) in RESULTS.items() if k.startswith('ok_'))\n"
        "WORKED = [(k, r, e) for k, (r, e) in RESULTS.items()\n"
        f"          if not k.startswith('ok_') and not (r < 0 and e in {allowed!r})]\n"
    )


TESTS = "assert CONTROL, 'the control failed'\nassert not WORKED, WORKED\n"


def _held(identity: Identity, code: str, walls: dict[str, Any]) -> None:
    result = identity.run(code, TESTS, walls)
    assert held(result), why(result)


# -- file metadata outside scratch (High) ---------------------------------------------------


@pytest.mark.parametrize("walls", WALLS)
@pytest.mark.parametrize("how", HOW)
def test_file_metadata_outside_scratch_is_unchanged(
    how: str, walls: dict[str, Any], identity: Identity, outside: Path, helper_so: bytes
) -> None:
    """No set-user-ID plant, no capability xattr, no mode, owner, mtime or attribute change
    outside scratch; no special mode bits on files created inside it."""
    plant, target = str(outside / "plant"), str(outside / "target")
    before = {name: _state(outside / name) for name in ("plant", "target")}
    timespec = struct.pack("=qq", MTIME_2009, 0) * 2
    capability = struct.pack("=IIIII", 0x02000000, 0xFFFFFFFF, 0, 0xFFFFFFFF, 0)  # v2, all
    if how == "native":
        code = native_answer(
            helper_so,
            {
                "ok_getpid": ["getpid"],
                "ok_create": ["openat", AT_FDCWD, "s:ok.txt", O_CREAT_WRONLY, 0o644],
                "utimensat": ["utimensat", AT_FDCWD, f"s:{target}", hexa(timespec), 0],
                "fchmodat2": ["fchmodat2", AT_FDCWD, f"s:{plant}", 0o4755, 0],
                "fchmodat": ["fchmodat", AT_FDCWD, f"s:{plant}", 0o4755],
                "fchownat": ["fchownat", AT_FDCWD, f"s:{target}", 0, 0, 0],
                "lsetxattr": ["lsetxattr", f"s:{target}", "s:user.planted", "s:x", 1, 0],
                "setcap": [
                    "setxattr",
                    f"s:{plant}",
                    "s:security.capability",
                    hexa(capability),
                    20,
                    0,
                ],
                "setxattrat": [
                    "setxattrat",
                    AT_FDCWD,
                    f"s:{target}",
                    0,
                    "s:user.planted",
                    "b:16",
                    16,
                ],
                "file_setattr": ["file_setattr", AT_FDCWD, f"s:{target}", "b:24", 24, 0],
                "setuid_in_scratch": ["openat", AT_FDCWD, "s:suid", O_CREAT_WRONLY, 0o4755],
                "sticky_dir": ["mkdirat", AT_FDCWD, "s:sticky", 0o1777],
            },
        )
    else:
        code = python_answer(
            {
                "utime": f"os.utime({target!r}, ({MTIME_2009}, {MTIME_2009}))",
                "chmod": f"os.chmod({plant!r}, 0o4755)",
                "fchmod": f"os.fchmod(os.open({plant!r}, os.O_RDONLY), 0o4755)",
                "chown": f"os.chown({target!r}, 0, 0)",
                "setxattr": f"os.setxattr({target!r}, 'user.planted', b'x')",
                "setcap": f"os.setxattr({plant!r}, 'security.capability', {capability!r})",
                "setuid_in_scratch": "os.close(os.open('suid', os.O_CREAT | os.O_WRONLY, 0o4755))",
            },
            "open('ok.txt', 'w').write('fine')",
            (EPERM, EACCES),  # EACCES: Landlock refused to open the plant at all
        )
    _held(identity, code, walls)
    assert {name: _state(outside / name) for name in ("plant", "target")} == before


# -- SysV and POSIX IPC (Medium) -------------------------------------------------------------


def _sysv_keys() -> set[int]:
    keys: set[int] = set()
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}", encoding="ascii") as fh:
            next(fh)
            keys.update(int(line.split()[0]) for line in fh if line.strip())
    return keys


def _mqueue_exists(name: str) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "mq_open"):
        libc = ctypes.CDLL("librt.so.1", use_errno=True)
    fd = libc.mq_open(f"/{name}".encode(), os.O_RDONLY)
    if fd >= 0:
        libc.mq_unlink(f"/{name}".encode())
        os.close(fd)
        return True
    return False


@pytest.mark.parametrize("walls", WALLS)
@pytest.mark.parametrize("how", HOW)
def test_no_ipc_object_is_left(
    how: str, walls: dict[str, Any], identity: Identity, helper_so: bytes
) -> None:
    key = 0x5B000000 + secrets.randbelow(1 << 20)
    name = f"sbx-{key:x}"
    ipc_creat = 0o1000
    if how == "native":
        code = native_answer(
            helper_so,
            {
                "ok_pipe": ["pipe2", "b:8", 0],
                "shmget": ["shmget", key, 1 << 20, ipc_creat | 0o666],
                "msgget": ["msgget", key, ipc_creat | 0o666],
                "semget": ["semget", key, 1, ipc_creat | 0o666],
                "mq_open": ["mq_open", f"s:{name}", 0o102, 0o666, 0],
            },
        )
    else:
        code = python_answer(
            {"shm_open": f"import _posixshmem; _posixshmem.shm_open('/{name}', 0o102, 0o666)"},
            "r, w = os.pipe()",
            (EPERM, EACCES),
        )
    _held(identity, code, walls)
    assert key not in _sysv_keys()
    assert not Path(f"/dev/shm/{name}").exists()
    assert not _mqueue_exists(name)


# -- other processes of the same uid (Medium) ------------------------------------------------


def _victim_state(pid: int) -> tuple[object, ...]:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    return (
        os.sched_getscheduler(pid),
        os.sched_getaffinity(pid),
        os.getpriority(os.PRIO_PROCESS, pid),
        # /proc, not prlimit(2): reading another uid's limits needs CAP_SYS_RESOURCE
        [line for line in Path(f"/proc/{pid}/limits").read_text().splitlines() if "cpu" in line],
        stat[0] in "RS",  # running or sleeping, never T (stopped) or gone
    )


@pytest.fixture
def victim(identity: Identity) -> Iterator[int]:
    """A process of the uid the code runs as, outside the sandbox's descendants."""
    pid = spawn_detached([*identity.as_code_uid, "sleep", "60"])
    ends = time.monotonic() + 30
    while Path(f"/proc/{pid}/comm").read_text().strip() != "sleep":  # setpriv has exec'd
        assert time.monotonic() < ends, "the victim did not start"
        time.sleep(0.01)
    yield pid
    os.kill(pid, 9)


@pytest.mark.parametrize("walls", WALLS)
@pytest.mark.parametrize("how", HOW)
def test_other_processes_are_out_of_reach(
    how: str, walls: dict[str, Any], identity: Identity, victim: int, helper_so: bytes
) -> None:
    """Scheduling class, affinity, priority and limits of another process are not the
    code's to change, nor its state (stopped, killed)."""
    before = _victim_state(victim)
    assert before[-1], before
    if how == "native":
        rlimit = struct.pack("=QQ", 1, 1)
        sched_attr = struct.pack("=IIQiIQQQ", 56, 5, 0, 0, 0, 0, 0, 0)  # SCHED_IDLE
        code = native_answer(
            helper_so,
            {
                "ok_affinity": ["sched_getaffinity", 0, 128, "b:128"],
                "ok_own_limit": ["prlimit64", 0, 0, 0, "b:16"],
                "setscheduler": ["sched_setscheduler", victim, 5, "b:4"],
                "setattr": ["sched_setattr", victim, hexa(sched_attr), 0],
                "setaffinity": ["sched_setaffinity", victim, 8, hexa(struct.pack("=Q", 1))],
                "setpriority": ["setpriority", 0, victim, 19],
                "prlimit": ["prlimit64", victim, 0, hexa(rlimit), 0],
                "ioprio": ["ioprio_set", 1, victim, 3 << 13],
                "kill": ["kill", victim, 19],
                "tgkill": ["tgkill", victim, victim, 19],
                "robust_list": ["get_robust_list", victim, "b:8", "b:8"],
            },
        )
    else:
        code = python_answer(
            {
                "setscheduler": f"os.sched_setscheduler({victim}, 5, os.sched_param(0))",
                "setaffinity": f"os.sched_setaffinity({victim}, {{0}})",
                "setpriority": f"os.setpriority(os.PRIO_PROCESS, {victim}, 19)",
                "prlimit": f"resource.prlimit({victim}, resource.RLIMIT_CPU, (1, 1))",
                "kill": f"os.kill({victim}, 19)",
            },
            "os.sched_getaffinity(0); resource.getrlimit(resource.RLIMIT_CPU)",
            (EPERM,),
        )
    _held(identity, code, walls)
    assert _victim_state(victim) == before


# -- privileged calls (Medium) ---------------------------------------------------------------


PRIVILEGED = {
    # each with arguments the kernel itself would refuse with EINVAL or EFAULT (not EPERM)
    "reboot": ["reboot", 0, 0, 0, 0],
    "sethostname": ["sethostname", "s:x", 100],
    "swapoff": ["swapoff", 0],
    "quotactl": ["quotactl", 0, 0, 0, 0],
    "syslog": ["syslog", 10, 0, 0],  # SIZE_BUFFER: allowed to anyone with dmesg_restrict=0
    "fanotify_init": ["fanotify_init", 0xFFFFFFFF, 0],
    "setresuid": ["setresuid", 0, 0, 0],
    "adjtimex": ["clock_adjtime", 0, "b:256"],  # modes 0: a read, allowed to anyone
}


@pytest.mark.parametrize("walls", WALLS)
@pytest.mark.parametrize("how", HOW)
def test_privileged_calls_never_reach_the_kernel(
    how: str, walls: dict[str, Any], identity: Identity, helper_so: bytes
) -> None:
    hostname = socket.gethostname()
    if how == "native":
        code = native_answer(helper_so, {"ok_uname": ["uname", "b:512"], **PRIVILEGED})
    else:
        code = python_answer(
            {
                "chroot": "os.chroot('.')",
                "setresuid": "os.setresuid(0, 0, 0)",
                "fifo": "os.sched_setscheduler(0, 1, os.sched_param(1))",
                "clock": "time.clock_settime(time.CLOCK_REALTIME, time.time())",
            },
            "os.uname()",
            (EPERM,),
        )
    _held(identity, code, walls)
    assert socket.gethostname() == hostname


FILTER_ALONE = """
import ctypes, json, os, sys
sys.path.insert(0, sys.argv[1])
import syscalls, pyseccomp
libc = ctypes.CDLL(None, use_errno=True)
calls = json.loads(sys.argv[2])

def call(args):
    ctypes.set_errno(0)
    converted = [ctypes.c_char_p(a[2:].encode()) if isinstance(a, str) and a.startswith("s:")
                 else ctypes.create_string_buffer(int(a[2:])) if isinstance(a, str)
                 else ctypes.c_long(a) for a in args[1:]]
    result = libc.syscall(args[0], *converted)
    return [result, ctypes.get_errno() if result < 0 else 0]

before = {name: call(args) for name, args in calls.items()}
syscalls.build_seccomp(pyseccomp, os.getpid()).load()
after = {name: call(args) for name, args in calls.items()}
print(json.dumps({"before": before, "after": after}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="shows the filter alone as root")
def test_as_root_the_filter_alone_answers_eperm_before_the_kernel_looks() -> None:
    """The issue's finding: past the deny list, root got EINVAL/EFAULT (the kernel checked
    the arguments). Loaded alone (no uid drop), the allow list answers EPERM first."""
    calls = {
        name: [nr(str(args[0])), *args[1:]]
        for name, args in PRIVILEGED.items()
        if name != "setresuid"  # as root without the filter it would succeed: not tried
    }
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            FILTER_ALONE,
            str(Path(sandbox_kernel.__file__).parent),
            json.dumps(calls),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(out.stdout)
    # Without the filter the kernel answered (a size, a state, or its own argument check).
    assert all(result >= 0 or err != EPERM for result, err in seen["before"].values()), seen[
        "before"
    ]
    assert all(entry == [-1, EPERM] for entry in seen["after"].values()), seen["after"]


# -- what exists outside scratch (Low) ------------------------------------------------------


@pytest.mark.parametrize("walls", WALLS)
@pytest.mark.parametrize("how", HOW)
def test_no_watching_listing_or_xattrs_outside_scratch(
    how: str,
    walls: dict[str, Any],
    identity: Identity,
    outside: Path,
    *,
    victim: int,
    helper_so: bytes,
) -> None:
    """No inotify or fanotify (which would watch bench's exchange directory), no listing of
    a directory outside scratch, no other process's ``/proc`` files, no xattrs, no system
    figures. (``stat`` and ``readlink`` still answer what exists: docs/bench.md.)"""
    target = str(outside / "target")
    if how == "native":
        code = native_answer(
            helper_so,
            {
                "ok_stat": ["newfstatat", AT_FDCWD, "s:.", "b:256", 0],
                "inotify": ["inotify_init1", 0],
                "fanotify": ["fanotify_init", 0, 0],
                "list_outside": ["openat", AT_FDCWD, f"s:{outside}", O_DIRECTORY, 0],
                "proc_of_victim": ["openat", AT_FDCWD, f"s:/proc/{victim}/cmdline", 0, 0],
                "getxattr": ["lgetxattr", f"s:{target}", "s:user.secret", "b:64", 64],
                "listxattr": ["listxattr", f"s:{target}", "b:256", 256],
                "sysinfo": ["sysinfo", "b:256"],
            },
            (EPERM, EACCES),
        )
    else:
        code = python_answer(
            {
                "listdir": f"os.listdir({str(outside)!r})",
                "proc": f"open('/proc/{victim}/cmdline').read()",
                "getxattr": f"os.getxattr({target!r}, 'user.secret')",
                "listxattr": f"os.listxattr({target!r})",
            },
            "os.listdir('.')",
            (EPERM, EACCES),
        )
    _held(identity, code, walls)


def test_the_code_never_runs_as_root(identity: Identity) -> None:
    """The identity the tests above rely on: the uid they expect, root in no id."""
    code = "import os\nIDS = (os.getresuid(), os.getresgid())\n"
    tests = f"assert IDS[0] == ({identity.uid},) * 3 and 0 not in IDS[1], IDS\n"
    result = identity.run(code, tests, {"guard": False})
    assert held(result), why(result)


@pytest.mark.skipif(os.geteuid() != 0, reason="shows root that cannot drop")
def test_root_that_cannot_drop_refuses_and_says_how(tmp_path: Path) -> None:
    """Root without CAP_SETUID/CAP_SETGID (a container that dropped them, say) cannot
    become nobody: the code is not run, and the message says how to run it."""
    if shutil.which("setpriv") is None:
        _unavailable("setpriv (util-linux) is not installed")
    tmp_path.chmod(0o711)
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from vllm_operator.bench.sandbox.run import run_one\n"
        "r = run_one('X = 1', [], limit_seconds=10, scratch_root=Path(sys.argv[1]))\n"
        "print(json.dumps(r.to_json()))\n"
    )
    no_setuid = ["setpriv", "--bounding-set=-setuid,-setgid", "--inh-caps=-setuid,-setgid"]
    out = subprocess.run(
        [*no_setuid, sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(sandbox_kernel.__file__).parents[3])},
    )
    result = json.loads(out.stdout)
    assert result["ran"] is False, result
    assert "running as root, and cannot drop to uid 65534" in result["detail"]
    assert "as an unprivileged user" in result["detail"]


@pytest.mark.skipif(os.geteuid() != 0, reason="shows what root's child becomes")
def test_as_root_the_child_is_nobody_without_capabilities_in_its_own_ipc_namespace(
    tmp_path: Path,
) -> None:
    """Seen from outside while the code runs: uid and gid 65534, every capability set
    empty, no new privileges, a seccomp filter, and an IPC namespace that is not ours."""
    tmp_path.chmod(0o711)
    code = (
        "import os, time\n"
        "ends = time.monotonic() + 20\n"
        "while not os.path.exists('go') and time.monotonic() < ends:\n"
        "    time.sleep(0.01)\n"
    )
    box: list[object] = []
    runner = threading.Thread(
        target=lambda: box.append(run_one(code, [], limit_seconds=30, scratch_root=tmp_path))
    )
    runner.start()
    try:
        pid, fields = _wait_for_filtered_child()
        assert fields["Uid"].split() == [str(NOBODY)] * 4
        assert fields["Gid"].split() == [str(NOBODY)] * 4
        assert fields["Groups"] == ""
        for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
            assert int(fields[cap], 16) == 0, (cap, fields[cap])
        assert fields["NoNewPrivs"] == "1"
        assert os.readlink(f"/proc/{pid}/ns/ipc") != os.readlink("/proc/self/ns/ipc")
    finally:
        for pid in sandbox.descendants(os.getpid()):
            with contextlib.suppress(OSError):
                Path(f"/proc/{pid}/cwd/go").touch()
        runner.join(timeout=60)
    assert box, "the run did not end"
    assert box[0] == RunResult(True, ""), box


def _wait_for_filtered_child() -> tuple[int, dict[str, str]]:
    """The sandbox child, once its seccomp filter is loaded (``Seccomp: 2``)."""
    ends = time.monotonic() + 30
    while time.monotonic() < ends:
        for pid in sandbox.descendants(os.getpid()):
            try:
                text = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            fields = {
                key: value.strip()
                for key, _, value in (line.partition(":") for line in text.splitlines())
            }
            if fields.get("Seccomp") == "2":
                return pid, fields
        time.sleep(0.01)
    raise AssertionError("no sandbox child with a seccomp filter appeared")


def _ia32_emulation(helper_so: bytes, where: Path) -> bool:
    """Whether this kernel answers 32-bit calls at all (IA32 emulation built in and on)."""
    (where / "helper.so").write_bytes(helper_so)
    (where / "cmds").write_text("getpid32 i386:20\n")
    subprocess.run(
        [sys.executable, "-c", "import ctypes; ctypes.CDLL('./helper.so').PyInit_helper()"],
        cwd=where,
        check=True,
        timeout=30,
    )
    return int((where / "results").read_text().split()[1]) > 0


@pytest.mark.skipif(not _X86, reason="the 32-bit ABI of x86_64")
@pytest.mark.parametrize("walls", WALLS)
def test_the_32_bit_abi_reaches_nothing(
    walls: dict[str, Any], identity: Identity, victim: int, helper_so: bytes, tmp_path: Path
) -> None:
    """``int 0x80`` uses other numbers (i386 setpriority is 97, kill 37) that an x86_64
    filter would misread: libseccomp kills the process on any other architecture's call."""
    if not _ia32_emulation(helper_so, tmp_path):
        pytest.skip("this kernel has no IA32 emulation: no 32-bit calls at all")
    before = _victim_state(victim)
    code = native_answer(
        helper_so,
        {"setpriority": ["i386:97", 0, victim, 19], "kill": ["i386:37", victim, 19]},
    )
    result = identity.run(code, TESTS, walls)
    assert not held(result), why(result)
    assert result.detail.startswith("exit -31"), result.detail  # SIGSYS: killed, not refused
    assert _victim_state(victim) == before
