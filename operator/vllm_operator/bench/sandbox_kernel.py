"""Kernel-enforced limits the python-tests child applies to itself before any model code runs.

Python's audit hook (``sandbox_child``) is not a security boundary (PEP 578 says so):
``_posixsubprocess.fork_exec``, extension modules loaded by hand and ``os.open(...,
dir_fd=)`` all pass it. The walls that hold are the kernel's, and a process may raise them
around itself without any privilege once it has set ``PR_SET_NO_NEW_PRIVS``:

- **Landlock** (Linux 5.13+): read-only the Python installation and the shared libraries,
  read-write the scratch directory, nothing else at all (no ``/proc``, no home, no
  termination log, no exec of any file). With ABI 4+ also no TCP bind or connect, with ABI 6+
  no abstract Unix sockets and no signals to processes outside the sandbox.
- **seccomp-bpf**, built by libseccomp (through ``pyseccomp``) rather than hand-written BPF:
  no sockets of any family, no exec, no new processes (threads still work), no namespaces,
  no ``ptrace``/``process_vm_*``, no io_uring (whose requests bypass seccomp), no mount, no
  ``chmod``/``chown``/xattr writes (Landlock does not cover file metadata), no BPF, perf or
  keyrings; and where Landlock cannot scope signals (ABI < 6), no signals at all. Refused
  calls fail with ``EPERM`` (``clone3`` with ``ENOSYS``, so that glibc falls back to
  ``clone``, whose flags the filter can read); the filter is synchronised to every thread
  (``TSYNC``).

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
import errno
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
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

# seccomp: clone(2) flags (linux/sched.h).
_CLONE_THREAD = 0x00010000
_SCMP_ERROR = -1  # libseccomp's answer for a name it does not know at all
_CLONE_NAMESPACES = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
    0x00000080,  # CLONE_NEWTIME
)
REFUSED_SYSCALLS = (
    # network, of every address family, and what would use an inherited socket
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    # other programs and processes
    "execve",
    "execveat",
    "fork",
    "vfork",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",
    # namespaces and mounts
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    # io_uring: its requests (socket, connect, openat) are not seen by seccomp
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    # file metadata, which Landlock does not cover, and truncate(2) of a path (Landlock ABI 3+)
    "truncate",
    "chmod",
    "fchmod",
    "fchmodat",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    # kernel surfaces no test needs
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
)


SIGNAL_SYSCALLS = (
    "kill",
    "tkill",
    "tgkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
)
"""Refused as well where Landlock cannot scope signals (ABI < 6): the code signals nothing."""


class KernelLimitsUnavailable(Exception):
    """The kernel or the platform cannot enforce the limits: the code must not run."""


@dataclass(frozen=True)
class Applied:
    """What ``apply`` installed: Landlock of this ABI, and the seccomp filter."""

    landlock_abi: int


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


def _add_rule(libc: Any, ruleset: int, path: str, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
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
        os.close(fd)


def apply_landlock(scratch: str, read_only: Iterable[str], libc: Any | None = None) -> int:
    """Restrict this thread (and what it starts) to the rules above; return the ABI used."""
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


def build_seccomp(pyseccomp: Any, *, refuse_signals: bool) -> Any:
    """The filter described in the module docstring, not yet loaded."""
    try:
        refuse = pyseccomp.ERRNO(errno.EPERM)
        flt = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
        flt.set_attr(pyseccomp.Attr.CTL_NNP, 1)
        flt.set_attr(pyseccomp.Attr.CTL_TSYNC, 1)
        for name in REFUSED_SYSCALLS + (SIGNAL_SYSCALLS if refuse_signals else ()):
            if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) == _SCMP_ERROR:
                raise KernelLimitsUnavailable(f"libseccomp does not know {name}: too old")
            flt.add_rule(refuse, name)
        # clone: threads only (CLONE_THREAD set), and never a new namespace.
        flt.add_rule(refuse, "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, _CLONE_THREAD, 0))
        for flag in _CLONE_NAMESPACES:
            flt.add_rule(refuse, "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
        # clone3 passes its flags in memory the filter cannot read: ENOSYS makes glibc use clone.
        flt.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    except OSError as exc:
        raise KernelLimitsUnavailable(f"cannot build the seccomp filter: {exc}") from exc
    return flt


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


def apply(scratch: str, *, minimum_abi: int = 1) -> Applied:
    """Landlock, then seccomp, on this single-threaded process; raise where either is missing.

    ``minimum_abi``: the oldest Landlock ABI accepted (1 suffices: what later ABIs add,
    seccomp refuses instead; tests raise it to see the refusal).
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
    flt = build_seccomp(_pyseccomp(), refuse_signals=abi < 6)
    apply_landlock(scratch, read_only_roots(), libc)
    load_seccomp(flt)
    return Applied(abi)
