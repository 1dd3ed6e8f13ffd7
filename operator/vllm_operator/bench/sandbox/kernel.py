"""Kernel-enforced limits the python-tests child applies to itself before any model code runs.

Python's audit hook (``child``) is not a security boundary (PEP 578 says so):
``_posixsubprocess.fork_exec``, extension modules loaded by hand and ``os.open(...,
dir_fd=)`` all pass it. The walls that hold are the kernel's, and a process may raise them
around itself without any privilege once it has set ``PR_SET_NO_NEW_PRIVS``:

- **Landlock** (Linux 5.13+): read-only the Python installation and the shared libraries,
  read-write the scratch directory, nothing else at all (no ``/proc``, no home, no
  termination log, no exec of any file). With ABI 4+ also no TCP bind or connect, with ABI 6+
  no abstract Unix sockets and no signals to processes outside the sandbox.
- **seccomp-bpf**, built by libseccomp (through ``pyseccomp``) rather than hand-written BPF,
  as an **allow list** (``syscalls``): the system calls Python and honest answers
  were measured to make, some only with some arguments; everything else fails with
  ``EPERM`` (no sockets, exec, new processes, namespaces, ``ptrace``, io_uring, mounts,
  file metadata, xattrs, SysV or POSIX IPC, scheduling or limits of other processes,
  privileged calls; threads still work). The filter is synchronised to every thread
  (``TSYNC``).

Before both, a process running as root **drops to an unprivileged uid and gid** (65534
unless configured) with no supplementary groups and no capabilities, in an IPC namespace
of its own where it can make one: root would own every root-owned file (a set-user-ID plant)
and reach privileged calls. Where the drop fails, the code is not run. The Python
installation may be unreadable to that uid (a pyenv under a 0700 ``/root``): it is opened
before the drop, and the child reaches it through those descriptors (``Applied.roots``).

Both are applied while the process has exactly one thread (checked in ``/proc/self/task``),
so no thread exists that could race the installation; threads started later inherit both.
Where the kernel or the platform lacks either, ``apply`` raises ``KernelLimitsUnavailable``
and the child refuses to run the code (a not-run result, never an unguarded run).

Landlock is called through ``ctypes`` here rather than through the ``landlock`` package on
PyPI: that binding (1.0.0.dev5, alpha) handles file-system rights only, so it cannot
express the network rules (ABI 4) or the scopes (ABI 6) used here, and its error check
reads a possibly stale ``errno`` after calls that succeeded. The Landlock interface is
three system calls with fixed structures (``linux/landlock.h``), not a BPF program.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

# linux/landlock.h: system call numbers are the same on every architecture.
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# File-system rights, by the ABI that introduced them.
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

READ_ONLY = FS_READ_FILE | FS_READ_DIR
"""What the Python installation and the shared libraries get (not even execute)."""
SCRATCH = (
    READ_ONLY
    | FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_REFER
    | FS_TRUNCATE
)
"""What the scratch directory gets: files and directories, no links, devices, FIFOs, sockets."""

LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
"""Where the interpreter's extension modules find their shared libraries (read-only)."""

NOBODY = 65534
"""The uid and gid answer code runs as when the sandbox was started as root."""
_CLONE_NEWIPC = 0x08000000
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4


class KernelLimitsUnavailable(Exception):
    """The kernel or the platform cannot enforce the limits: the code must not run."""


@dataclass(frozen=True)
class Applied:
    """What ``apply`` installed: Landlock of this ABI, the seccomp filter, and the identity.

    ``roots``: each read-only root and a descriptor of it opened before the uid was dropped,
    through which ``/proc/self/fd/<n>`` reaches it where the new uid cannot by its path.
    """

    landlock_abi: int
    uid: int
    roots: dict[str, int]


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as exc:
        raise KernelLimitsUnavailable(f"cannot load the C library: {exc}") from exc
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    libc.prctl.argtypes = (ctypes.c_int, *[ctypes.c_ulong] * 4)
    return libc


