"""An SLO gate on a loaded laptop (issue 29): two simulators of one profile Pass, a TTFT tail
regression of the simulator Fails.

Each gate is the real ``vllm-operator bench`` (a subprocess, as the Job runs it) against two
fresh ``vllm-operator sim`` processes on loopback (candidate and baseline twin, paired
trials), while ``--busy`` processes spin at 100% of a core each (a laptop running a build).
Workload: synthetic 64-token prompts with 16-token answers, open-loop Poisson arrivals at
``RATE`` requests/s for ``SECONDS`` s per trial, 3 trials then one at a time up to 10 while
a figure is undecided. Limits: TTFT p99 <= ``LIMIT_MS`` and maxRegressionPercent 10 against
the twin (floor: 10% of the SLO limit). The simulators answer with a constant TTFT of 50 ms
and 10 ms gaps (``--sim-ttft-ms``, ``--sim-itl-ms``) and 1% per-request jitter; everything
else in the tail is the loaded machine's.

Rows: **A/A** (both simulators alike); **TTFT tail** (the candidate with
``--sim-ttft-tail-percent 5 --sim-ttft-tail-ms 2000``: one request in twenty waits 2 s more
for its first token; its median does not move, its p99 does).

How many requests a level needs: a p99 shown met with no request above it takes 630 of
them at the first look of a 3-to-10 plan (``gate.decidable``), so a trial brings
``RATE x SECONDS`` = 250 and three trials 750.

Run: ``.venv/bin/python benchmarks/slo_laptop.py [--gates 10] [--busy 2]``. Saves
``benchmarks/results/slo_laptop.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "slo_laptop.json"
MODEL = "Qwen/Qwen3-8B"
RATE = 25
SECONDS = 10
LIMIT_MS = 500
TAIL = ("--sim-ttft-tail-percent", "5", "--sim-ttft-tail-ms", "2000")


def workload(rate: float, seconds: int) -> dict[str, Any]:
    return {
        "synthetic": {"inputTokens": {"mean": 64}, "outputTokens": {"mean": 16}},
        "seed": 7,
        "load": {"mode": "rate", "rates": [rate], "secondsPerLevel": seconds},
    }


BENCH = [
    sys.executable,
    "-c",
    "import sys; from vllm_operator.commands import main; sys.exit(main())",
]
"""``vllm-operator`` of this checkout (the console script may point at another one)."""
THRESHOLDS = {"maxRegressionPercent": 10, "slo": {"ttftMs": {"p99": LIMIT_MS}}}


def start_sim(*extra: str) -> tuple[subprocess.Popen[str], str]:
    """A fresh simulator on a free loopback port; returns it and its URL."""
    cmd = [sys.executable, "-m", "vllm_operator.sim", MODEL, "--port", "0"]
    cmd += ["--sim-warmup-seconds", "0.2", "--sim-ttft-ms", "50", "--sim-itl-ms", "10"]
    cmd += ["--sim-jitter", "1", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("SIM LISTENING "):
            return proc, line.split()[-1]
    raise RuntimeError(f"simulator {extra} exited with {proc.wait()}")


def gate(tail: bool, folder: Path, number: int, load: dict[str, Any]) -> dict[str, Any]:
    """One gate: fresh simulators, the bench as the Job runs it; its summary's verdict."""
    procs: list[subprocess.Popen[str]] = []
    try:
        cand, cand_url = start_sim(*(TAIL if tail else ()))
        procs.append(cand)
        base, base_url = start_sim()
        procs.append(base)
        summary_path = folder / f"summary-{'tail' if tail else 'aa'}-{number}.json"
        started = time.monotonic()
        done = subprocess.run(
            [
                *BENCH, "bench",
                "--url", cand_url, "--baseline-url", base_url, "--model", MODEL,
                "--suite", "builtin:none",
                "--workload-json", json.dumps(load),
                "--thresholds-json", json.dumps(THRESHOLDS),
                "--trials", "3", "--max-trials", "10", "--deadline-seconds", "300",
                "--summary-path", str(summary_path), "--output", "jsonl",
            ],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        seconds = time.monotonic() - started
        if not summary_path.exists():
            return {"verdict": "no summary", "seconds": seconds, "stderr": done.stderr[-2000:]}
        summary = json.loads(summary_path.read_text())
        return {
            "verdict": summary.get("verdict"),
            "reasons": summary.get("reasons", [])[:4],
            "seconds": round(seconds, 1),
        }
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gates", type=int, default=10)
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the gates")
    parser.add_argument("--rate", type=float, default=RATE, help="requests/s of the level")
    parser.add_argument("--seconds", type=int, default=SECONDS, help="seconds per trial")
    args = parser.parse_args()
    load = workload(args.rate, args.seconds)
    spin = [sys.executable, "-c", "while True: pass"]
    loops = [subprocess.Popen(spin) for _ in range(args.busy)]
    rows: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, tail in (("A/A", False), ("TTFT tail", True)):
                gates = [gate(tail, Path(tmp), i, load) for i in range(args.gates)]
                verdicts = Counter(g["verdict"] for g in gates)
                rows[name] = {
                    "verdicts": dict(verdicts),
                    "median_seconds": statistics.median(g["seconds"] for g in gates),
                    "gates": gates,
                }
                print(f"{name:10} {dict(verdicts)}  median {rows[name]['median_seconds']:.0f} s")
                for g in gates:
                    if g["verdict"] != ("Failed" if tail else "Passed"):
                        print("   ", g["verdict"], "; ".join(g.get("reasons", []))[:400])
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()
    RESULTS.write_text(
        json.dumps(
            {
                "rate": args.rate,
                "seconds_per_level": args.seconds,
                "limit_ms": LIMIT_MS,
                "busy_loops": args.busy,
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
