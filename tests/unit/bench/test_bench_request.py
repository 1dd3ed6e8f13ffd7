"""One request against scripted responses (httpx MockTransport: no sockets).

Each way a stream can go wrong ends in exactly one error class; a good stream yields
timings and usage.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from vllm_operator.bench.http.request import ChatRequest, RequestRecord, send
from vllm_operator.bench.http.transport import HttpxTransport, Limits

URL = "http://server.test/v1/chat/completions"
SSE = {"content-type": "text/event-stream"}


def chunk(
    content: str | None = None, *, finish: str | None = None, usage: dict[str, int] | None = None
) -> bytes:
    obj: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    if usage is not None:
        obj["choices"] = []
        obj["usage"] = usage
    else:
        delta = {"content": content} if content is not None else {"role": "assistant"}
        obj["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return f"data: {json.dumps(obj)}\n\n".encode()


def good(n: int = 3, usage: int | None = None, *, done: bool = True) -> list[bytes]:
    parts = [chunk(f" t{i}") for i in range(n)]
    parts.append(
        chunk(usage={"prompt_tokens": 7, "completion_tokens": n if usage is None else usage})
    )
    if done:
        parts.append(b"data: [DONE]\n\n")
    return parts


class Body(httpx.AsyncByteStream):
    def __init__(self, parts: list[bytes], error: Exception | None = None) -> None:
        self.parts, self.error = parts, error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part
        if self.error is not None:
            raise self.error


Handler = Callable[[httpx.Request], httpx.Response]


async def run(handler: Handler, request: ChatRequest | None = None) -> RequestRecord:
    ticks = iter(float(i) for i in range(10_000))
    transport = HttpxTransport(
        Limits(), clock=lambda: next(ticks), transport=httpx.MockTransport(handler)
    )
    try:
        return await send(
            transport,
            request or ChatRequest(prompt="hi", max_tokens=3),
            url=URL,
            model="m",
            headers={"authorization": "Bearer k"},
            clock=lambda: next(ticks),
        )
    finally:
        await transport.aclose()


def stream(
    parts: list[bytes],
    status: int = 200,
    headers: dict[str, str] | None = None,
    error: Exception | None = None,
) -> Handler:
    return lambda _req: httpx.Response(status, headers=headers or SSE, stream=Body(parts, error))


async def test_good_stream_measures_ttft_e2e_and_usage() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, headers={**SSE, "x-sim-request-id": "r1"}, stream=Body(good()))

    record = await run(handler)
    assert record.ok, record.detail
    assert (record.output_tokens, record.prompt_tokens, record.server_id) == (3, 7, "r1")
    assert record.ttft > 0
    assert record.e2e > record.ttft
    assert record.decode_tps is not None
    assert record.e2e_tps == pytest.approx(3 / record.e2e)
    body = json.loads(seen[0].content)
    assert body["stream"] is True
    assert body["ignore_eos"] is True
    assert body["temperature"] == 0
    assert body["stream_options"] == {"include_usage": True}
    assert seen[0].headers["authorization"] == "Bearer k"


async def test_text_is_kept_for_quality() -> None:
    record = await run(stream(good()), ChatRequest(prompt="q", max_tokens=10, ignore_eos=False))
    assert record.ok
    assert record.text == " t0 t1 t2"


@pytest.mark.parametrize(
    ("handler", "error", "words"),
    [
        (
            stream([b'{"error": "boom"}'], 500, {"content-type": "application/json"}),
            "http_5xx",
            "HTTP 500",
        ),
        (stream([b"unauthorized"], 401, {"content-type": "text/plain"}), "http_4xx", "HTTP 401"),
        (
            stream([b'{"choices": []}'], 200, {"content-type": "application/json"}),
            "malformed_sse",
            "content-type",
        ),
        (stream([chunk(" a"), b"data: {not json\n\n"]), "malformed_sse", "not JSON"),
        (stream([b'data: ["a list"]\n\n']), "malformed_sse", "not a JSON object"),
        (stream([b'data: {"id": 1}\n\n']), "malformed_sse", "choices"),
        (stream(good(done=False)), "no_done", "without [DONE]"),
        (stream([chunk(" a"), b'data: {"choi']), "no_done", "trailing"),
        (
            stream([chunk(" a")], error=httpx.RemoteProtocolError("peer closed")),
            "no_done",
            "dropped",
        ),
        (stream([chunk(" a")], error=httpx.ReadTimeout("slow")), "stall", "stall"),
        (stream([*good()[:-2], b"data: [DONE]\n\n"]), "usage_missing", "no usage"),
        (stream(good(usage=4)), "usage_mismatch", "exactly 3"),
        (stream(good(n=3, usage=2)), "usage_mismatch", "3 content chunks"),
        (
            stream([chunk(usage={"completion_tokens": 0}), b"data: [DONE]\n\n"]),
            "no_done",
            "without any content",
        ),
        (
            stream([b'data: {"object": "error", "message": "engine dead", "code": 500}\n\n']),
            "http_5xx",
            "engine dead",
        ),
        (
            stream([b'data: {"error": {"message": "too long", "code": 400}}\n\n']),
            "http_4xx",
            "too long",
        ),
        (stream([b"data: \xff\n\n"]), "malformed_sse", ""),
    ],
)
async def test_each_failure_has_one_class(handler: Handler, error: str, words: str) -> None:
    record = await run(handler)
    assert record.error == error, record.detail
    assert words in record.detail


async def test_connect_error() -> None:
    def refuse(req: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=req)

    record = await run(refuse)
    assert record.error == "connect_error"
    assert "refused" in record.detail


async def test_unexpected_exception_is_a_client_error_not_a_crash() -> None:
    def explode(_req: httpx.Request) -> httpx.Response:
        raise RuntimeError("bug")

    record = await run(explode)
    assert (record.error, record.detail) == ("client_error", "RuntimeError: bug")


async def test_reasoning_tokens_start_ttft_but_are_not_the_answer() -> None:
    parts = [
        sse_raw({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        sse_raw({"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]}),
        sse_raw({"choices": [{"index": 0, "delta": {"content": "yes"}}]}),
        sse_raw({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}),
        b"data: [DONE]\n\n",
    ]
    record = await run(stream(parts), ChatRequest(prompt="q", max_tokens=8, ignore_eos=False))
    assert record.ok, record.detail
    assert (record.text, len(record.chunk_times), record.output_tokens) == ("yes", 2, 2)
    assert record.first_token_at == record.chunk_times[0]


def sse_raw(obj: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()