def _call(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise KernelLimitsUnavailable(f"{what} failed: {os.strerror(err)} (errno {err})")
    return result


def landlock_abi(libc: Any | None = None) -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is absent or disabled."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = libc or _libc()
    ctypes.set_errno(0)
    version = int(
        libc.syscall(
            _SYS_LANDLOCK_CREATE_RULESET,
            None,
            ctypes.c_size_t(0),
            ctypes.c_uint32(_CREATE_RULESET_VERSION),
        )
    )
    return max(version, 0)


def handled_fs(abi: int) -> int:
    """Every file-system right this ABI knows: what is not granted by a rule is refused."""
    if abi >= 5:
        return (1 << 16) - 1  # up to IOCTL_DEV
    if abi >= 3:
        return (1 << 15) - 1  # up to TRUNCATE
    if abi == 2:
        return (1 << 14) - 1  # up to REFER
    return (1 << 13) - 1


def read_only_roots() -> list[str]:
    """The Python installation and the shared-library directories that exist."""
    roots = {
        os.path.realpath(p)
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    }
    roots.update(os.path.realpath(p) for p in LIBRARY_DIRS if os.path.isdir(p))
    return sorted(roots)


def _add_rule(libc: Any, ruleset: int, path: str | int, access: int) -> None:
    """Allow ``access`` beneath ``path`` (or an ``O_PATH`` descriptor already open)."""
    fd = path if isinstance(path, int) else os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        attr = _PathBeneathAttr(access, fd)
        _call(
            int(
                libc.syscall(
                    _SYS_LANDLOCK_ADD_RULE,
                    ctypes.c_int(ruleset),
                    ctypes.c_int(_RULE_PATH_BENEATH),
                    ctypes.byref(attr),
                    ctypes.c_uint32(0),
                )
            ),
            f"landlock_add_rule({path})",
        )
    finally:
        if not isinstance(path, int):
            os.close(fd)


def apply_landlock(
    scratch: str | int, read_only: Iterable[str | int], libc: Any | None = None
) -> int:
    """Restrict this thread (and what it starts) to the rules above; return the ABI used.

    Paths or ``O_PATH`` descriptors: after a uid drop the paths may be out of reach."""
    libc = libc or _libc()
    abi = landlock_abi(libc)
    if abi < 1:
        raise KernelLimitsUnavailable(
            "the kernel has no Landlock (Linux 5.13+ with landlock in its LSM list is needed)"
        )
    handled = handled_fs(abi)
    attr = _RulesetAttr(
        handled,
        NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0,
    )
    ctypes.set_errno(0)
    ruleset = _call(
        int(
            libc.syscall(
                _SYS_LANDLOCK_CREATE_RULESET,
                ctypes.byref(attr),
                ctypes.c_size_t(ctypes.sizeof(attr)),
                ctypes.c_uint32(0),
            )
        ),
        "landlock_create_ruleset",
    )
    try:
        for path in read_only:
            _add_rule(libc, ruleset, path, READ_ONLY & handled)
        _add_rule(libc, ruleset, scratch, SCRATCH & handled)
        _call(int(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)), "prctl(PR_SET_NO_NEW_PRIVS)")
        _call(
            int(
                libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
            ),
            "landlock_restrict_self",
        )
    finally:
        os.close(ruleset)
    return abi


def _pyseccomp() -> Any:
    """libseccomp's binding; imported before Landlock, as it looks for the library on disk."""
    try:
        import pyseccomp  # noqa: PLC0415 - only the child needs libseccomp
    except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: no libseccomp.so
        raise KernelLimitsUnavailable(f"libseccomp is not available: {exc}") from exc
    return pyseccomp


