"""The process that runs one model answer's code and calls its function (never imported by bench).

Started by ``bench.sandbox.run`` as ``python -I -B child.py`` in an empty scratch
directory, with the job (JSON: code, the calls to make, limits, two descriptor numbers) on
stdin. It holds no expected value, no marker and no verdict (issue 38): it runs the
answer's code, calls the named function with each call's arguments and writes what each
call returned (a JSON value) or raised, one line per call, to the *result* descriptor, a
file its parent opened and reads back, bounded, after it exits. The parent's caller (bench)
compares those outputs with the expected values, which never enter this process; whatever
the answer prints, reads or forges in its own memory can only change its own outputs.

Before any model code is compiled, while it is still single-threaded, it

1. lowers its own resource limits (CPU time, address space, file size, open files);
2. applies the kernel's limits to itself (``kernel``: started as root, it first drops
   to the job's uid and gid, ``nobody``, with no capabilities; then Landlock and a seccomp
   allow list, ``syscalls``, after ``PR_SET_NO_NEW_PRIVS``). These are the wall that
   holds: never root, no network, no exec, no new processes, files only in its scratch
   directory (read-only the Python installation), no metadata changes, no IPC, nothing
   done to another process. Where the kernel cannot enforce them the child writes
   ``refused <reason>`` to the *status* descriptor (a pipe only its parent reads) and exits
   with ``KERNEL_REFUSED`` without compiling the code: a not-run result, never an
   unguarded run;
3. installs an audit hook (PEP 578) that cannot be removed from Python code: a tripwire
   with clearer messages, not a boundary (an extension module the answer writes and loads
   passes it; the kernel does not let it do anything, and there is nothing in this process
   worth reading);
4. writes ``armed`` to the status descriptor and closes it: the answer never holds it and
   cannot reopen it (a pipe has no path), so only the sandbox itself can say "not run".

The job's ``kernel: false`` and ``guard: false`` switch 2 and 3 off; only tests of the other
walls use them. The hook refuses:

- network: importing ``socket``/``_socket``/``ssl`` and every ``socket.*`` event;
- other processes: fork, exec, spawn, ``subprocess``, ``os.system``, signals to any pid;
- native code: ``ctypes``, ``_posixsubprocess``, ``mmap`` imports and ``ctypes.*`` events
  (the module name is judged as a plain ``str`` copy: a ``str`` subclass cannot disguise
  ``_ctypes``);
- files: writes outside the scratch directory, more than ``MAX_WRITABLE_OPENS`` opens for
  writing, reads outside the scratch directory and Python's own installation (so no
  ``/proc/<pid>/environ``, no ``/dev/termination-log``, no token files);
- frames and the hook itself: ``gc`` object walks, ``sys._current_frames``,
  ``sys._getframe``, traceback, generator and coroutine frames, signal handlers (which
  receive a frame), CPython's ``_test*`` modules.

Beyond both, in the cluster the code runs in a container of its own (other uid, own PID
namespace, no secrets, size-limited scratch), and whatever it leaves running is killed by
its parent after the run (see ``bench.sandbox.run``).
"""

import contextlib
import importlib.util
import json
import os
import resource
import sys
from types import ModuleType

