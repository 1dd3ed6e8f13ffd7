"""How faithful and how fast is the vLLM simulator? Prints figures, saves sim_bench.json.

(a) For each profile fitted to the published study: the latency table (short/medium/long,
    sequential, 1 warm-up + 5 requests, median) and the aggregate tok/s of a closed loop at
    1/2/4/8 streams, measured the study's way by a small aiohttp client, beside the
    published figures with % error. Time scaling is used where it does not distort the
    figure: short requests run unscaled (client overhead would be magnified), medium and
    the concurrency loop at 0.2, long at 0.05; measured times are divided by the scale.
(b) The simulator's own timing error: actual minus intended inter-token gap (server side,
    ``/sim/timing``, and client side against the intended gap), p50/p99, 8 streams of a
    constant 50 ms TTFT / 10 ms ITL profile (like shared/docs/testing-notes.md).
(c) Load: 256 concurrent streams for 10 s against one simulator process pinned to one core
    (``taskset -c 0``), reporting delivered tokens/s, the process's CPU time per wall
    second, and the server-side timing error under that load.

Run: ``.venv/bin/python benchmarks/sim_bench.py [--quick]`` (about 2-3 minutes; --quick
skips the latency/concurrency tables).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from vllm_operator.bench.prompts import CONCURRENCY_CLASS
from vllm_operator.bench.prompts import SIZES as CLASSES
from vllm_operator.sim import tokens
from vllm_operator.sim.runner import SimProcess
from vllm_operator.sim.study import published

RESULTS = Path(__file__).parent / "results" / "sim_bench.json"

PUBLISHED: dict[str, dict[str, Any]] = {
    name: {
        "latency": {k: (c.latency_ms[k], c.tokens_per_second[k]) for k in c.latency_ms},
        "concurrency": dict(c.aggregate),
    }
    for name, c in published().items()
}
SIZES = {
    name: (CLASSES[name].prompt_tokens, CLASSES[name].output_tokens, scale)
    for name, scale in (("short", 1.0), ("medium", 0.2), ("long", 0.05))
}
CONCURRENCY_SCALE = 0.2
# The simulator of the timing and load tests runs at nice -10 (when root): this machine's
# two cores are shared with other jobs, and the point is the simulator's own error, not
# how long the kernel leaves it waiting behind them.
NICE = -10
NOTES = [
    "concurrency requests: 1,024 prompt tokens, 105 output tokens (closed loop). The study "
    "did not publish this shape; with medium requests its 118.6 tok/s for one request and "
    "97.2 tok/s for one stream (0.17.0 throughput) contradict each other, with long prompts "
    "its three tables agree (sim/data/profiles.yaml).",
    "short rows: 2 output tokens cannot match both the published latency and tok/s; the "
    "profiles aim at the geometric mean, so both land within about 7%.",
    "timing and load tests: simulator pinned to core 0 at nice -10, client on the other "
    "core; load_average records how busy the shared machine was.",
]


@dataclass
class Stream:
    start: float
    arrivals: list[float] = field(default_factory=list)
    end: float = 0.0
    request_id: str = ""
    usage: dict[str, int] | None = None


async def stream_completion(
    session: aiohttp.ClientSession, url: str, prompt: str, max_tokens: int
) -> Stream:
    """One streamed completion; arrival time of every content chunk (client clock)."""
    body = {
        "model": "sim",
        "prompt": prompt,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    out = Stream(start=time.perf_counter())
    async with session.post(url + "/v1/completions", json=body) as resp:
        resp.raise_for_status()
        out.request_id = resp.headers.get("x-sim-request-id", "")
        async for raw in resp.content:
            line = raw.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                break
            chunk = json.loads(data)
            if chunk["choices"]:
                if chunk["choices"][0]["text"]:
                    out.arrivals.append(time.perf_counter())
            else:
                out.usage = chunk.get("usage")
    out.end = time.perf_counter()
    return out


async def lean_stream(
    session: aiohttp.ClientSession, url: str, prompt: str, max_tokens: int, out: list[float]
) -> None:
    """A cheap streaming client for the load test: no JSON parsing, one timestamp per read.

    The load test measures the simulator, so the client must not be the bottleneck: it
    counts token chunks (``"text": `` occurrences) in each network read.
    """
    body = {"model": "sim", "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True,
            "stream": True}  # fmt: skip
    async with session.post(url + "/v1/completions", json=body) as resp:
        resp.raise_for_status()
        async for data in resp.content.iter_any():
            n = data.count(b'"text": ')
            if n:
                now = time.perf_counter()
                out.extend([now] * n)


def session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), read_bufsize=2**20, timeout=aiohttp.ClientTimeout()
    )


def start_sim(extra: list[str], *, pin: bool = False) -> SimProcess:
    prefix = ["taskset", "-c", "0"] if pin and shutil.which("taskset") else []
    if pin and NICE and os.geteuid() == 0 and shutil.which("nice"):
        prefix = ["nice", "-n", str(NICE), *prefix]
    argv = ["sim", "--host", "127.0.0.1", "--port", "0", "--served-model-name", "sim",
            "--sim-warmup-seconds", "0", *extra]  # fmt: skip
    return SimProcess.start(argv, prefix=prefix)


def err(measured: float, published: float) -> float:
    return (measured / published - 1.0) * 100.0


async def latency_row(profile: str, size: str) -> tuple[float, float]:
    prompt_n, out_n, scale = SIZES[size]
    sim = start_sim(["--sim-profile", profile, "--sim-time-scale", str(scale)])
    try:
        async with session() as s:
            await stream_completion(s, sim.url, tokens.prompt_of(prompt_n, 99), out_n)
            lat = []
            for i in range(5):
                r = await stream_completion(s, sim.url, tokens.prompt_of(prompt_n, i), out_n)
                assert len(r.arrivals) == out_n, (len(r.arrivals), out_n)
                lat.append((r.end - r.start) / scale)
    finally:
        sim.stop()
    median = statistics.median(lat)
    return median * 1000, out_n / median


async def closed_loop(url: str, streams: int, warm: float, window: float) -> float:
    """Aggregate output tok/s of ``streams`` closed loops, counted in [warm, warm+window]."""
    t0 = time.perf_counter()
    stop_at = t0 + warm + window
    arrivals: list[float] = []

    async def one(s: aiohttp.ClientSession, i: int) -> None:
        k = 0
        while time.perf_counter() < stop_at:
            prompt = tokens.prompt_of(CONCURRENCY_CLASS.prompt_tokens, 1000 * i + k)
            r = await stream_completion(s, url, prompt, CONCURRENCY_CLASS.output_tokens)
            arrivals.extend(r.arrivals)
            k += 1

    async with session() as s:
        await asyncio.gather(*(one(s, i) for i in range(streams)))
    lo, hi = t0 + warm, t0 + warm + window
    return sum(1 for a in arrivals if lo <= a < hi) / window


async def concurrency_table(profile: str) -> dict[int, float]:
    scale = CONCURRENCY_SCALE
    sim = start_sim(["--sim-profile", profile, "--sim-time-scale", str(scale)])
    out = {}
    try:
        for c in (1, 2, 4, 8):
            # one request cycle in wall time, from the single-stream medium latency
            cycle = {"0.17.0-throughput": 0.9}.get(profile, 5.2) * scale
            agg = await closed_loop(sim.url, c, warm=1.2 * cycle, window=max(2.0, 4 * cycle))
            out[c] = agg * scale
    finally:
        sim.stop()
    return out


async def reproduce() -> dict[str, Any]:
    report: dict[str, Any] = {}
    for profile, pub in PUBLISHED.items():
        rows = {}
        print(f"\n== profile {profile} (published study vs simulator, median of 5) ==")
        print(f"{'size':8} {'pub ms':>9} {'sim ms':>9} {'err%':>6} {'pub tok/s':>10} "
              f"{'sim tok/s':>10} {'err%':>6}")  # fmt: skip
        for size in ("short", "medium", "long"):
            ms, tps = await latency_row(profile, size)
            pms, ptps = pub["latency"][size]
            rows[size] = {
                "published_ms": pms, "sim_ms": round(ms, 1), "err_ms_pct": round(err(ms, pms), 1),
                "published_tok_s": ptps, "sim_tok_s": round(tps, 2),
                "err_tok_s_pct": round(err(tps, ptps), 1),
            }  # fmt: skip
            print(f"{size:8} {pms:9.0f} {ms:9.0f} {err(ms, pms):6.1f} {ptps:10.1f} {tps:10.1f} "
                  f"{err(tps, ptps):6.1f}")  # fmt: skip
        conc = await concurrency_table(profile)
        print(f"{'streams':8} {'pub tok/s':>10} {'sim tok/s':>10} {'err%':>6}")
        crow = {}
        for c, agg in conc.items():
            p = pub["concurrency"][c]
            crow[str(c)] = {"published": p, "sim": round(agg, 1), "err_pct": round(err(agg, p), 1)}
            print(f"{c:<8} {p:10.1f} {agg:10.1f} {err(agg, p):6.1f}")
        report[profile] = {"latency": rows, "concurrency": crow}
    return report


async def sim_timing(url: str, reset: bool = False) -> dict[str, Any]:
    async with session() as s, s.get(url + "/sim/timing" + ("?reset=1" if reset else "")) as r:
        data: dict[str, Any] = await r.json()
        return data


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(0, min(len(s) - 1, round(q / 100 * (len(s) - 1))))] if s else float("nan")


async def timing_error() -> dict[str, Any]:
    sim = start_sim(["--sim-ttft-ms", "50", "--sim-itl-ms", "10"], pin=True)
    try:
        await sim_timing(sim.url, reset=True)
        client_err: list[float] = []
        async with session() as s:
            for _ in range(3):
                runs = await asyncio.gather(
                    *(stream_completion(s, sim.url, tokens.prompt_of(32, i), 64) for i in range(8))
                )
                for r in runs:
                    gaps = [b - a for a, b in zip(r.arrivals, r.arrivals[1:], strict=False)]
                    client_err.extend(g - 0.010 for g in gaps)
        server = await sim_timing(sim.url)
    finally:
        sim.stop()
    out = {
        "setup": "8 streams x 64 tokens x 3 rounds, TTFT 50 ms, ITL 10 ms, sim on core 0",
        "server_gap_error_ms": server["gap_error"],
        "server_ttft_error_ms": server["ttft_error"],
        "client_gap_error_ms": {
            "count": len(client_err),
            "p50_ms": pct(client_err, 50) * 1000,
            "p99_ms": pct(client_err, 99) * 1000,
        },
    }
    g = server["gap_error"]
    c = out["client_gap_error_ms"]
    print("\n== timing error (actual - intended inter-token gap) ==")
    print(f"server side: p50 {g['p50_ms']:.3f} ms, p99 {g['p99_ms']:.3f} ms "
          f"(|err| p50 {g['abs_p50_ms']:.3f}, p99 {g['abs_p99_ms']:.3f}; "
          f"n={g['count']})")  # fmt: skip
    print(f"client side: p50 {c['p50_ms']:.3f} ms, p99 {c['p99_ms']:.3f} ms (n={c['count']})")
    return out


async def generated_tokens(url: str) -> float:
    """``vllm:generation_tokens_total`` from the simulator's /metrics."""
    async with session() as s, s.get(url + "/metrics") as r:
        text = await r.text()
    for line in text.splitlines():
        if line.startswith("vllm:generation_tokens_total"):
            return float(line.rsplit(" ", 1)[1])
    raise RuntimeError("no vllm:generation_tokens_total in /metrics")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load_test(
    streams: int = 256, seconds: float = 10.0, stagger: bool = True
) -> dict[str, Any]:
    # ITL 40 ms: 256 streams x 25 tok/s = 6,400 tok/s offered.
    sim = start_sim(["--sim-ttft-ms", "100", "--sim-itl-ms", "40", "--max-num-seqs", "1024"],
                    pin=True)  # fmt: skip
    pid = sim.proc.pid
    try:
        t_warm = 1.5
        arrivals: list[float] = []
        t0 = time.perf_counter()
        stop_at = t0 + t_warm + seconds
        cpu = {}

        async def mark() -> None:
            await asyncio.sleep(t_warm)
            cpu["start"] = cpu_seconds(pid)
            cpu["tokens_start"] = await generated_tokens(sim.url)
            await sim_timing(sim.url, reset=True)
            await asyncio.sleep(seconds)
            cpu["end"] = cpu_seconds(pid)
            cpu["tokens_end"] = await generated_tokens(sim.url)
            cpu["timing"] = await sim_timing(sim.url)  # type: ignore[assignment]

        async def one(s: aiohttp.ClientSession, i: int) -> None:
            k = 0
            if stagger:  # streams arrive spread over one inter-token gap, not all at once
                await asyncio.sleep(0.040 * i / streams)
            while time.perf_counter() < stop_at:
                prompt = tokens.prompt_of(64, i * 100 + k)
                await lean_stream(s, sim.url, prompt, 200, arrivals)
                k += 1

        async with session() as s:
            await asyncio.gather(mark(), *(one(s, i) for i in range(streams)))
    finally:
        sim.stop()
    lo, hi = t0 + t_warm, t0 + t_warm + seconds
    client_tok_s = sum(1 for a in arrivals if lo <= a < hi) / seconds
    tok_s = (cpu["tokens_end"] - cpu["tokens_start"]) / seconds
    cpu_frac = (cpu["end"] - cpu["start"]) / seconds
    timing: dict[str, Any] = cpu["timing"]  # type: ignore[assignment]
    g = timing["gap_error"]
    out = {
        "streams": streams,
        "window_s": seconds,
        "tokens_per_s": round(tok_s, 1),
        "client_counted_tokens_per_s": round(client_tok_s, 1),
        "offered_tokens_per_s": streams * 25,
        "sim_cpu_seconds_per_second": round(cpu_frac, 3),
        "pinned_to_one_core": bool(shutil.which("taskset")),
        "server_gap_error_ms": g,
    }
    print(f"\n== load: {streams} streams, {seconds:.0f} s, simulator pinned to one core ==")
    print(f"delivered {tok_s:,.0f} tok/s (server counter; client counted "
          f"{client_tok_s:,.0f}; offered {streams * 25:,}); simulator CPU "
          f"{cpu_frac:.2f} s per s; gap error p50 {g['p50_ms']:.3f} ms, p99 {g['p99_ms']:.3f} ms "
          f"(|err| p50 {g['abs_p50_ms']:.3f} ms)")  # fmt: skip
    return out


async def amain(quick: bool) -> dict[str, Any]:
    if len(os.sched_getaffinity(0)) > 1 and shutil.which("taskset"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})  # client off the sim's core
    out: dict[str, Any] = {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_at_start": os.getloadavg(),
        "notes": NOTES,
    }
    if not quick:
        out["reproduction"] = await reproduce()
    out["timing_error"] = await timing_error()
    out["load"] = await load_test()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="skip the published tables")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    out = asyncio.run(amain(args.quick))
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=2) + "\n")
        print(f"\nsaved {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
