"""Faults: every way a server can break a measurement ends in Error or Failed, with its cause.

One simulator per fault (its ``--sim-*`` knobs), all benchmarked at once in a module
fixture; each test then checks one outcome: the error class counted, the verdict, the
reason naming the cause, the exit code, and that the run ended well inside its deadline.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from bench_simproc import MODEL, start_sim

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.bench import BenchConfig, BenchReport, run_benchmark
from vllm_operator.bench.prompts import PromptClass

# Verdicts on measured times (the module fixture starts its simulators once): in the timing
# phase, alone (conftest.py).
pytestmark = pytest.mark.timing

DEADLINE = 20.0
SMALL = (PromptClass("short", 24, 2), PromptClass("medium", 64, 16))

# name: (simulator knobs, expected error class, expected outcome, expected exit code)
FAULTS: dict[str, tuple[tuple[str, ...] | None, str, str, int]] = {
    "endpoint-down": (None, "connect_error", "Error", 3),
    "all-5xx": (("--sim-error-rate", "1"), "http_5xx", "Failed", 1),
    "some-5xx": (("--sim-error-rate", "0.3", "--sim-seed", "7"), "http_5xx", "Failed", 1),
    "stall": (("--sim-stall-after-tokens", "1", "--sim-stall-seconds", "5"), "stall", "Failed", 1),
    "truncated": (("--sim-truncate-after-tokens", "1"), "no_done", "Failed", 1),
    "dropped": (("--sim-drop-after-tokens", "1"), "no_done", "Failed", 1),
    "malformed": (("--sim-malformed-after-tokens", "1"), "malformed_sse", "Failed", 1),
    "wrong-usage": (("--sim-wrong-usage",), "usage_mismatch", "Failed", 1),
}


@dataclass
class Outcome:
    report: BenchReport
    seconds: float


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _bench(url: str, **overrides: object) -> Outcome:
    settings: dict[str, object] = {
        "prompt_classes": SMALL,
        "iterations": 3,
        "warmup": 0,
        "concurrency": (2,),
        "requests_per_stream": 2,
        "thresholds": Thresholds(),
        "deadline_seconds": DEADLINE,
        "stall_seconds": 0.5,
        "request_timeout": 10,
        "connect_timeout": 2,
    }
    config = BenchConfig(url=url, model=MODEL, **{**settings, **overrides})  # type: ignore[arg-type]
    started = time.monotonic()
    report = await run_benchmark(config)
    return Outcome(report, time.monotonic() - started)


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[str, Outcome]]:
    procs: list[subprocess.Popen[str]] = []
    urls = {}
    try:
        for name, (knobs, _, _, _) in FAULTS.items():
            if knobs is None:
                urls[name] = f"http://127.0.0.1:{_closed_port()}"
                continue
            proc, urls[name] = start_sim("--sim-time-scale", "0.05", *knobs)
            procs.append(proc)
        slow, urls["deadline"] = start_sim("--sim-version", "0.16.0", "--enforce-eager")
        procs.append(slow)

        async def everything() -> dict[str, Outcome]:
            names = list(urls)
            results = await asyncio.gather(
                *(
                    _bench(urls[n], deadline_seconds=1.5) if n == "deadline" else _bench(urls[n])
                    for n in names
                )
            )
            return dict(zip(names, results, strict=True))

        yield asyncio.run(everything())
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_is_counted_and_never_passes(outcomes: dict[str, Outcome], fault: str) -> None:
    _, error_class, outcome, exit_code = FAULTS[fault]
    result = outcomes[fault]
    summary = result.report.summary
    assert summary.errors.get(error_class, 0) > 0, summary.errors
    assert summary.verdict == outcome
    assert result.report.exit_code == exit_code
    assert any(error_class in reason for reason in summary.reasons), summary.reasons
    assert result.seconds < DEADLINE / 2


def test_endpoint_down_stops_at_the_preflight(outcomes: dict[str, Outcome]) -> None:
    report = outcomes["endpoint-down"].report
    assert report.summary.errors == {"connect_error": 1}
    assert report.summary.latency == []
    assert report.summary.reasons[0].startswith("run stopped early: cannot connect")


def test_partial_errors_still_measure_the_rest(outcomes: dict[str, Outcome]) -> None:
    report = outcomes["some-5xx"].report
    assert report.state.aborted is None
    counted = report.summary.errors["http_5xx"]
    requests = sum(1 for _ in report.state.records()) - 1  # minus the preflight
    assert 0 < counted < requests
    assert all(f.requests > 0 for f in report.summary.latency)


def test_stall_is_cut_at_the_stall_limit_not_the_server_pause(
    outcomes: dict[str, Outcome],
) -> None:
    result = outcomes["stall"]
    details = result.report.to_json()["errors"]["stall"]["examples"]
    assert details
    assert "no bytes within the stall limit" in details[0]
    assert result.seconds < 5  # three stalls of 0.5 s, then the run stops


def test_deadline_ends_the_run_with_what_was_measured(outcomes: dict[str, Outcome]) -> None:
    result = outcomes["deadline"]
    report = result.report
    assert result.seconds < 1.5 + 1.0
    assert report.state.deadline_hit
    assert report.exit_code == 3
    assert report.summary.errors["deadline"] == 1
    assert report.summary.errors["timeout"] >= 1  # the request in flight
    assert report.summary.reasons[0] == "deadline of 1.5 s reached"
    assert report.summary.verdict == "Error"
