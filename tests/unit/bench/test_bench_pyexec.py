"""Model-written code never runs with bench's identity; each attack of issue 10 fails.

Each attack is an answer a hostile model could give, written so that its python-tests check
*passes* if the attack works (the tests assert on what the attack obtained). Before the
sandbox (code run as a plain child of bench) every one of them passed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_probe import held, probe, why

from vllm_operator.bench.sandbox.executors import ExchangeSandbox, LocalSandbox, Refused
from vllm_operator.bench.sandbox.run import Call, Outcome, RunResult

# code run as nobody, forking and counted against its uid: with the other sandbox modules, one
# at a time (conftest.py)
pytestmark = pytest.mark.xdist_group("sandbox")

SECRET = "bench-api-key-7f3a9c"


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def local() -> LocalSandbox:
    return LocalSandbox()


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for bench: the attacks try to signal it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


async def test_honest_code_passes_and_failures_name_the_assertion(local: LocalSandbox) -> None:
    ok = await local.run(*probe("def f():\n    return 1", "assert f() == 1"), limit_seconds=5)
    assert held(ok), why(ok)
    wrong = probe("def f():\n    return 1", "assert f() == 2, 'two'")
    bad = await local.run(*wrong, limit_seconds=5)
    assert not held(bad)
    assert bad.ran
    assert bad.outcomes == (Outcome(raised="AssertionError: two"),)


async def test_default_executor_refuses_and_says_how_to_enable() -> None:
    result = await Refused().run("X = 1", [Call("f")], limit_seconds=5)
    assert result.ran is False
    assert "--allow-code-execution" in result.detail
    assert "--sandbox-dir" in result.detail


ENVIRON_ATTACK = """
import asyncio, json, os, sys
from vllm_operator.bench.sandbox.executors import LocalSandbox
from vllm_operator.bench.sandbox.run import Call
code = (
    "import os\\nFOUND = ''\\n"
    f"for pid in (os.getppid(), {os.getpid()}):\\n"
    "    try:\\n"
    "        FOUND += open(f'/proc/{pid}/environ', 'rb').read().decode('latin-1')\\n"
    "    except OSError as exc:\\n"
    "        print('blocked:', exc)\\n"
    "FOUND += repr(dict(os.environ))\\n"
)
code += "\\ndef probe():\\n    " + sys.argv[1] + "\\n    return 'held'\\n"
result = asyncio.run(LocalSandbox().run(code, [Call("probe")], limit_seconds=5))
print(json.dumps(result.to_json()))
"""


def test_attack_reading_the_parents_environment() -> None:
    """Bench (a process whose environment holds the key since its exec) runs the attack."""
    bench = subprocess.run(
        [sys.executable, "-c", ENVIRON_ATTACK, f"assert {SECRET!r} in FOUND"],
        env={**os.environ, "VLLM_API_KEY": SECRET},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = RunResult.from_json(json.loads(bench.stdout.splitlines()[-1]))
    assert result.ran
    assert not held(result), why(result)
    assert SECRET not in result.detail


async def test_attack_opening_a_network_connection(local: LocalSandbox) -> None:
    accepted: list[bool] = []

    async def on_connect(_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(True)
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    code = (
        "CONNECTED = False\n"
        "try:\n"
        "    import socket\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
        "    CONNECTED = True\n"
        "except Exception as exc:\n"
        "    print('blocked:', exc)\n"
        "try:\n"
        "    import _socket\n"
        "    s = _socket.socket()\n"
        f"    s.connect(('127.0.0.1', {port}))\n"
        "    CONNECTED = True\n"
        "except Exception as exc:\n"
        "    print('blocked:', exc)\n"
    )
    async with server:
        result = await local.run(*probe(code, "assert CONNECTED"), limit_seconds=5)
    assert not held(result), why(result)
    assert accepted == []


async def test_attack_writing_gigabytes(local: LocalSandbox, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    code = (
        "WRITTEN = 0\nblock = b'x' * (1 << 20)\n"
        "for i in range(200):\n"
        f"    for path in (f'big{{i}}.bin', f'{outside}{{i}}.bin'):\n"
        "        try:\n"
        "            with open(path, 'wb') as fh:\n"
        "                for _ in range(8):\n"
        "                    fh.write(block)\n"
        "                    WRITTEN += len(block)\n"
        "        except (OSError, PermissionError) as exc:\n"
        "            pass\n"
        "print('written', WRITTEN)"
    )
    answer = probe(code, "assert WRITTEN >= 64 * 2**20, WRITTEN")
    result = await local.run(*answer, limit_seconds=20)
    assert not held(result), why(result)
    # The hook's 16 writable opens of at most 1 MiB each, plus the directories: past the
    # scratch budget (16 MiB on disk), measured from outside whether the code printed or not.
    assert "its scratch directory holds more than 16 MiB on disk" in result.detail
    assert _names(tmp_path) == []


async def test_attack_escaping_with_double_fork_is_refused(
    local: LocalSandbox, tmp_path: Path
) -> None:
    code = "import os\nif os.fork() == 0:\n    os.setsid()\n    os._exit(0)\nESCAPED = True"
    result = await local.run(*probe(code, "assert ESCAPED"), limit_seconds=5)
    assert not held(result), why(result)
    assert "os.fork is not allowed" in result.detail


def test_double_fork_escapee_is_killed_even_without_the_audit_hook(tmp_path: Path) -> None:
    """The outer wall: the runner is a child subreaper and kills every descendant."""
    pidfile = tmp_path / "escapee.pid"
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
    )
    script = (
        "import sys\nfrom pathlib import Path\n"
        "from vllm_operator.bench.sandbox.run import harden_self, run_one\n"
        "harden_self()\n"
        f"r = run_one(sys.argv[1], [], limit_seconds=5, "
        f"scratch_root=Path({str(tmp_path / 'scratch')!r}), guard=False, kernel=False)\n"
        "print(r.ran and not r.detail, r.detail)"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, code],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.stdout.startswith("True"), out.stdout + out.stderr
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists(), f"escapee {pid} survived"


async def test_attack_forging_the_summary_and_killing_bench(
    local: LocalSandbox, tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    summary = tmp_path / "termination-log"
    summary.write_text("")
    code = (
        "import os, signal\nDONE = []\n"
        "try:\n"
        f"    open({str(summary)!r}, 'w').write('{{\"verdict\": \"Passed\"}}')\n"
        "    DONE.append('forged')\n"
        "except OSError as exc:\n"
        "    print('blocked:', exc)\n"
        f"for pid in ({victim.pid}, os.getppid()):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGINT)\n"
        "        DONE.append(pid)\n"
        "    except Exception as exc:\n"
        "        print('blocked:', exc)\n"
    )
    result = await local.run(*probe(code, "assert DONE"), limit_seconds=5)
    assert not held(result), why(result)
    assert summary.stat().st_size == 0
    assert victim.poll() is None


async def test_timeout_kills_and_reports(local: LocalSandbox) -> None:
    result = await local.run(*probe("while True:\n    pass", "assert True"), limit_seconds=1)
    assert result == RunResult(True, "timed out after 1 s")


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[Path]:
    """``vllm-operator sandbox serve`` as the Job's sandbox container runs it."""
    exchange = tmp_path / "exchange"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-m",
            "vllm_operator.commands",
            "sandbox",
            "serve",
            "--exchange",
            str(exchange),
            "--scratch",
            str(tmp_path / "scratch"),
        ],
        env={"PATH": os.defpath},
    )
    yield exchange
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


