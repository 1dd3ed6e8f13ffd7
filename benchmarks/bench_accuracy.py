"""How wrong is the benchmark's own clock? Client timings against the simulator's truth.

Starts the simulator as a child process with a flat timing profile (50 ms TTFT, 10 ms
inter-token latency, 64 output tokens: the setting of shared/docs/testing-notes.md), runs
closed loops of 1, 2, 4, 8 and 64 streams with each HTTP client of the benchmark, and
compares every request with the server's own record (``GET /sim/requests/{id}``):

- TTFT error = client TTFT - (server first-token time - server arrival time);
- aggregate tok/s error = client steady-window aggregate vs the tokens the server sent in
  the same window (token times first..last token, evenly spaced: the profile is flat).

Then, when installed, NVIDIA's ``aiperf`` runs the same loads against the same simulator;
its TTFT p50 is compared with the server's intended TTFT plus the server's own measured
scheduling error (``GET /sim/timing``), since aiperf's request ids are not visible.

Usage: python benchmarks/bench_accuracy.py [--levels 1,2,4,8,64] [--aiperf PATH]
Writes benchmarks/results/bench_accuracy.json. Targets (issue 7): TTFT error p50 <= 2 ms at
1-8 streams, <= 10 ms at 64; aggregate tok/s within 1%.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import flat_sim
from vllm_operator.bench.http.request import ChatRequest, RequestRecord, send
from vllm_operator.bench.http.transport import Limits, make_transport
from vllm_operator.bench.prompts import PromptClass, prompt_for
from vllm_operator.bench.stats import level_figures, percentile

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_accuracy.json"
MODEL = "accuracy-model"
TTFT_MS, ITL_MS, OUTPUT = 50.0, 10.0, 64
PROMPT = PromptClass("accuracy", 256, OUTPUT)


def start_sim(cpu: int | None) -> tuple[subprocess.Popen[str], str]:
    return flat_sim.start_sim(MODEL, TTFT_MS, ITL_MS, cpu)


async def measure(url: str, client: str, level: int, per_stream: int) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    clock = loop.time
    offset = time.time() - clock()  # client clock -> wall clock (same machine)
    transport = make_transport(client, Limits(connect=5, stall=30), clock)
    streams: list[list[RequestRecord]] = [[] for _ in range(level)]

    async def worker(n: int) -> None:
        for j in range(per_stream):
            request = ChatRequest(prompt=prompt_for(PROMPT, n * 1000 + j), max_tokens=OUTPUT)
            record = RequestRecord(scheduled_at=clock())
            streams[n].append(record)
            await send(
                transport,
                request,
                url=f"{url}/v1/chat/completions",
                model=MODEL,
                headers={},
                clock=clock,
                record=record,
            )

    try:
        await transport.get(f"{url}/sim/timing?reset=1", {})
        await asyncio.gather(*(worker(n) for n in range(level)))
        _, timing_body = await transport.get(f"{url}/sim/timing", {})
        truth = await _server_records(transport, url, streams)
    finally:
        await transport.aclose()
    ttft_err, e2e_err, uplink, downlink, server_streams = [], [], [], [], []
    for stream in streams:
        server_stream = []
        for r in stream:
            t = truth.get(r.server_id or "")
            if not r.ok or t is None or t["first_token"] is None:
                continue
            ttft_err.append((r.ttft - (t["first_token"] - t["arrival"])) * 1000)
            e2e_err.append((r.e2e - (t["last_token"] - t["arrival"])) * 1000)
            assert r.sent_at is not None
            assert r.first_token_at is not None
            uplink.append((t["arrival"] - offset - r.sent_at) * 1000)
            downlink.append((r.first_token_at - (t["first_token"] - offset)) * 1000)
            server_stream.append(_server_record(t, offset))
        server_streams.append(server_stream)
    figures = level_figures(level, streams)
    ours = figures.aggregate_tps
    start, end = figures.window_start, figures.window_end
    server_tokens = sum(
        1 for s in server_streams for r in s for t in r.chunk_times if start < t <= end
    )
    theirs = server_tokens / (end - start) if end > start else 0.0
    failed = sum(1 for s in streams for r in s if not r.ok)
    return {
        "client": client,
        "streams": level,
        "requests": len(ttft_err),
        "failed": failed,
        "ttft_error_ms": {"p50": percentile(ttft_err, 50), "p99": percentile(ttft_err, 99)},
        "e2e_error_ms": {"p50": percentile(e2e_err, 50), "p99": percentile(e2e_err, 99)},
        # TTFT error = uplink (request written -> server handler starts: includes the
        # server's own accept/parse delay) + downlink (first token written -> client read).
        "uplink_ms_p50": percentile(uplink, 50),
        "downlink_ms_p50": percentile(downlink, 50),
        "client_queue_ms_p50": percentile([r.queue * 1000 for s in streams for r in s], 50),
        "aggregate_tps": {"client": ours, "server": theirs},
        "aggregate_error_percent": (ours - theirs) / theirs * 100 if theirs else None,
        # the simulator's own scheduling error during this level (actual - intended)
        "server_timing": json.loads(timing_body),
    }


async def _server_records(
    transport: Any, url: str, streams: list[list[RequestRecord]]
) -> dict[str, dict[str, Any]]:
    out = {}
    for stream in streams:
        for r in stream:
            if r.server_id:
                status, body = await transport.get(f"{url}/sim/requests/{r.server_id}", {})
                if status == 200:
                    out[r.server_id] = json.loads(body)
    return out


def _server_record(t: dict[str, Any], offset: float) -> RequestRecord:
    """The server's view of one request as a record on the client clock."""
    n = int(t["completion_tokens"])
    first, last = t["first_token"] - offset, t["last_token"] - offset
    step = (last - first) / (n - 1) if n > 1 else 0.0
    times = [first + i * step for i in range(n)]
    return RequestRecord(
        scheduled_at=t["arrival"] - offset,
        sent_at=t["arrival"] - offset,
        first_token_at=first,
        last_event_at=last,
        chunk_times=times,
        output_tokens=n,
    )


