"""The open-loop load sweep at 50 requests/s: TTFT against the simulator's truth, rate, CPU.

Starts the simulator as a child process with a flat timing profile (50 ms TTFT, 10 ms
between tokens, 64 output tokens: the setting of ``bench_accuracy.py``) and runs the
benchmark's own load sweep (``bench.runner.run`` with a workload: one level, open loop,
Poisson arrivals) in this process; with ``--pin`` the two are pinned to different CPUs
(better on a quiet machine, worse on a busy one: neither can move to a freer core). Then,
for every request, the server's record (``GET /sim/requests/{id}``):

- TTFT error = the bench's TTFT (from the request's intended arrival, the figure the SLO
  gate judges) - the server's (first token written - request arrived); reported per
  request (p50, p99) and as the error of the run's TTFT p99 itself (bench p99 - server p99
  over the same requests). The split: send lag (intended arrival -> the client started the
  request), and the rest (client stack, loopback, the server's accept and parse);
- achieved arrival rate: requests started / the sending time, against the asked rate;
- the bench's own CPU per request: this process's CPU time (user + system) over the run /
  requests sent.

Usage: python benchmarks/bench_load.py [--rate 50] [--seconds 30] [--repeat 3] [--pin]
Writes benchmarks/results/bench_load.json. Targets (issue 25): achieved rate within 2% of
the asked rate; TTFT p99 error small against the SLOs it judges (tens to hundreds of ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import flat_sim
from vllm_operator.api.workload import WorkloadSpec
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.http.request import ChatRequest
from vllm_operator.bench.http.transport import Limits, make_transport
from vllm_operator.bench.load.figures import ttft_ms
from vllm_operator.bench.prompts import PromptClass, prompt_for
from vllm_operator.bench.runner import run
from vllm_operator.bench.stats import percentile

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_load.json"
MODEL = "load-model"
TTFT_MS, ITL_MS, OUTPUT = 50.0, 10.0, 64
SHAPE = PromptClass("load", 256, OUTPUT)


class Fixed:
    """256-token prompts, each its own words; 64 output tokens."""

    def request(self, index: int) -> ChatRequest:
        return ChatRequest(prompt=prompt_for(SHAPE, index), max_tokens=OUTPUT)

    def describe(self) -> dict[str, Any]:
        return {"kind": "fixed", "input_tokens": SHAPE.prompt_tokens, "output_tokens": OUTPUT}


def start_sim(cpu: int | None) -> tuple[subprocess.Popen[str], str]:
    return flat_sim.start_sim(MODEL, TTFT_MS, ITL_MS, cpu)


async def truth(url: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    clock = asyncio.get_running_loop().time
    transport = make_transport("aiohttp", Limits(connect=5, stall=30), clock)
    out: dict[str, dict[str, Any]] = {}
    try:
        for rid in ids:
            status, body = await transport.get(f"{url}/sim/requests/{rid}", {})
            if status == 200:
                out[rid] = json.loads(body)
    finally:
        await transport.aclose()
    return out


def one(url: str, rate: float, seconds: int, seed: int) -> dict[str, Any]:
    workload = WorkloadSpec.model_validate(
        {
            "synthetic": {"inputTokens": {"mean": 256}, "outputTokens": {"mean": OUTPUT}},
            "seed": seed,
            "load": {"mode": "rate", "rates": [rate], "secondsPerLevel": seconds},
        }
    )
    config = BenchConfig(
        url=url, model=MODEL, workload=workload, traffic=Fixed(), warmup=0, trials=1
    )
    load_before = os.getloadavg()[0]
    cpu0 = time.process_time()
    state = asyncio.run(run(config))
    cpu = time.process_time() - cpu0
    load_after = os.getloadavg()[0]
    (load_run,) = state.candidate.load
    records = load_run.records
    server = asyncio.run(truth(url, [r.server_id for r in records if r.server_id]))
    errors, lags, rest, ours, theirs = [], [], [], [], []
    for r in records:
        t = server.get(r.server_id or "")
        bench = ttft_ms(r)
        if bench is None or t is None or t["first_token"] is None:
            continue
        true_ttft = (t["first_token"] - t["arrival"]) * 1000
        assert r.dispatched_at is not None
        lag = (r.dispatched_at - r.scheduled_at) * 1000
        ours.append(bench)
        theirs.append(true_ttft)
        errors.append(bench - true_ttft)
        lags.append(lag)
        rest.append(bench - true_ttft - lag)
    failed = sum(1 for r in records if not r.ok)
    return {
        "asked_rate": rate,
        "seconds": seconds,
        "requests": len(records),
        "failed": failed,
        "matched_with_server": len(errors),
        "achieved_rate": load_run.achieved_rate,
        "achieved_error_percent": (load_run.achieved_rate - rate) / rate * 100,
        "ttft_p99_ms": {"bench": percentile(ours, 99), "server": percentile(theirs, 99)},
        "ttft_p99_error_ms": percentile(ours, 99) - percentile(theirs, 99),
        "ttft_p50_ms": {"bench": percentile(ours, 50), "server": percentile(theirs, 50)},
        "ttft_error_ms": {"p50": percentile(errors, 50), "p99": percentile(errors, 99)},
        "send_lag_ms": {"p50": percentile(lags, 50), "p99": percentile(lags, 99)},
        "rest_of_error_ms": {"p50": percentile(rest, 50), "p99": percentile(rest, 99)},
        "load_average_1min": [load_before, load_after],
        "cpu_seconds": cpu,
        "cpu_ms_per_request": cpu / max(1, len(records)) * 1000,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--seconds", type=int, default=30)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--pin", action="store_true", help="simulator on CPU 0, bench on CPU 1")
    args = p.parse_args()
    pinned = args.pin and shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
    if pinned:
        os.sched_setaffinity(0, {1})
    proc, url = start_sim(0 if pinned else None)
    try:
        runs = [one(url, args.rate, args.seconds, seed) for seed in range(args.repeat)]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    for r in runs:
        print(
            f"{r['asked_rate']:g} req/s x {r['seconds']} s: {r['requests']} requests "
            f"({r['failed']} failed), achieved {r['achieved_rate']:.2f}/s "
            f"({r['achieved_error_percent']:+.2f}%); TTFT p99 bench "
            f"{r['ttft_p99_ms']['bench']:.1f} ms vs server {r['ttft_p99_ms']['server']:.1f} ms "
            f"(error {r['ttft_p99_error_ms']:+.2f} ms); per-request error p50 "
            f"{r['ttft_error_ms']['p50']:.2f} / p99 {r['ttft_error_ms']['p99']:.2f} ms (send lag "
            f"p50 {r['send_lag_ms']['p50']:.2f} / p99 {r['send_lag_ms']['p99']:.2f} ms); "
            f"CPU {r['cpu_ms_per_request']:.2f} ms/request (load average "
            f"{r['load_average_1min'][0]:.1f}-{r['load_average_1min'][1]:.1f})"
        )
    RESULTS.write_text(
        json.dumps(
            {
                "host": {"python": platform.python_version(), "cpus": os.cpu_count()},
                "pinned": pinned,
                "profile": {"ttft_ms": TTFT_MS, "itl_ms": ITL_MS, "output_tokens": OUTPUT},
                "runs": runs,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