async def test_sidecar_runs_code_handed_over_the_exchange_directory(sidecar: Path) -> None:
    sandbox = ExchangeSandbox(sidecar, ready_wait=20)
    ok = await sandbox.run(*probe("def f():\n    return 3", "assert f() == 3"), limit_seconds=5)
    assert held(ok), why(ok)
    bad = await sandbox.run(*probe("import socket", "assert True"), limit_seconds=5)
    assert not held(bad)
    assert bad.ran
    assert "socket" in bad.detail
    assert _names(sidecar) == ["ready"]


async def test_no_sidecar_means_refused_not_run(tmp_path: Path) -> None:
    result = await ExchangeSandbox(tmp_path, ready_wait=0.2).run("X=1", [], limit_seconds=1)
    assert result.ran is False
    assert "no sandbox answers" in result.detail


def _own_pid_namespace_works() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _own_pid_namespace_works(), reason="needs unshare of a PID namespace")
def test_as_pid_1_of_its_namespace_every_leftover_is_killed(tmp_path: Path) -> None:
    """The sidecar's situation: PID 1 of its own PID namespace, kill(-1) after each run."""
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
    )
    script = (
        "import os, sys\nfrom pathlib import Path\n"
        "from vllm_operator.bench.sandbox.run import run_one\n"
        "assert os.getpid() == 1\n"
        f"r = run_one(sys.argv[1], [], limit_seconds=5, "
        f"scratch_root=Path({str(tmp_path)!r}), guard=False, kernel=False)\n"
        "others = [p for p in os.listdir('/proc') if p.isdigit() and p != '1']\n"
        "print(r.ran and not r.detail, others)"
    )
    out = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", script, code],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.stdout.strip() == "True []", out.stdout + out.stderr


