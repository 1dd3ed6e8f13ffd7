"""The answer's scratch directory seen from outside: what it holds during a run, and its removal.

Two holes made this a module of its own (issue 38). Writes from C (``sqlite3``, or an
extension module the answer loads) pass the audit hook, so "16 files opened for writing"
counted nothing that mattered: 1 GiB reached the disk in half a second, 1 MiB a file
(``RLIMIT_FSIZE``, which the kernel does enforce) times as many files as the answer liked.
And ``shutil.rmtree`` could not remove what an answer left: a directory made with mode
0300 cannot be listed by its own uid, and a 1,500-deep tree made it raise
``RecursionError``, which killed the laptop helper and the Job's ``sandbox serve``.

So the process that started the child (``run``), never the child, does both:

- ``measure`` walks the run's directory while the code runs (every ``POLL_SECONDS``) and
  says when it holds more than ``WRITE_BUDGET_BYTES`` on disk (``st_blocks``, directories
  included), more than ``MAX_ENTRIES`` names or anything deeper than ``MAX_DEPTH``; ``run``
  then kills the child. The walk holds one descriptor per level (at most ``MAX_DEPTH``) and
  opens each level with ``O_NOFOLLOW`` relative to its parent, so a symlink swapped in by
  the running code is never followed.
- ``remove_tree`` removes everything after the run, once every process of it is dead:
  iteratively (no recursion), holding one descriptor (levels are left through ``..``,
  checked against the device and inode it came from), making each directory ``u+rwx``
  first (through ``/proc/self/fd``, so the mode change reaches the directory that was
  opened, never what a name points to), with a deadline. It never raises: what it cannot
  remove it reports.

Both are bounded: the walk by ``MAX_ENTRIES`` and ``MAX_DEPTH``, the removal by its deadline
and by ``PENDING_NAMES`` names kept per level (more are found by listing the level again).
This module imports only the standard library: the tests copy it beside ``run`` to start
the sandbox as another uid (tests/unit/bench/sandbox_identities.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

WRITE_BUDGET_BYTES = 16 << 20
"""Bytes one run may hold on disk in its directory (its output file included)."""
MAX_ENTRIES = 1024
"""Files and directories one run may hold."""
MAX_DEPTH = 32
"""Directory levels below the run's directory."""
POLL_SECONDS = 0.02
"""How often the directory is measured while the code runs."""
REMOVE_SECONDS = 60.0
"""The longest a removal may take; what is left after it is reported, not waited for."""
PENDING_NAMES = 4096
"""Subdirectory names kept per level of a removal (memory bound; the rest: listed again)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_REOPEN_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
"""For ``/proc/self/fd/<n>``: a magic link to the very directory opened (so no O_NOFOLLOW)."""
_PATH_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OWNER_ALL = stat.S_IRWXU
_NOT_EMPTY = (errno.ENOTEMPTY, errno.EEXIST)


@dataclass(frozen=True)
class Usage:
    """What the walk found, and the first limit it found exceeded (None: within)."""

    bytes: int
    entries: int
    exceeded: str | None


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def open_dir(name: str, dir_fd: int | None = None) -> int:
    """Open a directory to list and change it, never through a symlink, making it ``u+rwx``
    first where it lacks any of them (a mode the answer chose, 0300 say). The mode is changed
    through ``/proc/self/fd`` of an ``O_PATH`` descriptor: on the directory already opened,
    whatever its name points to by then. ``OSError`` when it is not a directory or gone."""
    path_fd = os.open(name, _PATH_FLAGS, dir_fd=dir_fd)
    try:
        info = os.fstat(path_fd)
        magic = f"/proc/self/fd/{path_fd}"
        if info.st_mode & _OWNER_ALL != _OWNER_ALL:
            # As its owner, or as root (which may lack the capability to read past a mode);
            # anyone else is refused, and the open below says so.
            with contextlib.suppress(OSError):
                os.chmod(magic, stat.S_IMODE(info.st_mode) | _OWNER_ALL)
        try:
            return os.open(magic, _REOPEN_FLAGS)
        except FileNotFoundError:  # no /proc: open it by name again (O_NOFOLLOW still)
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    finally:
        os.close(path_fd)


def _listing(fd: int, limit: int) -> list[tuple[str, int, bool]]:
    """(name, bytes on disk, is a directory) of at most ``limit`` entries of one level;
    entries gone meanwhile are skipped."""
    found: list[tuple[str, int, bool]] = []
    with os.scandir(fd) as entries:  # on a descriptor: rewound when closed, so re-listable
        for entry in entries:
            if len(found) >= limit:
                break
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found.append((entry.name, info.st_blocks * 512, stat.S_ISDIR(info.st_mode)))
    return found


def measure(
    root: Path,
    *,
    budget: int = WRITE_BUDGET_BYTES,
    max_entries: int = MAX_ENTRIES,
    max_depth: int = MAX_DEPTH,
) -> Usage:
    """Bytes on disk and names under ``root``, stopping at the first limit exceeded.

    Names that vanish or change during the walk (the code is still running) are skipped;
    one level is listed at a time, so at most ``max_entries`` names are held."""
    try:
        fd = open_dir(str(root))
    except OSError as exc:
        return Usage(0, 0, f"cannot read the scratch directory ({exc.strerror})")
    used, count = os.fstat(fd).st_blocks * 512, 0
    stack: list[tuple[int, list[str] | None]] = [(fd, None)]
    try:
        while stack:
            fd, pending = stack[-1]
            if pending is None:
                pending = []
                for name, size, is_dir in _listing(fd, max_entries - count + 1):
                    used, count = used + size, count + 1
                    if is_dir:
                        pending.append(name)
                    over = _exceeded(used, count, budget, max_entries)
                    if over:
                        return Usage(used, count, over)
                stack[-1] = (fd, pending)
            if not pending:
                stack.pop()
                os.close(fd)
                continue
            if len(stack) > max_depth:
                return Usage(used, count, f"more than {max_depth} directory levels")
            with contextlib.suppress(OSError):
                stack.append((open_dir(pending.pop(), dir_fd=fd), None))
    except OSError as exc:  # the root itself went away or cannot be listed
        return Usage(used, count, f"cannot read the scratch directory ({exc.strerror})")
    finally:
        for fd, _ in stack:
            os.close(fd)
    return Usage(used, count, None)


def _exceeded(used: int, count: int, budget: int, max_entries: int) -> str | None:
    if used > budget:
        return f"more than {budget >> 20} MiB on disk"
    if count > max_entries:
        return f"more than {max_entries} files and directories"
    return None


@dataclass(frozen=True)
class Removal:
    """How a removal ended: ``removed`` True when nothing of the tree is left."""

    removed: bool
    seconds: float
    detail: str = ""


def remove_tree(root: Path, *, seconds: float = REMOVE_SECONDS) -> Removal:
    """Remove ``root`` and everything under it, whatever the modes and the depth; never
    raise (see the module docstring). Only call it once nothing writes there any more."""
    started = time.monotonic()
    try:
        detail = _remove(str(root), started + seconds)
    except OSError as exc:
        detail = f"{exc.strerror or exc}"
    if not detail:
        try:
            os.rmdir(root)
        except FileNotFoundError:
            pass
        except OSError as exc:
            detail = f"cannot remove {root}: {exc.strerror}"
    return Removal(not detail, time.monotonic() - started, detail)


def _remove(root: str, deadline: float) -> str:
    """Empty ``root``; return '' when done, else why not. One descriptor is held at a time:
    a level is entered by name and left through ``..``, checked against the identity (device,
    inode) it was entered from."""
    try:
        fd = open_dir(root)
    except FileNotFoundError:
        return ""
    identities = [_identity(fd)]
    names: list[str] = []  # the name of each level below root, in its parent
    pending: list[list[str]] = [[]]
    try:
        while True:
            if time.monotonic() > deadline:
                return "the removal ran out of time"
            if not pending[-1]:
                pending[-1], stuck = _clear(fd)
                if stuck:
                    return stuck
            if pending[-1]:
                name = pending[-1].pop()
                try:
                    child = open_dir(name, dir_fd=fd)
                except (FileNotFoundError, NotADirectoryError):
                    continue
                os.close(fd)
                fd = child
                identities.append(_identity(fd))
                names.append(name)
                pending.append([])
                continue
            if not names:
                return ""
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            identities.pop()
            pending.pop()
            if _identity(fd) != identities[-1]:
                return "a directory moved during the removal"
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)


def _clear(fd: int) -> tuple[list[str], str]:
    """Remove every file and empty directory of one level; return up to ``PENDING_NAMES``
    directories that are not empty, and why the level is stuck ('' when it is not)."""
    subdirs: list[str] = []
    left = 0
    with os.scandir(fd) as entries:  # removing what was listed does not disturb the listing
        for entry in entries:
            is_dir = False
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if is_dir:
                    os.rmdir(entry.name, dir_fd=fd)
                else:
                    os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                if is_dir and exc.errno in _NOT_EMPTY:
                    if len(subdirs) < PENDING_NAMES:
                        subdirs.append(entry.name)
                    continue
                left += 1
    if left and not subdirs:
        return [], f"{left} entries cannot be removed"
    return subdirs, ""