MAX_WRITABLE_OPENS = 16
KERNEL_REFUSED = 4
"""Exit status of a child that did not run the code because the kernel limits are missing."""
REFUSED_PREFIX = "sandbox: not run: "
MAX_OUTCOME_BYTES = 16384
"""One call's outcome as a JSON line; a larger return value is reported as an error."""
MAX_RAISED_CHARS = 300
_KERNEL_MODULES = (
    "_sandbox_kernel",
    "_sandbox_syscalls",
    "ctypes",
    "_ctypes",
    "ctypes.util",
    "ctypes._endian",
    "pyseccomp",
)
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
        # a signal handler receives the interrupted frame, whose f_back leads to main()
        "signal",
        "_signal",
        "faulthandler",
        # CPython's test helpers reach memory and interpreter internals directly
        "_testcapi",
        "_testinternalcapi",
        "_testbuffer",
        "_testmultiphase",
        "_testimportmultiple",
        "_testclinic",
        "_xxtestfuzz",
        "_ctypes_test",
        "_xxsubinterpreters",
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
_FRAME_ATTRIBUTES = ("tb_frame", "gi_frame", "cr_frame", "ag_frame")
_LISTING_EVENTS = frozenset({"os.listdir", "os.scandir"})
"""Reads of a directory: allowed where reading is (importing a package's submodule lists
its directory; refusing it made ``import asyncio`` fail)."""
_PATH_EVENTS = frozenset(
    {
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
    """The audit hook: one small judge per kind of event, looked up by the event's name."""
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
    readable = (scratch, *roots)
    writes = [0]

    def under(path: object, allowed: tuple[str, ...]) -> bool:
        if isinstance(path, int):
            return True  # an already open descriptor (stdio)
        try:
            full = realpath(fspath(path))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return any(full == r or full.startswith(r + os.sep) for r in allowed)

    def named(path: object) -> bool:
        return isinstance(path, (str, bytes, os.PathLike))

    def on_open(event: str, args: tuple[object, ...]) -> None:
        path, mode = args[0], args[1]
        flags = args[2] if len(args) > 2 else 0
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            mode is None and isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR)
        )
        if not writing:
            if not under(path, readable):
                raise PermissionError(f"sandbox: reading {path!r} is not allowed")
            return
        if not under(path, (scratch,)):
            raise PermissionError(f"sandbox: writing {path!r} is not allowed")
        writes[0] += 1
        if writes[0] > MAX_WRITABLE_OPENS:
            raise PermissionError("sandbox: too many files opened for writing")

    def on_import(event: str, args: tuple[object, ...]) -> None:
        # A plain copy of the name: a str subclass can override __str__, split and __eq__,
        # but not what str's own methods see. Every part: an extension loaded by hand as
        # "x._socket" still runs PyInit__socket.
        name = args[0]
        if not isinstance(name, str):
            raise ImportError("sandbox: a module name must be a str")
        plain = str.__str__(name)
        if any(part in _BLOCKED_IMPORTS for part in str.split(plain, ".")):
            raise ImportError(f"sandbox: module {plain!r} is not allowed")

    def on_blocked(event: str, args: tuple[object, ...]) -> None:
        raise PermissionError(f"sandbox: {event} is not allowed")

    def on_listing(event: str, args: tuple[object, ...]) -> None:
        if named(args[0]) and not under(args[0], readable):
            raise PermissionError(f"sandbox: {event} on {args[0]!r} is not allowed")

    def on_path(event: str, args: tuple[object, ...]) -> None:
        for path in args[:2]:
            if named(path) and not under(path, (scratch,)):
                raise PermissionError(f"sandbox: {event} on {path!r} is not allowed")

    def on_getframe(event: str, args: tuple[object, ...]) -> None:
        # ValueError, which namedtuple, typing, enum and logging already expect from it.
        raise ValueError("sandbox: frame access is not allowed")

    def on_getattr(event: str, args: tuple[object, ...]) -> None:
        if args[1] in _FRAME_ATTRIBUTES:
            raise PermissionError("sandbox: frame access is not allowed")

    judges = {"open": on_open, "import": on_import, "sys._getframe": on_getframe}
    judges["object.__getattr__"] = on_getattr
    judges.update(dict.fromkeys(_BLOCKED_EVENTS, on_blocked))
    judges.update(dict.fromkeys(_LISTING_EVENTS, on_listing))
    judges.update(dict.fromkeys(_PATH_EVENTS, on_path))
    judge_of = judges.get

    def hook(event: str, args: tuple[object, ...]) -> None:
        judge = judge_of(event)
        if judge is not None:
            judge(event, args)
        elif event.startswith(("socket.", "ctypes.")):
            on_blocked(event, args)

    sys.addaudithook(hook)
    # _signal is imported at start-up: out of sys.modules, importing it again meets the hook.
    for name in ("signal", "_signal"):
        sys.modules.pop(name, None)


