"""An SLO gate on a loaded laptop (issues 29 and 40): two simulators of one profile Pass, a
TTFT tail regression of the simulator Fails.

Each gate is the real ``vllm-operator bench`` (a subprocess, as the Job runs it) against two
fresh ``vllm-operator sim`` processes on loopback (candidate and baseline twin, paired
trials, both loaded at the same moments: ``bench.load.sweep``), while ``--busy`` processes
spin at 100% of a core each (a laptop running a build).
The gate's plan is the one ``vllm-operator render`` gives the Job of ``slo_laptop.yaml``
(thresholds, workload, trials, deadline); the script refuses to run when render warns that
the plan cannot decide (``GatePlanDecides``). Workload: synthetic 64-token prompts with
16-token answers, open-loop Poisson arrivals at 10 requests/s per server for 25 s per trial
(250 requests a trial, as many as 25 requests/s for 10 s gave, at 40% of the CPU a second:
on a 2-core laptop beside two busy loops the simulators and the client share what the
loops leave), 3 trials then one at a time up to 10 while a figure is undecided. Limits:
TTFT p99 <= 500 ms and maxRegressionPercent 10 against the twin, at the default TTFT floor
(10% of the limit; ``--ttft-floor-percent`` sets the spec's ``ttftMs.regressionFloorPercent``
instead). The simulators answer with a constant TTFT of 50 ms and 10 ms gaps
(``--sim-ttft-ms``, ``--sim-itl-ms``) and 1% per-request jitter; everything else in the tail
is the loaded machine's.

Rows: **A/A** (both simulators alike); **TTFT tail** (the candidate with
``--sim-ttft-tail-percent 5 --sim-ttft-tail-ms 2000``: one request in twenty waits 2 s more
for its first token; its median does not move, its p99 does).

Per gate it keeps and prints the verdict, the duration, the deciding figures (trials, the
candidate's and the twin's TTFT p99 per trial, the counts above the limit and above the
twin's bars, the clustering and the stray trial), the machine's load averages (1, 5 and 15
minutes) before and after, and the CPU time per request of the bench client and of each
simulator. Priorities: the busy loops are started by the script and inherit its niceness,
as the bench and the simulators do: run under ``nice`` (a shared machine), the gate's own
processes are never niced below the loops beside them.

Run: ``.venv/bin/python benchmarks/slo_laptop.py [--gates 10] [--busy 2] [--rows aa,tail]
[--results PATH]``. Saves ``benchmarks/results/slo_laptop.json`` unless told otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "slo_laptop.json"
SPEC = ROOT / "benchmarks" / "slo_laptop.yaml"
TAIL = ("--sim-ttft-tail-percent", "5", "--sim-ttft-tail-ms", "2000")
PLAN_FLAGS = ("--thresholds-json", "--workload-json", "--trials", "--max-trials",
              "--deadline-seconds")  # fmt: skip
"""The rendered Job's arguments that make the gate's plan, passed to the bench as they are."""

CLI = [
    sys.executable,
    "-c",
    "import sys; from vllm_operator.commands import main; sys.exit(main())",
]
"""``vllm-operator`` of this checkout (the console script may point at another one)."""


def rendered_plan(floor_percent: float | None) -> tuple[str, list[str], dict[str, Any]]:
    """(model, the bench's plan arguments, the CR) as ``render`` gives them for
    ``slo_laptop.yaml``; exits when render warns that the plan cannot decide."""
    cr = yaml.safe_load(SPEC.read_text())
    if floor_percent is not None:
        cr["spec"]["gate"]["thresholds"]["slo"]["ttftMs"]["regressionFloorPercent"] = floor_percent
    done = subprocess.run(
        [*CLI, "render", "-f", "-"], input=yaml.safe_dump(cr), capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0 or "cannot be decided" in done.stderr:
        sys.exit(f"render refuses the plan of {SPEC.name}: {done.stderr.strip()}")
    job = next(d for d in yaml.safe_load_all(done.stdout) if d and d.get("kind") == "Job")
    container = next(
        c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == "bench"
    )
    args = container["args"]
    plan: list[str] = []
    for flag in PLAN_FLAGS:
        plan += [flag, args[args.index(flag) + 1]]
    return args[args.index("--model") + 1], plan, cr


def start_sim(model: str, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """A fresh simulator on a free loopback port; returns it and its URL."""
    cmd = [sys.executable, "-m", "vllm_operator.sim", model, "--port", "0"]
    cmd += ["--sim-warmup-seconds", "0.2", "--sim-ttft-ms", "50", "--sim-itl-ms", "10"]
    cmd += ["--sim-jitter", "1", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("SIM LISTENING "):
            return proc, line.split()[-1]
    raise RuntimeError(f"simulator {extra} exited with {proc.wait()}")


def deciding(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures the verdict rests on: per trial, both servers' TTFT p99 and the counts."""
    level = summary["load"]["levels"][0]
    twin = (summary.get("pairedBaseline") or {}).get("load", {}).get("levels", [{}])[0]
    tails = level.get("tails", {}).get("ttft.p99", {})
    regression = tails.get("regression", {})
    return {
        "requests": level.get("requests", 0),
        "trials": len(level.get("percentiles", {}).get("ttft.p99", [])),
        "ttft_p99_ms": level.get("percentiles", {}).get("ttft.p99"),
        "twin_ttft_p99_ms": twin.get("percentiles", {}).get("ttft.p99"),
        "above_limit": tails.get("above"),
        "above_twin_bars": regression.get("above"),
        "twin_bars_ms": regression.get("bars"),
        "floor_ms": regression.get("floor"),
        "across": regression.get("across"),
        "stray_trial": regression.get("strayTrial"),
    }


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a live process has used so far, from /proc (0 if gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loads() -> list[float]:
    """The machine's load averages over 1, 5 and 15 minutes."""
    return [round(x, 1) for x in os.getloadavg()]


def gate(model: str, plan: list[str], tail: bool, folder: Path, number: int) -> dict[str, Any]:
    """One gate: fresh simulators, the bench as the Job runs it; its summary's verdict, the
    figure that decided it, the load averages and each process's CPU per request."""
    procs: list[subprocess.Popen[str]] = []
    load_before = loads()
    try:
        cand, cand_url = start_sim(model, *(TAIL if tail else ()))
        procs.append(cand)
        base, base_url = start_sim(model)
        procs.append(base)
        sims_before = [cpu_seconds(p.pid) for p in procs]
        summary_path = folder / f"summary-{'tail' if tail else 'aa'}-{number}.json"
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        done = subprocess.run(
            [
                *CLI, "bench",
                "--url", cand_url, "--baseline-url", base_url, "--model", model,
                "--suite", "builtin:none", *plan,
                "--summary-path", str(summary_path), "--output", "jsonl",
            ],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        seconds = time.monotonic() - started
        children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the bench: sims still live
        client_cpu = (children.ru_utime + children.ru_stime) - (
            children_before.ru_utime + children_before.ru_stime
        )
        sims_cpu = [cpu_seconds(p.pid) - b for p, b in zip(procs, sims_before, strict=True)]
        load = {"load_before": load_before, "load_after": loads()}
        if not summary_path.exists():
            return {"verdict": "no summary", "seconds": seconds, **load,
                    "stderr": done.stderr[-2000:]}  # fmt: skip
        summary = json.loads(summary_path.read_text())
        figures = deciding(summary)
        sent = max(figures["requests"], 1)
        return {
            "verdict": summary.get("verdict"),
            "seconds": round(seconds, 1),
            **load,
            "cpu_ms_per_request": {
                "client": round(1000 * client_cpu / (2 * sent), 2),
                "candidate_sim": round(1000 * sims_cpu[0] / sent, 2),
                "twin_sim": round(1000 * sims_cpu[1] / sent, 2),
            },
            **figures,
            "reasons": summary.get("reasons", [])[:4],
        }
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)


def line(name: str, number: int, g: dict[str, Any], limit: float) -> str:
    """One gate's progress line: verdict, duration, the deciding figure (the worst trial's
    TTFT p99 of both servers, the counts, the first reason), loads, CPU per request."""
    worst = max(g.get("ttft_p99_ms") or [0.0])
    twin_worst = max(g.get("twin_ttft_p99_ms") or [0.0])
    cpu = g.get("cpu_ms_per_request", {})
    reason = (g.get("reasons") or ["-"])[0][:200]
    return (
        f"{name} {number}: {g['verdict']} {g['seconds']:.0f} s, {g.get('trials')} trials; "
        f"TTFT p99 worst trial {worst:.0f} ms (twin {twin_worst:.0f}), limit {limit:g}; "
        f"above limit {g.get('above_limit')}, above twin bars {g.get('above_twin_bars')}; "
        f"load 1/5/15 min {g.get('load_before')} -> {g.get('load_after')}; CPU ms/request "
        f"client {cpu.get('client')}, sims {cpu.get('candidate_sim')}/{cpu.get('twin_sim')}"
        f"\n    {reason}"
    )


def row(gates: list[dict[str, Any]]) -> dict[str, Any]:
    """A row's verdicts, median duration and the range of the 1-minute load averages."""
    seen = [x for g in gates for x in (g["load_before"][0], g["load_after"][0])]
    return {
        "verdicts": dict(Counter(g["verdict"] for g in gates)),
        "median_seconds": statistics.median(g["seconds"] for g in gates),
        "load_1min": [min(seen), max(seen)],
        "gates": gates,
    }


def save(path: Path, cr: dict[str, Any], plan: list[str], busy: int, rows: dict[str, Any]) -> None:
    """The results so far (after every gate: a run cut short keeps its gates)."""
    path.write_text(
        json.dumps(
            {
                "spec": cr["spec"]["gate"],
                "bench_plan": plan,
                "busy_loops": busy,
                "niceness": os.nice(0),
                "cores": os.cpu_count(),
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gates", type=int, default=10)
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the gates")
    parser.add_argument("--rows", default="aa,tail", help="which rows: aa, tail or both")
    parser.add_argument(
        "--ttft-floor-percent", type=float, default=None,
        help="ttftMs.regressionFloorPercent of the spec (default: none, the TTFT default 10)",
    )  # fmt: skip
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    model, plan, cr = rendered_plan(args.ttft_floor_percent)
    print("plan:", " ".join(plan), flush=True)
    limit = cr["spec"]["gate"]["thresholds"]["slo"]["ttftMs"]["p99"]
    rows_asked = args.rows.split(",")
    spin = [sys.executable, "-c", "while True: pass"]
    loops = [subprocess.Popen(spin) for _ in range(args.busy)]
    rows: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for key, name, tail in (("aa", "A/A", False), ("tail", "TTFT tail", True)):
                if key not in rows_asked:
                    continue
                gates = []
                for i in range(args.gates):
                    g = gate(model, plan, tail, Path(tmp), i)
                    gates.append(g)
                    print(line(name, i, g, limit), flush=True)
                    save(args.results, cr, plan, args.busy, {**rows, name: row(gates)})
                rows[name] = row(gates)
                print(
                    f"{name:10} {rows[name]['verdicts']}  median "
                    f"{rows[name]['median_seconds']:.0f} s, load (1 min) "
                    f"{rows[name]['load_1min']}"
                )
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()


if __name__ == "__main__":
    main()
