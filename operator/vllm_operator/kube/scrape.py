"""Reading vLLM's /metrics from pods, for a canary step: the only HTTP the operator makes to
pods.

Each read is bounded (a timeout, ``canary.metrics.MAX_TEXT`` bytes) and concurrent across the
step's pods; a pod that does not answer is reported as a ``ScrapeFailure`` for the planner
to say so, never raised. The address of a pod is its IP and the container's port, unless a
``PodAddress`` seam says otherwise (the embedded development cluster runs every pod on
127.0.0.1 with a port of its own: ``devcluster.pod_address``). Reaching pods needs a
NetworkPolicy that lets the operator's pods in on the vLLM port (docs/rollout.md, "Canary").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import aiohttp

from vllm_operator.rollout.canary.metrics import MAX_TEXT, ScrapeFailure
from vllm_operator.rollout.views import PodView

PodAddress = Callable[[str, str, str, int], Awaitable[tuple[str, int] | None]]
"""(namespace, pod name, pod IP, container port) -> (host, port) to connect to, or None."""
TIMEOUT_SECONDS = 5.0


async def _direct(namespace: str, name: str, ip: str, port: int) -> tuple[str, int] | None:
    return ip, port


class MetricsReader:
    """Reads the /metrics page of pods; one aiohttp session per call."""

    def __init__(self, address: PodAddress | None = None, timeout: float = TIMEOUT_SECONDS):
        self.address = address or _direct
        self.timeout = timeout

    async def read(
        self, namespace: str, pods: Sequence[PodView], port: int
    ) -> dict[str, str | ScrapeFailure]:
        """Pod name -> its page's text, or why it could not be read."""
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            pages = await asyncio.gather(
                *(self._one(session, namespace, pod, port) for pod in pods)
            )
        return {pod.name: page for pod, page in zip(pods, pages, strict=True)}

    async def _one(
        self, session: aiohttp.ClientSession, namespace: str, pod: PodView, port: int
    ) -> str | ScrapeFailure:
        if pod.ip is None:
            return ScrapeFailure("no pod IP yet")
        where = await self.address(namespace, pod.name, pod.ip, port)
        if where is None:
            return ScrapeFailure("no address for the pod")
        host, local = where
        url = f"http://{host}:{local}/metrics"
        try:
            async with session.get(url) as response:
                if response.status != 200:
                    return ScrapeFailure(f"GET {url}: HTTP {response.status}")
                body = await read_bounded(response.content, MAX_TEXT)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return ScrapeFailure(f"GET {url}: {type(exc).__name__}: {exc}"[:300])
        if body is None:
            return ScrapeFailure(f"GET {url}: over {MAX_TEXT} bytes")
        return body.decode("utf-8", "replace")


async def read_bounded(content: aiohttp.StreamReader, limit: int) -> bytes | None:
    """The whole body, or None once it passes ``limit`` bytes (``StreamReader.read(n)``
    returns what has arrived so far, which can be a part of the page)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
