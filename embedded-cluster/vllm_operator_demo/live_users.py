"""Live users: a steady stream of requests through the serving Service, counted.

A canary is judged on real traffic, so the demo and the canary tests need some: a few users
in a background thread, each sending one small completion after another through the serving
Service's local proxy (``Kubelet``'s ``services.json``), each on a new connection as a fresh
client would (a kept-alive connection stays on the pod it reached, whatever the Service
selects later). Every request is recorded (when, status, whether the simulator injected the
failure), so a test can count the requests a traffic switch failed: any failure the
simulator did not inject on purpose.

Requests carry ``x-sim-live: 1``: the simulator's live-only faults apply to them, never to
the benchmark's requests. A streamed answer that ends in an error chunk after its 200 header
(vLLM's ``create_streaming_error_response``) is a failed request, whatever its status says.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

LIVE_HEADER = "x-sim-live"  # vllm_operator.sim.server.LIVE_HEADER
INJECTED = "injected fault"
STREAM_INJECTED = "simulated stream error"  # the simulator's error chunk (sim.streaming)


@dataclass(frozen=True)
class Sent:
    """One request of a live user."""

    started: float  # time.monotonic()
    ended: float
    status: int  # 0: no HTTP answer (refused, reset, timed out)
    injected: bool  # the simulator failed it on purpose (a live-only fault)
    detail: str = ""
    broken: bool = False  # a 200 stream that ended in an error chunk instead of its answer

    @property
    def ok(self) -> bool:
        return self.status == 200 and not self.broken

    @property
    def switch_failure(self) -> bool:
        """Failed, and not by a fault the simulator injected: the traffic's path broke."""
        return not self.ok and not self.injected


def services_address(kubelet_workdir: Path, namespace: str, name: str, port: int) -> str | None:
    """The local address of a Service port, as the kubelet published it."""
    try:
        table = json.loads((kubelet_workdir / "services.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    found = table.get(f"{namespace}/{name}:{port}")
    return str(found) if found else None


def stream_error(text: str) -> str | None:
    """The error chunk of a server-sent-events answer (``data: {"error": ...}``), if any."""
    for line in text.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        try:
            chunk = json.loads(line[len("data: ") :])
        except ValueError:
            continue
        if isinstance(chunk, dict) and "error" in chunk:
            return line[len("data: ") :]
    return None


class LiveUsers:
    """``users`` clients sending requests to ``address()`` until stopped."""

    def __init__(
        self,
        address: Callable[[], str | None],
        *,
        model: str,
        users: int = 4,
        max_tokens: int = 4,
        timeout: float = 30.0,
        pause: float = 0.0,
        stream: bool = False,
    ) -> None:
        self.address = address
        self.model = model
        self.users = users
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.pause = pause
        self.stream = stream  # streamed answers: a failure can come after the 200 header
        self.sent: list[Sent] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LiveUsers:
        self._thread = threading.Thread(target=self._run, name="live-users", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout + 5)

    def __enter__(self) -> LiveUsers:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def snapshot(self) -> list[Sent]:
        with self._lock:
            return list(self.sent)

    def switch_failures(self) -> list[Sent]:
        return [s for s in self.snapshot() if s.switch_failure]

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        await asyncio.gather(*(self._user(i) for i in range(self.users)))

    async def _user(self, index: int) -> None:
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        body = {
            "model": self.model,
            "prompt": f"live user {index}: say hello",
            "max_tokens": self.max_tokens,
            **({"stream": True} if self.stream else {}),
        }
        while not self._stop.is_set():
            where = self.address()
            if where is None:
                await asyncio.sleep(0.05)
                continue
            started = time.monotonic()
            status, injected, detail, broken = 0, False, "", False
            # A new connection per request (force_close), as many clients open them.
            connector = aiohttp.TCPConnector(force_close=True)
            try:
                async with (
                    aiohttp.ClientSession(connector=connector, timeout=timeout) as session,
                    session.post(
                        f"http://{where}/v1/completions", json=body, headers={LIVE_HEADER: "1"}
                    ) as response,
                ):
                    text = await response.text()
                    status = response.status
                    broken = status == 200 and self.stream and stream_error(text) is not None
                    failure = text if status != 200 else stream_error(text) or ""
                    injected = INJECTED in failure or STREAM_INJECTED in failure
                    detail = failure[:200]
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                detail = f"{type(exc).__name__}: {exc}"[:200]
            sent = Sent(started, time.monotonic(), status, injected, detail, broken)
            with self._lock:
                self.sent.append(sent)
            if self.pause:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.to_thread(self._stop.wait, self.pause), 1)
