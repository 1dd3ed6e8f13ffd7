"""vLLM's OpenAI-compatible wire format: stream chunks, full responses, error bodies.

Why hand-built bytes: the stream is the hot path (thousands of chunks per second on one
core), so each chunk is a pre-rendered prefix + the JSON-escaped delta + a suffix. The
shapes follow vLLM (vllm-facts, "OpenAI streaming format"): the chat role is sent when the
first token is, as its own ``{"role": "assistant", "content": ""}`` delta in the same write
as the first token; the last token's chunk carries ``finish_reason``; with
``stream_options.include_usage`` a final chunk has ``choices: []`` and ``usage``; then
``data: [DONE]``.
"""

from __future__ import annotations

import json
from typing import Any

DONE = b"data: [DONE]\n\n"

_ERROR_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    404: "NotFoundError",
    429: "RateLimitError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


def error_body(status: int, message: str, *, param: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body as vLLM returns it."""
    return {
        "error": {
            "message": message,
            "type": _ERROR_TYPES.get(status, "APIError"),
            "param": param,
            "code": status,
        }
    }


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }


class StreamFormat:
    """Renders the SSE chunks of one streamed response."""

    def __init__(self, *, request_id: str, model: str, created: int, chat: bool) -> None:
        self.chat = chat
        obj = "chat.completion.chunk" if chat else "text_completion"
        head = json.dumps({"id": request_id, "object": obj, "created": created, "model": model})
        self._head = head[:-1]  # without the closing brace
        if chat:
            self._pre = f'data: {self._head}, "choices": [{{"index": 0, "delta": {{"content": '
            self._post = '}, "logprobs": null, "finish_reason": null}]}\n\n'
            role = (
                f'data: {self._head}, "choices": [{{"index": 0, "delta": {{"role": "assistant", '
                '"content": ""}, "logprobs": null, "finish_reason": null}]}\n\n'
            )
            self._role = role.encode()
        else:
            self._pre = f'data: {self._head}, "choices": [{{"index": 0, "text": '
            self._post = ', "logprobs": null, "finish_reason": null, "stop_reason": null}]}\n\n'
            self._role = b""

    def token(self, delta: str, *, first: bool = False) -> bytes:
        """The chunk of one token (preceded by the role chunk for the first chat token)."""
        chunk = (self._pre + json.dumps(delta) + self._post).encode()
        return self._role + chunk if first else chunk

    def last(
        self, delta: str | None, finish_reason: str, stop_reason: str | None, *, first: bool
    ) -> bytes:
        """The final token's chunk (``delta=None``: no token left, only the finish reason)."""
        text = json.dumps(delta or "")
        stop = json.dumps(stop_reason)
        if self.chat:
            body = (
                f'{self._head}, "choices": [{{"index": 0, "delta": {{"content": {text}}}, '
                f'"logprobs": null, "finish_reason": "{finish_reason}", "stop_reason": {stop}}}]}}'
            )
        else:
            body = (
                f'{self._head}, "choices": [{{"index": 0, "text": {text}, "logprobs": null, '
                f'"finish_reason": "{finish_reason}", "stop_reason": {stop}}}]}}'
            )
        chunk = f"data: {body}\n\n".encode()
        return self._role + chunk if first else chunk

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        u = json.dumps(usage(prompt_tokens, completion_tokens))
        return f'data: {self._head}, "choices": [], "usage": {u}}}\n\n'.encode()

    def malformed(self) -> bytes:
        """A chunk whose JSON is cut off (fault injection)."""
        return f'data: {self._head}, "choices": [{{"index": 0, "te\n\n'.encode()


def full_response(
    *,
    request_id: str,
    model: str,
    created: int,
    chat: bool,
    text: str,
    finish_reason: str,
    stop_reason: str | None,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    """The non-streaming response body."""
    choice: dict[str, Any]
    if chat:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "tool_calls": []},
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": stop_reason,
        }
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": stop_reason,
            "prompt_logprobs": None,
        }
    return {
        "id": request_id,
        "object": "chat.completion" if chat else "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage(prompt_tokens, completion_tokens),
    }
