"""Peak memory of `vllm-operator bench` against each hostile server of issue 10.

Each case of ``tests/integration/bench/hostile_servers.py`` (gzip bombs, a 1 GiB
``/v1/models``, endless streams, 100,000-deep JSON, a redirect to another host, lying usage)
is served by a process of its own; bench runs as another process, once sequentially (the
medium prompt class, 3 requests) and once with 8 concurrent streams, and its peak resident
memory is read from ``wait4``'s rusage of that very process (``ru_maxrss``). Target: under
256 MiB in every case (the Job's memory limit is 512 Mi). Also recorded: wall time (the
deadline is 10 s), exit code and the error classes of the summary.

Run: ``flock /tmp/vllmop-heavy.lock python benchmarks/bench_hostile.py``; figures go to
``benchmarks/results/bench_hostile.json`` and are printed as a table.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ROOT / "tests/integration/bench/hostile_servers.py"
RESULTS = ROOT / "benchmarks/results/bench_hostile.json"
TARGET_MIB = 256
DEADLINE = 10
CASES = [
    "gzip-bomb-models",
    "gzip-bomb-stream",
    "huge-models",
    "endless-stream",
    "endless-keepalive",
    "deep-json-models",
    "deep-json-stream",
    "redirect",
    "redirect-chat",
    "lying-usage",
]
MODES = {
    "sequential": ["--prompt-classes", "medium", "--iterations", "3", "--concurrency", "none"],
    "8 streams": ["--prompt-classes", "", "--concurrency", "8", "--requests-per-stream", "2"],
}


def _server(case: str, target: str | None = None) -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, str(SERVERS), case, *([target] if target else [])]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _bench(url: str, mode: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        summary_path = Path(tmp) / "summary.json"
        argv = [
            sys.executable, "-m", "vllm_operator.commands", "bench", "--url", url,
            "--model", "hostile-model", "--suite", "builtin:none", "--warmup", "0",
            "--deadline-seconds", str(DEADLINE), "--request-timeout", "8",
            "--output", "jsonl", "--summary-path", str(summary_path), *mode,
        ]  # fmt: skip
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    return {
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # Linux: kilobytes
        "wall_seconds": round(wall, 2),
        "exit_code": proc.returncode,
        "errors": summary.get("errors", {}),
        "reason": (summary.get("reasons") or [""])[0][:120],
    }


def main() -> int:
    rows: list[dict[str, Any]] = []
    target, target_url = _server("lying-usage")  # "another host" the redirects point at
    try:
        for case in CASES:
            redirect = f"{target_url}/v1/models" if case.startswith("redirect") else None
            server, url = _server(case, redirect)
            try:
                for mode, args in MODES.items():
                    row = {"case": case, "mode": mode, **_bench(url, args)}
                    rows.append(row)
                    print(
                        f"{case:18} {mode:10} peak {row['peak_rss_mib']:6.1f} MiB "
                        f"{row['wall_seconds']:5.2f} s exit {row['exit_code']} {row['errors']}",
                        flush=True,
                    )
            finally:
                server.kill()
                server.wait()
    finally:
        target.kill()
        target.wait()
    worst = max(r["peak_rss_mib"] for r in rows)
    result = {
        "benchmark": "bench_hostile",
        "target_peak_mib": TARGET_MIB,
        "worst_peak_mib": worst,
        "all_under_target": worst < TARGET_MIB,
        "deadline_seconds": DEADLINE,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "measured_unix": round(time.time()),
        "rows": rows,
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"worst peak {worst} MiB (target < {TARGET_MIB} MiB) -> {RESULTS.relative_to(ROOT)}")
    return 0 if worst < TARGET_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