def _load_kernel() -> ModuleType:
    """``kernel`` from beside this file (bench's package is not needed here)."""
    path = os.path.join(os.path.dirname(os.path.realpath(__file__)), "kernel.py")
    spec = importlib.util.spec_from_file_location("_sandbox_kernel", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    kernel = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = kernel  # dataclasses look their module up there
    spec.loader.exec_module(kernel)
    return kernel


def _apply_kernel_limits(
    scratch: str, minimum_abi: int, run_as: tuple[int, int], status: int
) -> None:
    """``kernel.apply``; then, where the uid it dropped to cannot reach the Python
    installation or scratch by their paths, reach them through what was opened before.
    Where the kernel cannot enforce the limits: say so on ``status`` and exit."""
    kernel = _load_kernel()
    try:
        applied = kernel.apply(scratch, minimum_abi=minimum_abi, run_as=run_as)
    except kernel.KernelLimitsUnavailable as exc:
        _say(status, f"refused {REFUSED_PREFIX}kernel limits unavailable: {exc}")
        os._exit(KERNEL_REFUSED)
    _reach_by_descriptor(applied.roots)
    if not os.access(scratch, os.W_OK | os.X_OK):
        # A 0700 directory above scratch: the working directory is still scratch.
        os.environ["TMPDIR"] = os.environ["HOME"] = "/proc/self/cwd"
    # What installed the limits is of no use to the code, and the hook refuses to import it.
    for name in _KERNEL_MODULES:
        sys.modules.pop(name, None)


def _reach_by_descriptor(roots: dict[str, int]) -> None:
    """Rewrite ``sys.path`` entries this uid cannot read to ``/proc/self/fd/<n>/...``.

    The magic link starts the walk at the directory opened before the drop, so a 0700
    directory above it (pyenv under ``/root``) is not searched; Landlock still judges the
    file it reaches by where it really is (read-only, in the Python installation).
    """
    for i, entry in enumerate(sys.path):
        if not entry or os.access(entry, os.R_OK | os.X_OK):
            continue
        for root, fd in roots.items():
            if entry == root or entry.startswith(root + os.sep):
                sys.path[i] = f"/proc/self/fd/{fd}{entry[len(root) :]}"
                break
    sys.path_importer_cache.clear()


def _lower_limits(job: dict[str, object]) -> None:
    _limit(resource.RLIMIT_CPU, int(str(job["cpu_seconds"])))
    _limit(resource.RLIMIT_AS, int(str(job["memory_bytes"])))
    _limit(resource.RLIMIT_FSIZE, int(str(job["file_bytes"])))
    _limit(resource.RLIMIT_NOFILE, 64)
    _limit(resource.RLIMIT_CORE, 0)
    if "processes" in job:
        _limit(resource.RLIMIT_NPROC, int(str(job["processes"])))


def _calls(raw: object) -> list[tuple[str, str, str]]:
    """(function, args as JSON, kwargs as JSON) per call: each call parses fresh copies, so
    a call that mutates its arguments cannot change the next call's."""
    calls = []
    for call in raw if isinstance(raw, list) else []:
        calls.append((str(call["function"]), json.dumps(call["args"]), json.dumps(call["kwargs"])))
    return calls


def main() -> None:
    job = json.loads(sys.stdin.read())
    sys.stdin.close()
    scratch = os.path.realpath(os.getcwd())
    status, results = int(job["status_fd"]), int(job["result_fd"])
    _lower_limits(job)
    code, calls = str(job["code"]), _calls(job["calls"])
    guard = job.get("guard", True) is not False
    kernel = job.get("kernel", True) is not False
    minimum_abi = int(job.get("minimum_landlock_abi", 1))
    run_as = (int(job.get("uid", 65534)), int(job.get("gid", 65534)))
    del job
    if kernel:
        _apply_kernel_limits(scratch, minimum_abi, run_as, status)
    if guard:
        _install_guard(scratch)
    # The sandbox's own word, said before any answer code is compiled; the answer never
    # holds this descriptor, so it cannot turn its own failure into "not run".
    _say(status, "armed")
    os.close(status)
    _run_answer(code, calls, results)


def _run_answer(code: str, calls: list[tuple[str, str, str]], results: int) -> None:
    """Compile and run the answer, make each call, write each outcome; then exit."""
    # Bound before the answer runs: it may replace builtins, json or os. That can change
    # only its own outputs (nothing here knows what they should be), not how it exits.
    leave, loads = os._exit, json.loads
    try:
        compiled = compile(code, "solution.py", "exec")
    except (SyntaxError, ValueError) as exc:
        _report(f"solution failed to load: {type(exc).__name__}: {exc}")
        leave(3)
    namespace: dict[str, object] = {"__name__": "__main__"}
    try:
        exec(compiled, namespace)
    except BaseException as exc:
        _report(f"solution failed to load: {_describe(exc)}")
        leave(3)
    for index, (function, args, kwargs) in enumerate(calls):
        _write_all(results, _outcome(namespace, index, function, loads(args), loads(kwargs)))
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
    leave(0)


def _outcome(
    namespace: dict[str, object],
    index: int,
    function: str,
    args: list[object],
    kwargs: dict[str, object],
) -> bytes:
    """One call's outcome as a JSON line: what it returned, or what it raised."""
    try:
        target = namespace.get(function)
        if not callable(target):
            raise NameError(f"the answer defines no function {function!r}")
        value = target(*args, **kwargs)
        line = json.dumps({"i": index, "returned": value}, allow_nan=False)
    except BaseException as exc:
        line = json.dumps({"i": index, "raised": _describe(exc)})
    if len(line) > MAX_OUTCOME_BYTES:
        line = json.dumps(
            {"i": index, "raised": f"ValueError: over {MAX_OUTCOME_BYTES} bytes as JSON"}
        )
    return (line + "\n").encode()


def _describe(exc: BaseException) -> str:
    """``Type: message`` of an exception the answer raised (its ``__str__`` may raise)."""
    name = type(exc).__name__
    try:
        return f"{name}: {exc}"[:MAX_RAISED_CHARS]
    except BaseException:
        return name[:MAX_RAISED_CHARS]


def _write_all(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError):
        while data:
            data = data[os.write(fd, data) :]


def _say(fd: int, text: str) -> None:
    """A line on the status descriptor (the parent reads it once this process is gone)."""
    _write_all(fd, (text + "\n").encode())


def _report(text: str) -> None:
    """Say why the run failed; nothing the model's code did here may stop the exit."""
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
