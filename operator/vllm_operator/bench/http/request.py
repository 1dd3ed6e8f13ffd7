"""One streamed chat completion, timed and checked: the unit every figure is built from.

A request either ends in a complete, well-formed stream (``[DONE]`` seen, usage present and
consistent) or it is counted under exactly one error class (``gate.classes``); figures are
computed only from complete ones, and the gate sees the error counts. Timing: ``sent_at``
is when the transport handed the request to the network, ``queue`` the wait before that
(scheduling plus connection pool) so client-side delay stays apart from the server's TTFT;
TTFT ends at the first chunk with generated text (answer or reasoning), end-to-end at the
last data event before ``[DONE]``.

Every answer is bounded (the server is the measured side): a redirect is never followed
(``redirect``), a stream may carry at most ``MAX_STREAM_BYTES`` and ``MAX_TEXT_BYTES`` of
text (``oversized``), no more content chunks than ``max_tokens`` and no usage beyond
``MAX_TOKENS_PER_CHUNK`` tokens per streamed content chunk (``usage_mismatch``), and each
event is JSON of bounded size and nesting. The loop yields to the event loop after every
read, so a server that never pauses cannot starve the deadline.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vllm_operator.bench.http import bounded
from vllm_operator.bench.http.sse import MAX_EVENT_BYTES, SSEError, SSEParser
from vllm_operator.bench.http.transport import (
    ConnectFailed,
    Dropped,
    NotHTTP,
    Oversized,
    Reset,
    Stalled,
    Transport,
)

Clock = Callable[[], float]

SIM_REQUEST_ID_HEADER = "x-sim-request-id"
MAX_STREAM_BYTES = 256 << 20
"""Raw bytes of one streamed answer (an honest one is ~300 bytes per token)."""
MAX_TEXT_BYTES = 1 << 20
"""Answer text kept for the quality checks."""
MAX_TOKENS_PER_CHUNK = 8
"""Usage may exceed the streamed content chunks this many times over: speculative decoding
and ``--stream-interval`` put several tokens in one chunk, a lying usage puts hundreds."""


@dataclass(frozen=True)
class ChatRequest:
    """What to send: one user message (plus optional system), sizes and sampling.

    ``messages`` (a whole conversation, JSON-ready) or ``messages_json`` (a dataset's, already
    encoded as compact UTF-8 JSON, spliced into the body as it is: a request in flight holds
    no decoded copy of a 1 MiB prompt) replaces ``prompt`` and ``system`` in the body when
    set; ``prompt`` then only names the request in logs.
    """

    prompt: str
    max_tokens: int
    ignore_eos: bool = True
    system: str | None = None
    temperature: float = 0.0
    messages: tuple[dict[str, Any], ...] | None = None
    messages_json: bytes | None = None

    def body(self, model: str) -> bytes:
        messages: list[dict[str, Any]]
        if self.messages_json is not None:
            rest = self._sampling(model, [])
            del rest["messages"]
            # The other fields, then the encoded messages spliced in before the closing '}'.
            return json.dumps(rest).encode()[:-1] + b', "messages": ' + self.messages_json + b"}"
        if self.messages is not None:
            messages = list(self.messages)
        else:
            messages = [] if self.system is None else [{"role": "system", "content": self.system}]
            messages.append({"role": "user", "content": self.prompt})
        return json.dumps(self._sampling(model, messages)).encode()

    def _sampling(self, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The body's fields."""
        payload: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.ignore_eos:
            payload["ignore_eos"] = True
        return payload


@dataclass
class RequestRecord:
    """What one request measured (clock seconds) or why it failed."""

    scheduled_at: float
    sent_at: float | None = None
    first_token_at: float | None = None
    last_event_at: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    output_tokens: int = 0
    prompt_tokens: int | None = None
    tokens_estimated: bool = False
    text: str = ""
    finish_reason: str | None = None
    error: str | None = None
    detail: str = ""
    status: int | None = None
    server_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ttft(self) -> float:
        assert self.sent_at is not None
        assert self.first_token_at is not None
        return self.first_token_at - self.sent_at

    @property
    def e2e(self) -> float:
        assert self.sent_at is not None
        assert self.last_event_at is not None
        return self.last_event_at - self.sent_at

    @property
    def queue(self) -> float:
        return 0.0 if self.sent_at is None else max(0.0, self.sent_at - self.scheduled_at)

    @property
    def decode_tps(self) -> float | None:
        """(N - 1) / (E2E - TTFT): the rate after the first token."""
        gap = self.e2e - self.ttft
        if self.output_tokens < 2 or gap <= 0:
            return None
        return (self.output_tokens - 1) / gap

    @property
    def e2e_tps(self) -> float | None:
        """N / E2E: the study's tok/s."""
        return self.output_tokens / self.e2e if self.e2e > 0 else None

    def fail(self, error: str, detail: str) -> RequestRecord:
        if self.error is None:
            self.error, self.detail = error, detail[:300]
        return self


