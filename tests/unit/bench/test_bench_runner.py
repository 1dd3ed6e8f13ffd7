"""A whole run against a scripted server (httpx MockTransport, no sockets): phases, report, view.

The scripted server answers every chat request with a stream of exactly ``max_tokens``
words and the right usage, and the quality prompts with canned answers; the clock is a
counter, so every timing is exact and the figures can be asserted precisely.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.bench import BenchConfig, run_benchmark
from vllm_operator.bench.config import BenchConfig as Config
from vllm_operator.bench.http.transport import HttpxTransport, Transport
from vllm_operator.bench.human import render
from vllm_operator.bench.prompts import PromptClass
from vllm_operator.bench.quality.suite import parse_suite
from vllm_operator.bench.runner import Clock

SUITE = parse_suite(
    """
name: tiny
tests:
  - {id: yes-1, category: c, prompt: "Say yes", assert: [{type: equals, value: "yes"}]}
  - {id: no-1, category: c, prompt: "Say no", assert: [{type: equals, value: "no"}]}
""",
    "tiny.yaml",
)


def sse(obj: dict[str, Any] | str) -> bytes:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


def server(body: dict[str, Any], *, fail: bool = False) -> httpx.Response:
    if fail:
        return httpx.Response(503, json={"error": "overloaded"})
    prompt = body["messages"][-1]["content"]
    words = ["yes"] if prompt == "Say yes" else ["maybe"] if prompt == "Say no" else None
    if words is None:
        words = ["w"] * body["max_tokens"]
    chunks = [
        sse({"choices": [{"index": 0, "delta": {"content": (" " if i else "") + w}}]})
        for i, w in enumerate(words)
    ]
    chunks.append(
        sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": len(words)}})
    )
    chunks.append(sse("[DONE]"))
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=b"".join(chunks)
    )


def factory(fail_after: int | None = None) -> Callable[[Config, Clock], Transport]:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        if request.url.path == "/version":
            return httpx.Response(200, json={"version": "0.17.0"})
        calls["n"] += 1
        failing = fail_after is not None and calls["n"] > fail_after
        return server(json.loads(request.content), fail=failing)

    def make(config: Config, clock: Clock) -> Transport:
        return HttpxTransport(clock=clock, transport=httpx.MockTransport(handler))

    return make


def counter(step: float = 0.001) -> Clock:
    ticks: Iterator[float] = (i * step for i in range(10**9))
    return lambda: next(ticks)


def config(**kw: Any) -> BenchConfig:
    base: dict[str, Any] = {
        "url": "http://server.test/v1",
        "model": "m",
        "suite": SUITE,
        "suite_ref": "tiny.yaml",
        "iterations": 3,
        "prompt_classes": (PromptClass("short", 24, 2), PromptClass("medium", 64, 10)),
        "concurrency": (1, 2),
        "requests_per_stream": 2,
    }
    return BenchConfig(**{**base, **kw})


async def test_full_run_report_and_tables() -> None:
    report = await run_benchmark(
        config(thresholds=Thresholds.model_validate({"quality": {"minPassed": 2}})),
        transport_factory=factory(),
        clock=counter(),
    )
    data = report.to_json()
    assert data["schema"] == "vllm-operator.dev/bench-report/v1"
    assert data["server_version"] == "0.17.0"
    assert data["config"]["api_key"] == "none"
    short, medium = data["latency"]
    assert (short["requests"], short["ok"], medium["output_tokens"]["median"]) == (3, 3, 10)
    assert medium["tokens_estimated"] is False
    assert [row["completed"] for row in data["concurrency"]] == [2, 4]
    assert data["concurrency"][0]["scaling_efficiency"] == 1.0
    assert data["quality"]["passed"] == 1
    assert report.summary.quality is not None
    assert report.summary.quality.failed == ["no-1"]
    assert report.summary.verdict == "Failed"
    assert report.exit_code == 1
    text = render(report)
    assert "| Configuration | Short lat. | Short tok/s | Medium lat. | Medium tok/s |" in text
    assert "| Streams | m | req/s | median stream tok/s | scaling eff. | OK/failed |" in text
    assert "| yes-1 | c | ✓ pass |  |" in text
    assert "| no-1 | c | ✗ FAIL | expected 'no', got 'maybe' |" in text
    assert "## Gate: Failed (exit 1)" in text


async def test_no_gate_and_no_errors_exits_0() -> None:
    report = await run_benchmark(config(), transport_factory=factory(), clock=counter())
    assert report.summary.verdict is None
    assert report.exit_code == 0
    assert "## No gate" in render(report)


async def test_server_that_starts_failing_stops_the_run_early() -> None:
    report = await run_benchmark(
        config(thresholds=Thresholds()), transport_factory=factory(fail_after=4), clock=counter()
    )
    assert report.state.aborted is not None
    assert "3 requests in a row failed" in report.state.aborted
    assert report.summary.errors == {"http_5xx": 3}
    assert report.summary.verdict == "Failed"
    assert report.exit_code == 1
    assert report.summary.reasons[0].startswith("run stopped early: 3 requests in a row failed")
    assert report.state.candidate.quality is None  # never reached


async def test_progress_events_in_order() -> None:
    events: list[str] = []

    class Recorder:
        def emit(self, event: str, **fields: Any) -> None:
            events.append(event)

    await run_benchmark(
        config(concurrency=(1,)), progress=Recorder(), transport_factory=factory(), clock=counter()
    )
    assert events[:2] == ["start", "preflight"]
    assert events.count("request") == 2 * (1 + 3)  # warm-up + iterations per class
    assert events[-3:] == ["concurrency", "quality", "quality"]
