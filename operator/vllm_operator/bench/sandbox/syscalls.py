"""The seccomp allow list of the python-tests child: every system call it may make, and why.

Everything not named here fails with ``EPERM`` (the default action, for every number,
including numbers a newer kernel adds), as in Docker's and containerd's default profiles and
Chromium's renderer filter: a deny list lets through what it forgot to name, and an attacker
with native code (an extension module written into the scratch directory and loaded) named
``utimensat``, ``fchmodat2``, ``setxattrat``, SysV IPC and ``sched_setaffinity`` on other
processes. One call answers ``ENOSYS`` instead: ``clone3``, whose flags sit in memory the
filter cannot read, so that glibc falls back to ``clone``, whose flags it can.

The list was measured, not guessed: ``strace -f`` of the child running every builtin
suite's python-tests answer plus a wide honest workload (threads, a thread pool, tempfile,
sqlite3 on disk, hashlib, decimal, json, zlib, 50 MiB allocations) on CPython 3.11, 3.12
and 3.13, keeping the calls made after the filter was loaded (``hack/sandbox-syscalls.sh``;
figures in docs/bench.md). Calls of the same family that glibc may use instead on another
version or architecture (``open`` beside ``openat``, ``stat`` beside ``newfstatat``) are
named with their group; names this architecture does not have are skipped.

Where a call is only safe with some arguments, only those are allowed (``ARGUMENTS``): the
``prctl`` options, ``fcntl`` commands and ``ioctl`` requests Python uses; ``clone`` for
threads only and never a namespace; signals, ``prlimit64`` and ``sched_getaffinity`` on the
process itself only (``SELF``: 0 or its own pid); no set-user-ID, set-group-ID or sticky
bit in the mode of a file or directory it creates (Landlock does not cover modes); and
``renameat2`` with no flag but ``RENAME_NOREPLACE``: ``RENAME_WHITEOUT`` leaves a character
device 0:0 where the source was (a device node that ``mknod`` itself may not make, and that
Landlock does not see as one), ``RENAME_EXCHANGE`` swaps two names and nothing honest uses it.
"""

from __future__ import annotations

import errno
from typing import Any

ALLOWED: dict[str, tuple[str, ...]] = {
    # Memory: the allocator, and extension modules mapped executable (the standard library's
    # own, _decimal or _sqlite3, are loaded after the filter, when the answer imports them).
    "memory": ("brk", "mmap", "munmap", "mremap", "mprotect", "madvise"),
    # Threads (clone is narrowed below) and waiting on them; rseq and the robust list are
    # registered by glibc for each new thread.
    "threads": (
        "clone",
        "futex",
        "set_robust_list",
        "set_tid_address",
        "rseq",
        "sched_yield",
        "exit",
        "exit_group",
    ),
    # Time and sleeping.
    "time": (
        "clock_gettime",
        "clock_getres",
        "clock_nanosleep",
        "nanosleep",
        "gettimeofday",
        "time",
    ),
    # Signal state of this process (handlers, masks); sending is narrowed below.
    "signals": (
        "rt_sigaction",
        "rt_sigprocmask",
        "rt_sigreturn",
        "sigaltstack",
        "kill",
        "tgkill",
    ),
    # Files through descriptors. Which files may be opened for what is Landlock's business
    # (read-only the Python installation and libraries, read-write scratch); ftruncate only
    # reaches a file opened for writing, which is only in scratch.
    "descriptors": (
        "read",
        "readv",
        "pread64",
        "preadv",
        "write",
        "writev",
        "pwrite64",
        "pwritev",
        "lseek",
        "close",
        "close_range",
        "dup",
        "dup2",
        "dup3",
        "pipe",
        "pipe2",
        "fcntl",
        "ioctl",
        "fsync",
        "fdatasync",
        "ftruncate",
        "fadvise64",
        "sendfile",
        "copy_file_range",
        "poll",
        "ppoll",
        "select",
        "pselect6",
    ),
    # Files by name: opening (mode narrowed below), listing, and the changes Landlock scopes
    # to scratch (create, rename, remove). stat and readlink are what Python's imports and
    # os.path.realpath need; they tell what exists, never what a file holds.
    "paths": (
        "open",
        "openat",
        "creat",
        "mkdir",
        "mkdirat",
        "rename",
        "renameat",
        "renameat2",
        "unlink",
        "unlinkat",
        "rmdir",
        "stat",
        "lstat",
        "fstat",
        "newfstatat",
        "statx",
        "access",
        "faccessat",
        "faccessat2",
        "readlink",
        "readlinkat",
        "getdents64",
        "getcwd",
        "chdir",
        "fchdir",
        "umask",
    ),
    # Facts about this process only (pids, ids, its own limits and usage, random bytes).
    "self": (
        "getpid",
        "getppid",
        "gettid",
        "getuid",
        "geteuid",
        "getgid",
        "getegid",
        "getgroups",
        "getresuid",
        "getresgid",
        "getpgrp",
        "getrandom",
        "getrusage",
        "getrlimit",
        "prlimit64",
        "sched_getaffinity",
        "uname",
        "prctl",
    ),
}
"""System calls by group; every other call is refused (``EPERM``)."""

