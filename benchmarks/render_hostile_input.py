"""Time and memory of `vllm-operator render` on hostile and on the largest accepted inputs.

Each input runs the console command in a fresh subprocess (as a user would), measuring wall
time and peak RSS (``ru_maxrss`` of the child). Hostile inputs (issue 10) must be refused
with exit 2 in well under a second each; the largest input that is accepted (1 MiB of
affinity terms, under the 100,000-value limit) bounds what an accepted file can cost.

Usage: python benchmarks/render_hostile_input.py
Writes benchmarks/results/render_hostile_input.json.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = (ROOT / "examples" / "qwen3-30b-a3b-v0.17-throughput.yaml").read_text()
HEAD = EXAMPLE.split("  scheduling:")[0]
AFFINITY = (
    "  scheduling:\n    affinity:\n      nodeAffinity:\n"
    "        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n"
)


def laughs() -> bytes:
    lines = [
        f"      l{i}: &l{i} [" + ", ".join([f"*l{i - 1}" if i else '"lol"'] * 9) + "]\n"
        for i in range(10)
    ]
    return (HEAD + "  scheduling:\n    affinity:\n" + "".join(lines)).encode()


def largest_accepted() -> bytes:
    values = ", ".join(f'"node-{i:05d}"' for i in range(200))
    term = (
        "            - matchExpressions:\n                - key: kubernetes.io/hostname\n"
        f"                  operator: In\n                  values: [{values}]\n"
    )
    count = (1024 * 1024 - len(HEAD) - len(AFFINITY) - 1) // len(term)
    return (HEAD + AFFINITY + term * count).encode()


def padded(mib: int) -> Iterator[bytes]:
    """The example plus ``mib`` MiB of comment, in chunks (never whole in memory: a forked
    child's peak RSS would count the parent's)."""
    yield EXAMPLE.encode() + b"#"
    for _ in range(mib):
        yield b"x" * (1024 * 1024)
    yield b"\n"


INPUTS: dict[str, Callable[[], bytes | Iterator[bytes]]] = {
    "billion-laughs": laughs,
    "nesting-1000": lambda: HEAD.encode() + b"  replicas: " + b"[" * 1000 + b"]" * 1000 + b"\n",
    "int-5000-digits": lambda: HEAD.encode() + b"  replicas: " + b"9" * 5000 + b"\n",
    "invalid-utf8": lambda: EXAMPLE.encode() + b"# \xff\n",
    "file-50MB": lambda: padded(50),
    "file-100MB": lambda: padded(100),
    "largest-accepted-1MiB": largest_accepted,
}


def run(path: Path) -> dict[str, Any]:
    """Exit code, wall time and peak RSS of one render in its own process."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm_operator.commands", "render", "-f", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        message = err.read().decode(errors="replace").strip().splitlines()[:2]
    return {
        "exit": proc.returncode,
        "seconds": round(seconds, 3),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "stderr": message,
    }


def main() -> int:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in INPUTS.items():
            path = Path(tmp) / f"{name}.yaml"
            made = make()
            with path.open("wb") as fh:
                for chunk in [made] if isinstance(made, bytes) else made:
                    fh.write(chunk)
            results[name] = {"bytes": path.stat().st_size, **run(path)}
            r = results[name]
            print(
                f"{name:24} {r['bytes']:>11} B  exit {r['exit']}  {r['seconds']:6.2f} s  "
                f"{r['peak_rss_mib']:6.1f} MiB"
            )
    out = ROOT / "benchmarks" / "results" / "render_hostile_input.json"
    payload = {"python": platform.python_version(), "machine": platform.machine(), **results}
    out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
