"""Peak memory of `vllm-operator bench` with a dataset at the documented bounds (issue 31).

The benchmark Job's container has 512 MiB. Each case writes a dataset at the bounds
(``bench.dataset_read``: 32 MiB in all, 1 MiB a line or entry, 100,000 lines) in one of the
shapes that cost the most memory, then runs the whole bench as its own process against the
simulator: the dataset is read and checked, then sent at 64 concurrent streams for 3 s (so
the byte budget of requests in flight, ``bench.load.budget``, is exercised with 1 MiB prompts).
The peak resident memory of that very process is read from ``wait4``'s rusage
(``ru_maxrss``). Target: under 400 MiB in every case. The datasets are written by a child
process of their own: Linux carries the spawning process's peak into the spawned one's
``ru_maxrss`` (Python spawns with vfork), so a parent that built 32 MiB of text itself
would inflate every figure (a first run measured 472 MiB for a refusal that takes 62).

Shapes: ``big-lines`` (32 chat-jsonl lines of 1 MiB), ``parts`` (32 lines of 1 MiB of
one-character text parts: the most Python objects per byte), ``small-lines`` (100,000 short
lines), ``sharegpt`` (a JSON array of 32 entries of 1 MiB), ``sharegpt-one-entry`` (one
32 MiB entry: refused, exit 2, without parsing it).

Run: ``flock /tmp/vllmop-heavy.lock python benchmarks/bench_dataset_memory.py``; figures
go to ``benchmarks/results/bench_dataset_memory.json`` and are printed as a table.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results/bench_dataset_memory.json"
TARGET_MIB = 400
MIB = 1 << 20
MODEL = "Qwen/Qwen3-30B-A3B-Instruct-2507-GPTQ-Int4"
CASES = {
    "big-lines": "chat-jsonl",
    "parts": "chat-jsonl",
    "small-lines": "chat-jsonl",
    "sharegpt": "sharegpt",
    "sharegpt-one-entry": "sharegpt",
}


def _words(size: int, seed: int) -> str:
    out: list[str] = []
    length = 0
    i = seed
    while length < size:
        word = f"w{i % 9973}"
        out.append(word)
        length += len(word) + 1
        i += 7
    return " ".join(out)[:size]


def _chat(content: Any) -> str:
    return json.dumps({"messages": [{"role": "user", "content": content}], "max_tokens": 8})


def write_dataset(path: Path, shape: str) -> int:
    """Write ``shape`` at the bounds to ``path``; its size in bytes."""
    with path.open("w", encoding="utf-8") as fh:
        if shape == "big-lines":
            for i in range(32):
                fh.write(_chat(f"{i} " + _words(MIB - 120, i)) + "\n")
        elif shape == "parts":
            part = {"type": "text", "text": "a"}
            count = (MIB - 120) // (len(json.dumps(part)) + 2)
            for i in range(32):
                fh.write(_chat([{"type": "text", "text": f"{i}"}] + [part] * (count - 1)) + "\n")
        elif shape == "small-lines":
            for i in range(100_000):
                fh.write(_chat(f"{i} " + _words(240, i)) + "\n")
        elif shape == "sharegpt":
            entries = (
                json.dumps(
                    {
                        "conversations": [
                            {"from": "human", "value": f"{i} " + _words(MIB - 150, i)},
                            {"from": "gpt", "value": "one two three"},
                        ]
                    }
                )
                for i in range(32)
            )
            fh.write("[" + ",".join(entries) + "]")
        else:
            entry = {"conversations": [{"from": "human", "value": _words(32 * MIB - 200, 0)}]}
            fh.write("[" + json.dumps(entry) + "]")
    size = path.stat().st_size
    assert size <= 32 * MIB, (shape, size)
    return size


def start_sim() -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable, "-m", "vllm_operator.sim", MODEL, "--port", "0",
        "--sim-warmup-seconds", "0", "--sim-time-scale", "0.02", "--max-model-len", "1000000",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("SIM LISTENING "):
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return proc, line.split()[-1]
    raise RuntimeError(f"simulator exited with {proc.wait()}")


def run_bench(url: str, dataset: Path, fmt: str) -> dict[str, Any]:
    workload = {
        "dataset": {"configMap": "ds", "format": fmt, "maxOutputTokens": 8},
        "seed": 1,
        "load": {"mode": "concurrency", "concurrency": [64], "secondsPerLevel": 3},
    }
    with tempfile.TemporaryDirectory() as tmp:
        summary_path = Path(tmp) / "summary.json"
        argv = [
            sys.executable, "-m", "vllm_operator.commands", "bench", "--url", url,
            "--model", MODEL, "--suite", "builtin:none", "--trials", "1",
            "--settle-max-passes", "0", "--warmup", "0", "--deadline-seconds", "300",
            "--workload-json", json.dumps(workload), "--dataset", str(dataset),
            "--output", "jsonl", "--summary-path", str(summary_path),
        ]  # fmt: skip
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    requests = sum(
        level.get("requests", 0) for level in (summary.get("load") or {}).get("levels", [])
    )
    return {
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # Linux: kilobytes
        "wall_seconds": round(wall, 1),
        "exit_code": os.waitstatus_to_exitcode(status),
        "requests_sent": requests,
        "errors": summary.get("errors", {}),
        "reason": (summary.get("reasons") or [""])[0][:160] or err.strip()[-160:],
    }


def main() -> int:
    rows: list[dict[str, Any]] = []
    sim, url = start_sim()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for shape, fmt in CASES.items():
                path = Path(tmp) / f"{shape}.data"
                writer = [sys.executable, __file__, "--write", str(path), shape]
                subprocess.run(writer, check=True)
                size = path.stat().st_size
                row = {"shape": shape, "format": fmt, "bytes": size, **run_bench(url, path, fmt)}
                path.unlink()
                rows.append(row)
                print(
                    f"{shape:19} {size / MIB:5.1f} MiB  peak {row['peak_rss_mib']:6.1f} MiB "
                    f"{row['wall_seconds']:6.1f} s exit {row['exit_code']} "
                    f"sent {row['requests_sent']} {row['errors']} {row['reason'][:70]}",
                    flush=True,
                )
    finally:
        sim.kill()
        sim.wait()
    worst = max(r["peak_rss_mib"] for r in rows)
    result = {
        "benchmark": "bench_dataset_memory",
        "target_peak_mib": TARGET_MIB,
        "worst_peak_mib": worst,
        "all_under_target": worst < TARGET_MIB,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "measured_unix": round(time.time()),
        "rows": rows,
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"worst peak {worst} MiB (target < {TARGET_MIB} MiB) -> {RESULTS.relative_to(ROOT)}")
    return 0 if worst < TARGET_MIB else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        write_dataset(Path(sys.argv[2]), sys.argv[3])
        sys.exit(0)
    sys.exit(main())