def _whitespace_tokenizer(path: Path) -> Path:
    """A HuggingFace tokenizer directory that splits on whitespace, like the simulator.

    aiperf counts tokens with a HuggingFace tokenizer; its ``builtin`` one downloads a
    tiktoken file, which this offline machine cannot. A WordLevel tokenizer over a small
    vocabulary (unknown words become ``[UNK]``) is written as plain JSON instead.
    """
    words = sorted(set(prompt_for(PROMPT, 0).split()))
    vocab = {"[UNK]": 0} | {w: i + 1 for i, w in enumerate(words)}
    unk = {"id": 0, "content": "[UNK]", "single_word": False, "lstrip": False}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{**unk, "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    path.mkdir(parents=True, exist_ok=True)
    (path / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"}
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    return path


def run_aiperf(aiperf: str, url: str, level: int, count: int) -> dict[str, Any]:
    """aiperf's TTFT p50 and output tok/s at one level, and the server's truth for the run."""
    import urllib.request

    def timing(reset: bool) -> dict[str, Any]:
        q = "?reset=1" if reset else ""
        with urllib.request.urlopen(f"{url}/sim/timing{q}", timeout=10) as resp:
            data: dict[str, Any] = json.load(resp)
        return data

    timing(reset=True)
    with tempfile.TemporaryDirectory(prefix="aiperf-") as tmp:
        cmd = [
            aiperf,
            "profile",
            "--model",
            MODEL,
            "--url",
            url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--concurrency",
            str(level),
            "--request-count",
            str(count),
            "--tokenizer",
            str(_whitespace_tokenizer(Path(tmp) / "tokenizer")),
            "--isl",
            str(PROMPT.prompt_tokens),
            "--osl",
            str(OUTPUT),
            "--extra-inputs",
            "ignore_eos:true",
            "--extra-inputs",
            f"max_tokens:{OUTPUT}",
            "--artifact-dir",
            tmp,
            "--ui-type",
            "none",
        ]
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)
        elapsed = time.monotonic() - started
        exports = list(Path(tmp).rglob("profile_export_aiperf.json"))
        if proc.returncode != 0 or not exports:
            return {"streams": level, "error": (proc.stderr or proc.stdout)[-600:]}
        data = json.loads(exports[0].read_text())
    server = timing(reset=False)["ttft_error"]
    truth = TTFT_MS + server["p50_ms"]
    ttft = data.get("time_to_first_token") or data.get("records", {}).get("time_to_first_token")
    p50 = float(ttft["p50"]) if ttft else float("nan")
    unit = str(ttft.get("unit", "ms")) if ttft else "ms"
    if unit == "ns":
        p50 /= 1e6
    tput = data.get("output_token_throughput") or {}
    return {
        "streams": level,
        "requests": count,
        "ttft_p50_ms": p50,
        "server_ttft_p50_ms": truth,
        "ttft_error_ms_p50": p50 - truth,
        "output_token_throughput": tput.get("avg"),
        "wall_seconds": round(elapsed, 1),
    }


def _loop_factory(name: str) -> Any:
    if name == "uvloop":
        import uvloop  # optional: only for this comparison

        return uvloop.new_event_loop
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="1,2,4,8,64")
    ap.add_argument("--clients", default="aiohttp,httpx")
    ap.add_argument("--requests", type=int, default=64, help="requests per level (min 2/stream)")
    ap.add_argument("--aiperf", default=shutil.which("aiperf"), help="aiperf executable")
    ap.add_argument("--pin", action="store_true", help="simulator on CPU 0, client on CPU 1")
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    if args.pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {1})
    proc, url = start_sim(0 if args.pin else None)
    results: dict[str, Any] = {
        "setup": {
            "simulator": f"flat profile: TTFT {TTFT_MS} ms, ITL {ITL_MS} ms, {OUTPUT} tokens",
            "prompt_tokens": PROMPT.prompt_tokens,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()}",
            "pinned": args.pin,
        },
        "clients": [],
        "aiperf": None,
    }
    try:
        for client in args.clients.split(","):
            for level in levels:
                per_stream = max(3, args.requests // level)
                with asyncio.Runner(loop_factory=_loop_factory(args.loop)) as runner:
                    row = runner.run(measure(url, client, level, per_stream))
                row["loop"] = args.loop
                results["clients"].append(row)
                print(
                    f"{client:8s} {level:3d} streams: TTFT error p50 "
                    f"{row['ttft_error_ms']['p50']:6.2f} ms p99 {row['ttft_error_ms']['p99']:6.2f}"
                    f" ms; aggregate {row['aggregate_tps']['client']:8.1f} vs server "
                    f"{row['aggregate_tps']['server']:8.1f} tok/s "
                    f"({row['aggregate_error_percent']:+.2f}%); failed {row['failed']}; "
                    f"uplink {row['uplink_ms_p50']:.2f} downlink {row['downlink_ms_p50']:.2f} ms; "
                    f"server gap error p50 {row['server_timing']['gap_error']['p50_ms']:.2f} "
                    f"p99 {row['server_timing']['gap_error']['p99_ms']:.2f} ms",
                    flush=True,
                )
        if args.aiperf:
            rows = []
            for level in levels:
                row = run_aiperf(args.aiperf, url, level, max(2 * level, args.requests))
                rows.append(row)
                print(f"aiperf   {level:3d} streams: {row}", flush=True)
            results["aiperf"] = rows
        else:
            results["aiperf"] = (
                "skipped: aiperf not found (pip install '.[benchmarks]', or --aiperf PATH)"
            )
            print(results["aiperf"])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
