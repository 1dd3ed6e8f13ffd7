"""kube.scrape: a pod's /metrics page read over loopback, whole, bounded, never raised.

The page is sent in pieces with pauses between them, as a busy server's may arrive: the
reader must return all of it (``StreamReader.read(n)`` alone returns what has arrived so
far, and half a page parses as a page with missing buckets).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from vllm_operator.kube.scrape import MetricsReader
from vllm_operator.rollout.canary.metrics import MAX_TEXT, ScrapeFailure, parse_metrics
from vllm_operator.rollout.views import PodView
from vllm_operator.sim.metrics import SimMetrics


def _page() -> bytes:
    sim = SimMetrics("m", running=lambda: 0.0, waiting=lambda: 0.0, kv_usage=lambda: 0.0)
    for i in range(50):
        sim.ttft.observe(0.01 * (1 + i % 7))
        sim.e2e.observe(1.0)
        sim.success("stop")
    return sim.exposition()


class Pod:
    def __init__(self) -> None:
        self.body = _page()
        self.status = 200

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=self.status)
        await response.prepare(request)
        step = max(1, len(self.body) // 4)
        for at in range(0, len(self.body), step):
            await response.write(self.body[at : at + step])
            await asyncio.sleep(0.05)  # the next piece arrives later
        await response.write_eof()
        return response


@pytest.fixture
async def pod() -> AsyncIterator[tuple[Pod, MetricsReader]]:
    served = Pod()
    app = web.Application()
    app.router.add_get("/metrics", served.metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def here(namespace: str, name: str, ip: str, p: int) -> tuple[str, int]:
        return "127.0.0.1", port

    try:
        yield served, MetricsReader(here, timeout=5)
    finally:
        await runner.cleanup()


POD = PodView(name="qwen--c-0", labels={}, ip="10.0.0.1")


async def test_a_page_sent_in_pieces_is_read_whole(pod: tuple[Pod, MetricsReader]) -> None:
    served, reader = pod
    got = await reader.read("ml", [POD], 8000)
    assert got[POD.name] == served.body.decode()
    assert parse_metrics(str(got[POD.name])).finished == 50


async def test_a_page_over_the_limit_is_a_failure(pod: tuple[Pod, MetricsReader]) -> None:
    served, reader = pod
    served.body = b"#" * (MAX_TEXT + 1)
    got = await reader.read("ml", [POD], 8000)
    assert isinstance(got[POD.name], ScrapeFailure)
    assert f"over {MAX_TEXT} bytes" in got[POD.name].reason


async def test_a_page_at_the_limit_is_read(pod: tuple[Pod, MetricsReader]) -> None:
    served, reader = pod
    served.body = b"#" * MAX_TEXT
    got = await reader.read("ml", [POD], 8000)
    assert got[POD.name] == served.body.decode()


async def test_an_error_status_is_a_failure(pod: tuple[Pod, MetricsReader]) -> None:
    served, reader = pod
    served.status = 503
    got = await reader.read("ml", [POD], 8000)
    assert isinstance(got[POD.name], ScrapeFailure)
    assert "HTTP 503" in got[POD.name].reason