async def send(
    transport: Transport,
    request: ChatRequest,
    *,
    url: str,
    model: str,
    headers: Mapping[str, str],
    clock: Clock,
    keep_text: bool = False,
    record: RequestRecord | None = None,
) -> RequestRecord:
    """Send ``request``, fill ``record`` (or a new one) and return it; raises only on cancel.

    On cancellation (request timeout or global deadline) the record is marked ``timeout``
    before the ``CancelledError`` propagates, so a caller that created the record and kept
    it still counts the request.
    """
    if record is None:
        record = RequestRecord(scheduled_at=clock())
    try:
        body = request.body(model)
        await _exchange(
            transport,
            url,
            body,
            headers,
            clock,
            record,
            keep_text=keep_text,
            max_tokens=request.max_tokens,
        )
    except asyncio.CancelledError:
        record.fail("timeout", "request cancelled by its time limit or the deadline")
        raise
    except ConnectFailed as exc:
        record.fail("connect_error", str(exc) or "connection failed")
    except Stalled as exc:
        record.fail("stall", f"no bytes within the stall limit ({exc})")
    except Reset as exc:
        record.fail("reset", f"connection closed or reset before any response: {exc}")
    except NotHTTP as exc:
        record.fail("protocol", f"the reply is not HTTP: {exc}")
    except Dropped as exc:
        record.fail("no_done", f"connection dropped mid-stream: {exc}")
    except Oversized as exc:
        record.fail("oversized", str(exc))
    except (SSEError, UnicodeDecodeError) as exc:
        record.fail("malformed_sse", str(exc))
    except Exception as exc:  # classified as client_error, never hidden
        record.fail("client_error", f"{type(exc).__name__}: {exc}")
    if record.ok:
        _check_usage(record, request)
    return record


async def _exchange(  # noqa: PLR0917 - private, called once
    transport: Transport,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    clock: Clock,
    record: RequestRecord,
    *,
    keep_text: bool,
    max_tokens: int,
) -> None:
    all_headers = {"content-type": "application/json", "accept": "text/event-stream", **headers}
    request_max_tokens = max_tokens
    async with transport.post(url, body, all_headers) as resp:
        record.sent_at = resp.sent_at
        record.status = resp.status
        record.server_id = resp.headers.get(SIM_REQUEST_ID_HEADER)
        if 300 <= resp.status < 400:
            where = resp.headers.get("location", "?")[:120]
            record.fail("redirect", f"HTTP {resp.status} to {where}: redirects are not followed")
            return
        if resp.status >= 400:
            body = b""
            async for chunk in resp.chunks:
                body += chunk
                if len(body) > 2000:
                    break
            kind = "http_5xx" if resp.status >= 500 else "http_4xx"
            record.fail(kind, f"HTTP {resp.status}: {body[:240].decode('utf-8', 'replace')}")
            return
        ctype = resp.headers.get("content-type", "")
        if "text/event-stream" not in ctype:
            record.fail("malformed_sse", f"content-type {ctype!r} is not text/event-stream")
            return
        parser = SSEParser()
        state = _StreamState(keep_text)
        received = 0
        async for chunk in resp.chunks:
            at = clock()
            received += len(chunk)
            if received > MAX_STREAM_BYTES:
                record.fail("oversized", f"stream longer than {MAX_STREAM_BYTES} bytes")
                return
            for event in parser.feed(chunk, at):
                state.handle(event.data, event.at, record)
                if record.error is None:
                    state.bound(record, request_max_tokens)
                if record.error is not None or state.done:
                    return
            await asyncio.sleep(0)  # a server that never pauses must not starve the deadline
        rest = parser.close()
        if not state.done:
            tail = f" (trailing {rest[:60]!r})" if rest else ""
            record.fail("no_done", f"stream ended without [DONE]{tail}")