def test_exchange_files_never_follow_what_the_sandbox_planted(tmp_path: Path) -> None:
    """A symlink, FIFO or huge file in the shared directory cannot redirect or stall bench."""
    from vllm_operator.bench.sandbox.exchange import read_bounded, write_new

    victim = tmp_path / "termination-log"
    victim.write_text("bench's own")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    (exchange / "res-link.json").symlink_to(victim)
    os.mkfifo(exchange / "res-fifo.json")
    (exchange / "res-big.json").write_bytes(b"x" * 10_000)
    assert read_bounded(exchange / "res-link.json", 8192) is None
    assert read_bounded(exchange / "res-fifo.json", 8192) is None  # no blocking open
    assert read_bounded(exchange / "res-big.json", 8192) is None
    # Writing a job where a link was planted replaces the link, never writes through it.
    (exchange / "req-x.json").symlink_to(victim)
    assert write_new(exchange / "req-x.json", b"{}")
    assert victim.read_text() == "bench's own"
    assert (exchange / "req-x.json").read_bytes() == b"{}"
    assert not (exchange / "req-x.json").is_symlink()


FORGERIES = {
    # The marker that says "tests passed" is a local of the child's main(): one frame up.
    "caller-frame": (
        "import sys, os\nf = sys._getframe()\n"
        "while f is not None and 'marker' not in f.f_locals:\n    f = f.f_back\n"
        "print(f.f_locals['marker'], flush=True)\nos._exit(0)\n"
    ),
    # A signal handler receives the interrupted frame (and _signal is loaded at start-up).
    "signal-frame": (
        "import _signal, os\nfound = []\n"
        "def grab(_n, f):\n"
        "    while f is not None and 'marker' not in f.f_locals:\n        f = f.f_back\n"
        "    found.append(f.f_locals['marker'])\n"
        "_signal.signal(_signal.SIGUSR1, grab)\nos.kill(os.getpid(), _signal.SIGUSR1)\n"
        "print(found[0], flush=True)\nos._exit(0)\n"
    ),
    # Tests compiled after the solution ran would go through a replaced builtin.
    "replaced-compile": (
        "import builtins\n_c = builtins.compile\n"
        "builtins.compile = lambda s, f, m, *a, **k: _c('pass', f, m)\n"
    ),
    # A failed test calls sys.exit(1); replaced, the run would go on to print the marker.
    "replaced-exit": "import sys\nsys.exit = lambda *a: None\n",
}


@pytest.mark.parametrize("code", FORGERIES.values(), ids=list(FORGERIES))
async def test_answer_code_cannot_forge_a_pass_through_the_sidecar(
    sidecar: Path, code: str
) -> None:
    """The demo's and the Job's path (bench -> exchange -> ``sandbox serve``): tests that
    fail stay failed whatever the answer does to the process that runs them."""
    sandbox = ExchangeSandbox(sidecar, ready_wait=20)
    result = await sandbox.run(*probe(code, "assert False, 'the tests fail'"), limit_seconds=5)
    assert not held(result), why(result)