def _syscall_table() -> ModuleType:
    """``syscalls`` beside this file, by path: the child loads this module alone."""
    name = "_sandbox_syscalls"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(os.path.dirname(os.path.realpath(__file__)), "syscalls.py")
        )
        if spec is None or spec.loader is None:
            raise KernelLimitsUnavailable("cannot find syscalls.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


def build_seccomp(pyseccomp: Any) -> Any:
    """The allow-list filter of ``syscalls`` for this process, not yet loaded."""
    try:
        return _syscall_table().build_seccomp(pyseccomp, os.getpid())
    except OSError as exc:
        raise KernelLimitsUnavailable(f"cannot build the seccomp filter: {exc}") from exc


def load_seccomp(flt: Any) -> None:
    try:
        flt.load()
    except OSError as exc:
        raise KernelLimitsUnavailable(f"cannot load the seccomp filter: {exc}") from exc


def threads() -> int:
    """Threads of this process, from ``/proc/self/task`` (0 when it cannot be read)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def capabilities() -> int:
    """Every capability this process holds (inheritable, permitted, effective, ambient).

    Read from ``/proc/self/status``; where it cannot be read, all bits set (unknown counts
    as held, so the caller refuses rather than trusts)."""
    held = 0
    try:
        with open("/proc/self/status", "rb") as fh:  # bytes: no codec to import
            for line in fh:
                key, _, value = line.partition(b":")
                if key in (b"CapInh", b"CapPrm", b"CapEff", b"CapAmb"):
                    held |= int(value.strip(), 16)
    except (OSError, ValueError):
        return -1
    return held


def _clear_capabilities(libc: Any) -> None:
    """capset(2) to nothing, ambient set cleared: what a non-root process may do to itself."""
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    number = _SYS_CAPSET.get(os.uname().machine)
    if number is not None:
        header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
        data = (ctypes.c_uint32 * 6)()
        libc.syscall(ctypes.c_long(number), ctypes.byref(header), ctypes.byref(data))


def drop_privileges(uid: int, gid: int, libc: Any) -> int:
    """As root: an IPC namespace of its own (where it can), then uid/gid ``uid``/``gid``
    with no groups; in every case no capability left. Return the uid it runs as now."""
    if 0 in os.getresuid():
        libc.unshare(_CLONE_NEWIPC)  # best effort: seccomp refuses every IPC call anyway
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        except OSError as exc:
            raise KernelLimitsUnavailable(
                f"running as root, and cannot drop to uid {uid} / gid {gid} ({exc}): run "
                "`vllm-operator bench` (or `vllm-operator sandbox`) as an unprivileged user"
            ) from exc
    if capabilities() != 0:
        _clear_capabilities(libc)
    held = capabilities()
    if held != 0 or 0 in os.getresuid():
        raise KernelLimitsUnavailable(
            f"cannot run without capabilities (uid {os.getuid()}, capabilities "
            f"{'unknown' if held < 0 else hex(held)}): run it as an unprivileged user "
            "without added capabilities (Kubernetes: capabilities.drop [ALL])"
        )
    return os.getuid()


def apply(
    scratch: str, *, minimum_abi: int = 1, run_as: tuple[int, int] = (NOBODY, NOBODY)
) -> Applied:
    """Drop root, then Landlock, then seccomp, on this single-threaded process; raise where
    any of them cannot be had.

    ``minimum_abi``: the oldest Landlock ABI accepted (1 suffices: what later ABIs add,
    seccomp refuses instead; tests raise it to see the refusal). ``run_as``: the uid and
    gid to drop to when started as root.
    """
    if not sys.platform.startswith("linux"):
        raise KernelLimitsUnavailable(f"kernel limits need Linux, not {sys.platform}")
    count = threads()
    if count != 1:
        raise KernelLimitsUnavailable(
            f"the process must be single-threaded to restrict itself (it has {count or '?'})"
        )
    libc = _libc()
    abi = landlock_abi(libc)
    if abi < max(minimum_abi, 1):
        raise KernelLimitsUnavailable(
            f"the kernel's Landlock ABI is {abi}, {max(minimum_abi, 1)} or later is needed "
            "(Linux 5.13+ with landlock in its LSM list)"
        )
    flt = build_seccomp(_pyseccomp())
    flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    roots = {path: os.open(path, flags) for path in read_only_roots()}
    here = os.open(scratch, flags)
    try:
        uid = drop_privileges(*run_as, libc)
        apply_landlock(here, roots.values(), libc)
    except BaseException:
        for fd in roots.values():
            os.close(fd)
        raise
    finally:
        os.close(here)
    load_seccomp(flt)
    return Applied(abi, uid, roots)
