"""A hostile server gets a named error from bench, within bounded memory and the deadline.

Each case is one of issue 10's findings, served over loopback by ``hostile_servers``. Peak
memory per case is measured by ``benchmarks/bench_hostile.py`` (bench as a process of its
own); here each case must end in the right error class, with a report, never a traceback.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from hostile_servers import MODEL, start

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary
from vllm_operator.bench import run_benchmark
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.prompts import DEFAULT_CLASSES
from vllm_operator.bench.report import BenchReport

HERE = Path(__file__).parent


def _config(url: str, client: str = "aiohttp", **extra: object) -> BenchConfig:
    settings: dict[str, object] = {
        "model": MODEL,
        "prompt_classes": DEFAULT_CLASSES[1:2],  # medium: 105 output tokens
        "iterations": 2,
        "warmup": 0,
        "concurrency": (),
        "deadline_seconds": 20.0,
        "request_timeout": 10.0,
        "client": client,
        **extra,
    }
    return BenchConfig(url=url, **settings)  # type: ignore[arg-type]


async def _bench(case: str, client: str = "aiohttp", **extra: object) -> BenchReport:
    runner, url = await start(case)
    try:
        return await run_benchmark(_config(url, client, **extra))
    finally:
        await runner.cleanup()


def _errors(report: BenchReport) -> dict[str, int]:
    return dict(report.summary.errors)


def _details(report: BenchReport) -> str:
    return " | ".join(r.detail for r in report.state.records() if r.error)


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
@pytest.mark.parametrize("case", ["gzip-bomb-models", "huge-models"])
async def test_oversized_models_body_is_refused_at_the_limit(case: str, client: str) -> None:
    report = await _bench(case, client)
    assert _errors(report) == {"oversized": 1}
    assert report.state.aborted is not None
    assert "body larger than 4194304 bytes" in report.state.aborted
    assert report.exit_code == 3


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
async def test_gzip_bomb_in_a_stream_is_a_malformed_stream(client: str) -> None:
    report = await _bench("gzip-bomb-stream", client)
    assert _errors(report) == {"malformed_sse": 2}
    assert "event larger than 4194304 bytes" in _details(report)


async def test_endless_valid_stream_fails_at_max_tokens() -> None:
    report = await _bench("endless-stream")
    assert _errors(report) == {"usage_mismatch": 2}
    assert f"more than max_tokens={DEFAULT_CLASSES[1].output_tokens}" in _details(report)


async def test_endless_stream_without_content_ends_at_the_deadline() -> None:
    report = await _bench("endless-keepalive", deadline_seconds=2.0)
    assert report.state.deadline_hit
    assert _errors(report) == {"deadline": 1, "timeout": 1}
    assert report.state.finished is not None
    assert report.state.finished - report.state.started < 4.0  # held, not overrun
    assert report.summary.reasons[0] == "deadline of 2 s reached"


async def test_deep_json_is_unreadable_not_a_recursion_error() -> None:
    models = await _bench("deep-json-models")
    assert models.state.server_version is None  # deep /version: unknown, not a crash
    assert models.state.aborted is None  # unreadable /v1/models is not fatal
    stream = await _bench("deep-json-stream")
    assert _errors(stream) == {"malformed_sse": 2}
    assert "nested deeper than 32 levels" in _details(stream)


async def test_lying_usage_is_failed_by_name() -> None:
    thresholds = Thresholds.model_validate({"maxRegressionPercent": 10})
    report = await _bench("lying-usage", thresholds=thresholds)
    assert _errors(report) == {"usage_mismatch": 2}
    short = DEFAULT_CLASSES[1].output_tokens
    assert f"usage says {short} tokens but only 1 content chunks were streamed" in _details(report)
    assert report.summary.verdict == "Failed"
    assert report.exit_code == 1


@pytest.fixture
async def other_host() -> AsyncIterator[tuple[str, list[str]]]:
    """An honest-looking server elsewhere that records every request it gets."""
    hits: list[str] = []

    async def any_request(request: web.Request) -> web.Response:
        hits.append(f"{request.method} {request.path}")
        return web.json_response({"data": [{"id": MODEL}]})

    application = web.Application()
    application.router.add_route("*", "/{tail:.*}", any_request)
    runner = web.AppRunner(application)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.2" if sys.platform == "linux" else "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    yield f"http://{host}:{port}", hits
    await runner.cleanup()


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
@pytest.mark.parametrize("case", ["redirect", "redirect-chat"])
async def test_redirects_are_never_followed(
    case: str, client: str, other_host: tuple[str, list[str]]
) -> None:
    target, hits = other_host
    runner, url = await start(case, redirect_target=f"{target}/v1/models")
    try:
        report = await run_benchmark(_config(url, client))
    finally:
        await runner.cleanup()
    assert hits == []
    expected = 1 if case == "redirect" else 2
    assert _errors(report) == {"redirect": expected}
    assert "HTTP 307" in _details(report)
    assert report.summary.verdict is None  # ungated here; the class is a measurement fault
    assert report.exit_code == 3


def test_sigterm_mid_run_still_writes_an_error_summary(tmp_path: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, str(HERE / "hostile_servers.py"), "endless-keepalive"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        summary_path = tmp_path / "termination-log"
        bench = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vllm_operator.commands",
                "bench",
                "--url",
                url,
                "--model",
                MODEL,
                "--suite",
                "builtin:none",
                "--concurrency",
                "none",
                "--output",
                "jsonl",
                "--summary-path",
                str(summary_path),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert bench.stdout is not None
        for line in bench.stdout:
            if '"event": "preflight"' in line:
                break
        bench.send_signal(signal.SIGTERM)
        _, err = bench.communicate(timeout=30)
    finally:
        server.kill()
        server.wait()
    assert bench.returncode == 3, err[-2000:]
    summary = BenchSummary.model_validate_json(summary_path.read_text())
    assert summary.verdict == "Error"
    assert summary.reasons == ["terminated (SIGTERM) before the run finished"]


def test_event_loop_is_not_starved_by_a_server_that_never_pauses() -> None:
    """A fast endless stream used to keep bench's loop busy past its deadline."""

    async def main() -> BenchReport:
        return await _bench("endless-keepalive", deadline_seconds=1.0)

    report = asyncio.run(main())
    assert report.state.deadline_hit
