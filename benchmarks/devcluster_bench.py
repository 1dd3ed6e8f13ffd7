"""How fast is the embedded Kubernetes API? Prints figures, saves devcluster_bench.json.

200 custom objects (the test Widget CRD) are created concurrently over HTTP by an aiohttp
client (one connection per request in flight, no pool limit) while one watch stream, opened
at the list's resourceVersion as kopf does, receives the events. Figures:
- create latency: request start -> 201 response, p50/p99;
- watch delivery latency: request start -> ADDED event received on the watch, p50/p99
  (it includes the create itself; the event can arrive before the 201 response);
- event after response: ADDED received minus 201 received (negative = event first);
- throughput of the burst and the process RSS afterwards;
- the same latencies with 50 objects created one at a time (no queueing: what a single
  operator reaction sees).
The API server runs in its own thread in this process (as in tests and the demo), so the
client and server share the GIL and 2 cores: figures are upper bounds of what the server
alone would take (profiled, the server thread spends most of the burst idle in epoll, about
1 ms of CPU per create; the in-process client and one connection per request dominate).

Run: ``.venv/bin/python benchmarks/devcluster_bench.py [--objects 200] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import aiohttp

from devcluster import DevCluster

GROUP, VERSION, PLURAL = "bench.devcluster.io", "v1", "widgets"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget"},
        "versions": [
            {"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}}}
        ],
    },
}
RESULTS = Path(__file__).parent / "results" / "devcluster_bench.json"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(pct(values, 50) * 1000, 2),
        "p99_ms": round(pct(values, 99) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2),
        "mean_ms": round(statistics.fmean(values) * 1000, 2),
    }


async def one_round(
    url: str, count: int, prefix: str, *, sequential: bool = False
) -> dict[str, Any]:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}"
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(url, connector=connector) as session:
        async with session.get(path) as listed:
            rv = (await listed.json())["metadata"]["resourceVersion"]
        started: dict[str, float] = {}
        answered: dict[str, float] = {}
        seen: dict[str, float] = {}
        all_seen = asyncio.Event()

        async def watch() -> None:
            params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "60"}
            async with session.get(path, params=params) as stream:
                async for line in stream.content:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    name = event["object"]["metadata"]["name"]
                    if event["type"] == "ADDED" and name.startswith(prefix):
                        seen[name] = time.perf_counter()
                        if len(seen) == count:
                            all_seen.set()
                            return

        async def create(name: str) -> None:
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Widget",
                "metadata": {"name": name},
                "spec": {"size": 1},
            }
            started[name] = time.perf_counter()
            async with session.post(path, json=body) as response:
                await response.read()
                assert response.status == 201, response.status
            answered[name] = time.perf_counter()

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.2)  # the watch is connected before the burst
        burst_start = time.perf_counter()
        if sequential:
            for i in range(count):
                await create(f"{prefix}{i:04d}")
        else:
            await asyncio.gather(*(create(f"{prefix}{i:04d}") for i in range(count)))
        await asyncio.wait_for(all_seen.wait(), 30)
        burst_end = time.perf_counter()
        watcher.cancel()
    names = sorted(started)
    return {
        "create": [answered[n] - started[n] for n in names],
        "delivery": [seen[n] - started[n] for n in names],
        "after_response": [seen[n] - answered[n] for n in names],
        "burst_seconds": burst_end - burst_start,
    }


async def run(url: str, count: int, rounds: int) -> dict[str, Any]:
    await one_round(url, 20, "warmup-")
    creates: list[float] = []
    deliveries: list[float] = []
    after: list[float] = []
    bursts: list[float] = []
    for r in range(rounds):
        result = await one_round(url, count, f"r{r}-")
        creates += result["create"]
        deliveries += result["delivery"]
        after += result["after_response"]
        bursts.append(result["burst_seconds"])
    alone = await one_round(url, 50, "seq-", sequential=True)
    return {
        "one_at_a_time": {
            "objects": 50,
            "create_latency": summary_ms(alone["create"]),
            "watch_delivery_latency": summary_ms(alone["delivery"]),
        },
        "objects_per_round": count,
        "rounds": rounds,
        "create_latency": summary_ms(creates),
        "watch_delivery_latency": summary_ms(deliveries),
        "event_after_response": {
            "p50_ms": round(pct(after, 50) * 1000, 2),
            "p99_ms": round(pct(after, 99) * 1000, 2),
        },
        "burst_seconds_median": round(statistics.median(bursts), 3),
        "creates_per_second": round(count / statistics.median(bursts), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with DevCluster(crds=[CRD]) as cluster:
        figures = asyncio.run(run(cluster.url, args.objects, args.rounds))
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    figures["note"] = (
        "client and server in one process on a shared 2-core machine; delivery latency is "
        "measured from the create request start to the ADDED event on one watch stream"
    )
    print(json.dumps(figures, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
