"""The study's tables, re-measured by `vllm-operator bench` against the simulator's profiles.

Runs the benchmark with its defaults (5 iterations after a warm-up; 1/2/4/8 streams, three
requests per stream of 1,024 prompt and 105 output tokens; the default quality suite)
against three simulator processes (0.16.0 eager, 0.17.0 eager, 0.17.0 --performance-mode
throughput), by default in real time (``--scale 1``: about six minutes, the three in
parallel), prints each measured table beside the published one
(shared/docs/published-study.md) with the difference, and the gate's verdicts with a 10%
regression limit against 0.16.0 eager as the stable baseline.

Usage: python benchmarks/bench_profiles.py [--scale 1.0]
Writes benchmarks/results/bench_profiles.json. Target (issue 7): every cell within 10%.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary
from vllm_operator.bench import BenchConfig, BenchReport, run_benchmark
from vllm_operator.bench.quality.suite import load_suite
from vllm_operator.gate import verdict
from vllm_operator.sim.study import CLASSES, STREAMS, published

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_profiles.json"
MODEL = "Qwen/Qwen3-30B-A3B-Instruct-2507-GPTQ-Int4"
# label -> (simulator flags, (short ms, tok/s, medium ms, tok/s, long ms, tok/s), aggregates)
PUBLISHED: dict[str, tuple[tuple[str, ...], tuple[float, ...], tuple[float, ...]]] = {
    c.label: (
        c.sim_args,
        tuple(x for k in CLASSES for x in (c.latency_ms[k], c.tokens_per_second[k])),
        tuple(c.aggregate[s] for s in STREAMS),
    )
    for c in published().values()
}


def start_sim(flags: tuple[str, ...], scale: float) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "vllm_operator.sim", MODEL, "--port", "0"]
    cmd += ["--sim-warmup-seconds", "0", "--sim-time-scale", str(scale), *flags]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("SIM LISTENING "):
            return proc, line.split()[-1]
    raise RuntimeError(f"simulator exited with {proc.wait()}")


def model_time(summary: BenchSummary, scale: float) -> BenchSummary:
    """Figures of a time-scaled run converted back to model time."""
    latency = [
        f.model_copy(
            update={
                "median_ms": f.median_ms / scale,
                "ttft_ms": f.ttft_ms / scale,
                "e2e_tokens_per_second": f.e2e_tokens_per_second * scale,
                "decode_tokens_per_second": f.decode_tokens_per_second * scale,
            }
        )
        for f in summary.latency
    ]
    concurrency = [
        f.model_copy(
            update={
                "aggregate_tokens_per_second": f.aggregate_tokens_per_second * scale,
                "requests_per_second": f.requests_per_second * scale,
            }
        )
        for f in summary.concurrency
    ]
    return summary.model_copy(update={"latency": latency, "concurrency": concurrency})


def compare(summary: BenchSummary, name: str) -> dict[str, Any]:
    _, lat_pub, agg_pub = PUBLISHED[name]
    by_class = {f.prompt_class: f for f in summary.latency}
    cells: dict[str, Any] = {}
    for i, cls in enumerate(("short", "medium", "long")):
        f = by_class[cls]
        cells[f"{cls} lat. ms"] = (f.median_ms, lat_pub[2 * i])
        cells[f"{cls} tok/s"] = (f.e2e_tokens_per_second, lat_pub[2 * i + 1])
    for level, pub in zip(summary.concurrency, agg_pub, strict=True):
        cells[f"{level.concurrency} streams tok/s"] = (level.aggregate_tokens_per_second, pub)
    return {
        k: {"measured": round(m, 2), "published": p, "diff_percent": round((m / p - 1) * 100, 1)}
        for k, (m, p) in cells.items()
    }


async def run_all(scale: float) -> dict[str, BenchReport]:
    suite = load_suite("builtin:default")
    procs = []
    try:
        urls = {}
        for name, (flags, _, _) in PUBLISHED.items():
            proc, urls[name] = start_sim(flags, scale)
            procs.append(proc)
        configs = {
            name: BenchConfig(
                url=url,
                model=MODEL,
                suite=suite,
                suite_ref="builtin:default",
                deadline_seconds=3600,
            )
            for name, url in urls.items()
        }
        reports = await asyncio.gather(*(run_benchmark(c) for c in configs.values()))
        return dict(zip(configs, reports, strict=True))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="simulator time scale")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    started = time.monotonic()
    reports = asyncio.run(run_all(args.scale))
    summaries = {n: model_time(r.summary, args.scale) for n, r in reports.items()}
    out: dict[str, Any] = {"scale": args.scale, "profiles": {}, "gate": {}}
    worst = 0.0
    for name, summary in summaries.items():
        cells = compare(summary, name)
        quality = summary.quality
        out["profiles"][name] = {
            "cells": cells,
            "quality": quality.to_wire() if quality else None,
            "errors": summary.errors,
        }
        print(f"\n{name}: measured / published (diff)")
        for key, c in cells.items():
            print(
                f"  {key:18s} {c['measured']:>10,.1f} / {c['published']:>9,.1f}"
                f"  ({c['diff_percent']:+.1f}%)"
            )
            worst = max(worst, abs(c["diff_percent"]))
        if quality:
            print(
                f"  quality {quality.passed}/{quality.total}, failed: {', '.join(quality.failed)}"
            )
    thresholds = Thresholds.model_validate(
        {"maxRegressionPercent": 10, "quality": {"minPassed": 12}}
    )
    base = summaries["v0.16.0 (enforce-eager)"]
    for name in list(PUBLISHED)[1:]:
        result = verdict(summaries[name], thresholds, base)
        out["gate"][name] = result.to_wire()
        print(f"\ngate vs 0.16.0 eager, max regression 10%: {name}: {result.outcome}")
        for reason in result.reasons:
            print(f"  - {reason}")
    out["worst_cell_diff_percent"] = worst
    out["wall_seconds"] = round(time.monotonic() - started, 1)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nworst cell {worst:.1f}% (all cells); wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
