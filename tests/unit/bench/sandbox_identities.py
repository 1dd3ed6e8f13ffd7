"""Who starts the sandbox, for the allow-list tests: root, and an unprivileged user.

Run as root (CI, a laptop running ``bench --allow-code-execution`` as root), the child must
drop to ``nobody`` before any answer code runs; run as an unprivileged user it has nothing
to drop, and the kernel's limits alone must hold. Both are exercised from one pytest
process: as root, the unprivileged side is a runner started through ``setpriv`` as
``nobody`` (65534) with no groups and no capabilities, on an interpreter that user can read
(a fresh virtualenv of the system Python: a pyenv under a 0700 ``/root`` is out of its
reach) holding copies of the sandbox's modules (as the package they are in: ``run`` imports
``scratch``) and ``pyseccomp``. Not as root, the user
side is this process itself and the root side is skipped.

Commands, as the tests run them (``<base>`` is a temporary directory):

    setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \\
        <base>/venv/bin/python -I -c RUNNER <base>/code   # job as JSON on stdin
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox_probe import probe

from vllm_operator.bench.sandbox import run as sandbox
from vllm_operator.bench.sandbox.run import Call, RunResult, run_one

NOBODY = 65534
AS_NOBODY = [
    "setpriv",
    f"--reuid={NOBODY}",
    f"--regid={NOBODY}",
    "--clear-groups",
    "--inh-caps=-all",
]
SANDBOX_MODULES = ("__init__.py", "run.py", "child.py", "kernel.py", "scratch.py", "syscalls.py")
PACKAGE = ("vllm_operator", "bench", "sandbox")
RUNNER = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from vllm_operator.bench.sandbox import run as module
job = json.loads(sys.stdin.read())
calls = [module.Call.from_json(c) for c in job["calls"]]
result = module.run_one(job["code"], calls, limit_seconds=job["limit"],
                        scratch_root=Path(job["scratch"]), **job["walls"])
print(json.dumps(result.to_json()))
"""

Runner = Callable[[str, str, dict[str, Any]], RunResult]
"""(answer code, test code for ``sandbox_probe.probe``, walls) -> the run's result."""
CallRunner = Callable[[str, list[Call], dict[str, Any]], RunResult]
"""(answer code, the calls to make, walls) -> the run's result (what ``run_one`` takes)."""


@dataclass(frozen=True)
class Identity:
    """Who started the sandbox, the uid answer code runs as, and how to start a process as
    that uid (a victim that shares it)."""

    name: str
    uid: int
    run: Runner
    as_code_uid: list[str]


def probing(runner: CallRunner) -> Runner:
    """A runner of answer code plus test code (the wall tests' form, ``sandbox_probe``)."""

    def run(code: str, tests: str, walls: dict[str, Any]) -> RunResult:
        return runner(*probe(code, tests), walls)

    return run


def in_process(scratch_root: Path) -> CallRunner:
    def run(code: str, calls: list[Call], walls: dict[str, Any]) -> RunResult:
        return run_one(code, calls, limit_seconds=10, scratch_root=scratch_root, **walls)

    return run


def _readable_python(base: Path) -> Path | None:
    """A virtualenv ``nobody`` can run, of the first system Python it can read."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", shutil.which("python3")):
        if not candidate or not os.path.exists(candidate):
            continue
        probe = subprocess.run(
            [*AS_NOBODY, candidate, "-I", "-c", "import venv"],
            capture_output=True,
            timeout=30,
            check=False,
        )
        if probe.returncode != 0:
            continue
        venv = base / "venv"
        subprocess.run(
            [candidate, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60
        )
        (site,) = venv.glob("lib/python3*/site-packages")
        import pyseccomp

        shutil.copy(pyseccomp.__file__, site / "pyseccomp.py")
        return venv / "bin" / "python"
    return None


def as_nobody(base: Path) -> CallRunner | str:
    """A runner that starts the sandbox as ``nobody``; a reason string where it cannot."""
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    base.chmod(0o755)
    python = _readable_python(base)
    if python is None:
        return "no Python interpreter here that uid 65534 can run"
    code = base / "code"
    package = code.joinpath(*PACKAGE)
    package.mkdir(parents=True)
    for level in (code.joinpath(*PACKAGE[:1]), code.joinpath(*PACKAGE[:2])):
        (level / "__init__.py").write_text("")
    for name in SANDBOX_MODULES:
        shutil.copy(Path(sandbox.__file__).with_name(name), package / name)
    scratch = base / "scratch"
    scratch.mkdir()
    os.chown(scratch, NOBODY, NOBODY)

    def run(source: str, calls: list[Call], walls: dict[str, Any]) -> RunResult:
        job = {
            "code": source,
            "calls": [c.to_json() for c in calls],
            "limit": 10,
            "scratch": str(scratch),
        }
        out = subprocess.run(
            [*AS_NOBODY, str(python), "-I", "-c", RUNNER, str(code)],
            input=json.dumps({**job, "walls": walls}),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=base,
            env={"PATH": os.defpath, "LANG": "C.UTF-8"},
        )
        if out.returncode != 0:
            raise AssertionError(f"the runner failed: {out.stderr[-2000:]}")
        return RunResult.from_json(json.loads(out.stdout))

    return run


def new_base() -> Path:
    return Path(tempfile.mkdtemp(prefix="sandbox-identity-", dir="/tmp"))


def spawn_detached(argv: list[str]) -> int:
    """Start ``argv`` outside this process's descendants (``run_one`` kills every one of
    them after a run); return its pid."""
    script = (
        "import subprocess, sys\n"
        "p = subprocess.Popen(sys.argv[1:], start_new_session=True,"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(p.pid)\n"
    )
    return int(
        subprocess.check_output([sys.executable, "-c", script, *argv], text=True, timeout=30)
    )