# prctl(2) options: a thread's name (threading, glibc) and glibc's names for its mappings.
_PR_SET_NAME = 15
_PR_GET_NAME = 16
_PR_SET_VMA = 0x53564D41
PRCTL_OPTIONS = (_PR_SET_NAME, _PR_GET_NAME, _PR_SET_VMA)
# fcntl(2) commands: descriptor flags, status flags and record locks (sqlite3), not owners,
# leases, pipe sizes or seals.
FCNTL_COMMANDS = (0, 1, 2, 3, 4, 5, 6, 7, 36, 37, 38, 1030)
# ioctl(2) requests: isatty (TCGETS), the terminal size, close-on-exec, bytes readable.
IOCTL_REQUESTS = (0x5401, 0x5413, 0x5450, 0x5451, 0x541B)
# clone(2): CLONE_THREAD set and no namespace flag (linux/sched.h).
CLONE_THREAD = 0x00010000
CLONE_NAMESPACES = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
    | 0x00000080  # CLONE_NEWTIME
)
SPECIAL_MODE_BITS = 0o7000
"""Set-user-ID, set-group-ID and sticky: never in the mode of a file the code creates."""
RENAME_NOREPLACE = 1
"""The one ``renameat2`` flag allowed (linux/fs.h); ``RENAME_EXCHANGE`` (2) and
``RENAME_WHITEOUT`` (4), and any flag a later kernel adds, are refused."""
RENAME_FLAGS_ARGUMENT = 4
MODE_ARGUMENT = {"open": 2, "openat": 3, "creat": 1, "mkdir": 1, "mkdirat": 2}
SELF_ARGUMENT = {
    "kill": (0, False),
    "tgkill": (0, False),
    "prlimit64": (0, True),
    "sched_getaffinity": (0, True),
}
"""Calls allowed only on this process: (the argument that names it, whether 0 means itself
too). ``kill(0)`` would signal the process group, so signals name the pid itself."""


def allowed_names() -> tuple[str, ...]:
    """Every name of the table, once, in table order."""
    return tuple(dict.fromkeys(name for group in ALLOWED.values() for name in group))


def _rules(pyseccomp: Any, pid: int) -> list[tuple[str, list[Any]]]:
    """(name, argument conditions) pairs; a name with several pairs is allowed by any one."""
    arg, eq, masked = pyseccomp.Arg, pyseccomp.EQ, pyseccomp.MASKED_EQ
    narrowed: dict[str, list[list[Any]]] = {
        "prctl": [[arg(0, eq, option)] for option in PRCTL_OPTIONS],
        "fcntl": [[arg(1, eq, command)] for command in FCNTL_COMMANDS],
        "ioctl": [[arg(1, masked, 0xFFFFFFFF, request)] for request in IOCTL_REQUESTS],
        "clone": [[arg(0, masked, CLONE_THREAD | CLONE_NAMESPACES, CLONE_THREAD)]],
        # the flags are an unsigned int: every other bit of its low 32 must be clear
        "renameat2": [[arg(RENAME_FLAGS_ARGUMENT, masked, 0xFFFFFFFF & ~RENAME_NOREPLACE, 0)]],
    }
    for name, index in MODE_ARGUMENT.items():
        narrowed[name] = [[arg(index, masked, SPECIAL_MODE_BITS, 0)]]
    for name, (index, zero_is_self) in SELF_ARGUMENT.items():
        narrowed[name] = [[arg(index, eq, pid)], *([[arg(index, eq, 0)]] if zero_is_self else [])]
    rules: list[tuple[str, list[Any]]] = []
    for name in allowed_names():
        for conditions in narrowed.get(name, [[]]):
            rules.append((name, conditions))
    return rules


def build_seccomp(pyseccomp: Any, pid: int) -> Any:
    """The allow-list filter for process ``pid``, not yet loaded (``OSError`` if it fails).

    Names this architecture lacks (``open`` on arm64, say) are skipped.
    """
    flt = pyseccomp.SyscallFilter(pyseccomp.ERRNO(errno.EPERM))
    flt.set_attr(pyseccomp.Attr.CTL_NNP, 1)
    flt.set_attr(pyseccomp.Attr.CTL_TSYNC, 1)
    # A call of another ABI (int 0x80 on x86_64) has other numbers: the process dies.
    flt.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.KILL_PROCESS)
    for name, conditions in _rules(pyseccomp, pid):
        if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) < 0:
            continue  # not a call of this architecture (a negative pseudo-number, or -1)
        flt.add_rule(pyseccomp.ALLOW, name, *conditions)
    # clone3 passes its flags in memory the filter cannot read: ENOSYS makes glibc use clone.
    flt.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    return flt