class _StreamState:
    """Accumulates one stream's events into its record."""

    def __init__(self, keep_text: bool) -> None:
        self.done = False
        self.usage: dict[str, Any] | None = None
        self.keep_text = keep_text
        self.parts: list[str] = []
        self.text_bytes = 0

    def bound(self, record: RequestRecord, max_tokens: int) -> None:
        """Fail the record as soon as the stream says more than it was asked for."""
        if len(record.chunk_times) > max_tokens:
            record.fail(
                "usage_mismatch",
                f"more than max_tokens={max_tokens} content chunks streamed",
            )
        elif self.text_bytes > MAX_TEXT_BYTES:
            record.fail("oversized", f"answer text longer than {MAX_TEXT_BYTES} bytes")

    def handle(self, data: str, at: float, record: RequestRecord) -> None:
        if data.strip() == "[DONE]":
            self.done = True
            record.text = "".join(self.parts)
            if self.usage is None:
                record.output_tokens = len(record.chunk_times)
                record.tokens_estimated = True
                record.fail("usage_missing", "no usage chunk before [DONE]")
            return
        try:
            obj = bounded.loads(data, max_bytes=MAX_EVENT_BYTES)
        except bounded.BoundError as exc:
            record.fail("malformed_sse", f"event is not usable JSON: {data[:80]!r} ({exc})")
            return
        if not isinstance(obj, dict):
            record.fail("malformed_sse", f"event is not a JSON object: {data[:80]!r}")
            return
        if "error" in obj or obj.get("object") == "error":
            _stream_error(obj, record)
            return
        choices = obj.get("choices")
        if not isinstance(choices, list):
            record.fail("malformed_sse", f"event without a choices list: {data[:80]!r}")
            return
        record.last_event_at = at
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
            _apply_usage(usage, record)
        for choice in choices:
            if not isinstance(choice, dict):
                record.fail("malformed_sse", "a choice is not an object")
                return
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = {}
            content = delta.get("content")
            # A reasoning model streams its thinking first (vLLM: `reasoning_content`, newer:
            # `reasoning`): those are generated tokens too, so they start TTFT and count in
            # tok/s, but only `content` is the answer a quality test judges.
            thinking = delta.get("reasoning_content") or delta.get("reasoning")
            has_content = isinstance(content, str) and bool(content)
            if has_content or (isinstance(thinking, str) and thinking):
                if record.first_token_at is None:
                    record.first_token_at = at
                record.chunk_times.append(at)
            if has_content:
                self.text_bytes += len(str(content))
                self.parts.append(str(content))
            if choice.get("finish_reason"):
                record.finish_reason = str(choice["finish_reason"])


def _apply_usage(usage: dict[str, Any], record: RequestRecord) -> None:
    completion = usage.get("completion_tokens")
    prompt = usage.get("prompt_tokens")
    if isinstance(completion, int) and not isinstance(completion, bool):
        record.output_tokens = completion
    else:
        record.fail("usage_mismatch", f"usage.completion_tokens is {completion!r}")
    if isinstance(prompt, int) and not isinstance(prompt, bool):
        record.prompt_tokens = prompt


def _stream_error(obj: dict[str, Any], record: RequestRecord) -> None:
    err = obj.get("error", obj)
    code = err.get("code") if isinstance(err, dict) else None
    message = err.get("message", err) if isinstance(err, dict) else err
    status = code if isinstance(code, int) else 500
    kind = "http_4xx" if 400 <= status < 500 else "http_5xx"
    record.fail(kind, f"error event mid-stream ({status}): {str(message)[:200]}")


def _check_usage(record: RequestRecord, request: ChatRequest) -> None:
    if record.first_token_at is None:
        if request.max_tokens > 0 and request.ignore_eos:
            record.fail("no_done", "stream finished without any content")
        return
    streamed = len(record.chunk_times)
    tokens = record.output_tokens
    if streamed > tokens:
        record.fail("usage_mismatch", f"{streamed} content chunks but usage says {tokens} tokens")
    elif tokens > streamed * MAX_TOKENS_PER_CHUNK:
        record.fail(
            "usage_mismatch",
            f"usage says {tokens} tokens but only {streamed} content chunks were streamed "
            f"(more than {MAX_TOKENS_PER_CHUNK} tokens per chunk)",
        )
    elif request.ignore_eos and tokens != request.max_tokens:
        record.fail(
            "usage_mismatch",
            f"usage says {tokens} tokens, asked for exactly {request.max_tokens} (ignore_eos)",
        )
    elif tokens > request.max_tokens:
        record.fail("usage_mismatch", f"usage says {tokens} tokens > max_tokens")
