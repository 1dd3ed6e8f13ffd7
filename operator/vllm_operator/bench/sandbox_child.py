"""The process that runs one model answer's code against its tests (never imported by bench).

Started by ``bench.sandbox`` as ``python -I -B sandbox_child.py`` in an empty scratch
directory, with the job (JSON: code, tests, limits, marker) on stdin. Before any model code
is compiled it lowers its own resource limits (CPU time, address space, file size, open
files) and, unless the job says ``guard: false`` (used only by tests of the outer walls),
installs an audit hook (PEP 578) that cannot be removed from Python code. The hook refuses:

- network: importing ``socket``/``_socket``/``ssl`` and every ``socket.*`` event;
- other processes: fork, exec, spawn, ``subprocess``, ``os.system``, signals to any pid;
- native code: ``ctypes``, ``_posixsubprocess``, ``mmap`` imports and ``ctypes.*`` events;
- files: writes outside the scratch directory, more than ``MAX_WRITABLE_OPENS`` opens for
  writing, reads outside the scratch directory and Python's own installation (so no
  ``/proc/<pid>/environ``, no ``/dev/termination-log``, no token files);
- reaching the hook itself: ``gc`` object walks, ``sys._current_frames``, traceback frames.

The hook is a second wall, not the first: in the cluster the code runs in a container of
its own (other uid, own PID namespace, no secrets, size-limited scratch), and whatever it
leaves running is killed by its parent after the run (see ``bench.sandbox``). Printing the
job's random marker after the last test is how the parent learns the tests passed.
"""

import contextlib
import json
import os
import resource
import sys

MAX_WRITABLE_OPENS = 16
_BLOCKED_IMPORTS = frozenset(
    {
        "socket",
        "_socket",
        "ssl",
        "_ssl",
        "ctypes",
        "_ctypes",
        "_posixsubprocess",
        "subprocess",
        "multiprocessing",
        "_multiprocessing",
        "mmap",
        "pty",
        "fcntl",
    }
)
_BLOCKED_EVENTS = frozenset(
    {
        "os.fork",
        "os.forkpty",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.system",
        "os.kill",
        "os.killpg",
        "os.startfile",
        "os.setuid",
        "signal.pthread_kill",
        "subprocess.Popen",
        "resource.setrlimit",
        "resource.prlimit",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys._current_frames",
        "sys.setprofile",
        "sys.settrace",
    }
)
_PATH_EVENTS = frozenset(
    {
        "os.listdir",
        "os.scandir",
        "os.chdir",
        "os.mkdir",
        "os.rmdir",
        "os.remove",
        "os.rename",
        "os.link",
        "os.symlink",
        "os.chmod",
        "os.chown",
        "os.truncate",
        "os.utime",
        "shutil.rmtree",
        "shutil.copyfile",
        "shutil.move",
    }
)


def _limit(which: int, value: int) -> None:
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (value, value))


def _install_guard(scratch: str) -> None:
    roots = tuple(
        sorted(
            {
                os.path.realpath(p)
                for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
            }
        )
    )
    realpath = os.path.realpath
    fspath = os.fsdecode
    writes = [0]

    def under(path: object, allowed: tuple[str, ...]) -> bool:
        if isinstance(path, int):
            return True  # an already open descriptor (stdio)
        try:
            full = realpath(fspath(path))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return any(full == r or full.startswith(r + os.sep) for r in allowed)

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event == "open":
            path, mode = args[0], args[1]
            flags = args[2] if len(args) > 2 else 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                mode is None and isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR)
            )
            if writing:
                if not under(path, (scratch,)):
                    raise PermissionError(f"sandbox: writing {path!r} is not allowed")
                writes[0] += 1
                if writes[0] > MAX_WRITABLE_OPENS:
                    raise PermissionError("sandbox: too many files opened for writing")
            elif not under(path, (scratch, *roots)):
                raise PermissionError(f"sandbox: reading {path!r} is not allowed")
        elif event == "import":
            if str(args[0]).split(".")[0] in _BLOCKED_IMPORTS:
                raise ImportError(f"sandbox: module {args[0]!r} is not allowed")
        elif event in _BLOCKED_EVENTS or event.startswith(("socket.", "ctypes.")):
            raise PermissionError(f"sandbox: {event} is not allowed")
        elif event in _PATH_EVENTS:
            for path in args[:2]:
                if isinstance(path, (str, bytes, os.PathLike)) and not under(path, (scratch,)):
                    raise PermissionError(f"sandbox: {event} on {path!r} is not allowed")
        elif event == "object.__getattr__" and args[1] in ("tb_frame", "gi_frame", "cr_frame"):
            raise PermissionError("sandbox: frame access is not allowed")

    sys.addaudithook(hook)


def main() -> None:
    job = json.loads(sys.stdin.read())
    sys.stdin.close()
    scratch = os.path.realpath(os.getcwd())
    _limit(resource.RLIMIT_CPU, int(job["cpu_seconds"]))
    _limit(resource.RLIMIT_AS, int(job["memory_bytes"]))
    _limit(resource.RLIMIT_FSIZE, int(job["file_bytes"]))
    _limit(resource.RLIMIT_NOFILE, 64)
    _limit(resource.RLIMIT_CORE, 0)
    if "processes" in job:
        _limit(resource.RLIMIT_NPROC, int(job["processes"]))
    marker = str(job["marker"])
    solution, tests = str(job["code"]), str(job["tests"])
    guard = job.get("guard", True) is not False
    del job
    if guard:
        _install_guard(scratch)
    namespace = {"__name__": "__main__"}
    try:
        exec(compile(solution, "solution.py", "exec"), namespace)
    except BaseException as exc:
        print(f"solution failed to load: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(3)
    try:
        exec(compile(tests, "tests.py", "exec"), namespace)
    except BaseException as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
    sys.stdout.write(marker + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
