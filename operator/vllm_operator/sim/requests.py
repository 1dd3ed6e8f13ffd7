"""Validation of completion requests: from a JSON body to what the simulator must do.

Why separate: the checks (model name, prompt, limits, stop strings) are pure and mirror
vLLM's 400/404 answers; the server only translates :class:`RequestError` into an
OpenAI-style error response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm_operator.errors import VLLMOperatorError
from vllm_operator.sim import tokens


class RequestError(VLLMOperatorError):
    """A request vLLM would refuse: HTTP ``status`` with an OpenAI-style message."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


def _check_content(content: Any, param: str) -> None:
    """vLLM's chat message content: a string, a list of content parts, or null."""
    if content is None or isinstance(content, str):
        return
    if isinstance(content, list) and all(
        isinstance(part, dict)
        and isinstance(part.get("type", "text"), str)
        and (part.get("type", "text") != "text" or isinstance(part.get("text"), str))
        for part in content
    ):
        return
    raise RequestError(400, f"{param}: a string or a list of content parts is required", param)


@dataclass(frozen=True)
class CompletionRequest:
    """The parts of a completions/chat request the simulator acts on."""

    chat: bool
    model: str
    prompt: str
    prompt_tokens: int
    max_tokens: int | None
    stream: bool
    include_usage: bool
    stop: tuple[str, ...]
    ignore_eos: bool


def parse(
    body: Any, *, chat: bool, model_names: tuple[str, ...], max_model_len: int
) -> CompletionRequest:
    """Check ``body`` like vLLM does; raise :class:`RequestError` when it would refuse it."""
    if not isinstance(body, dict):
        raise RequestError(400, "request body must be a JSON object")
    model = body.get("model")
    if model is None:
        model = model_names[0]
    if model not in model_names:
        raise RequestError(404, f"The model `{model}` does not exist.", "model")
    prompt, prompt_tokens = _chat_prompt(body) if chat else _completion_prompt(body)
    if body.get("n", 1) != 1:
        raise RequestError(400, "n: the simulator generates one choice per request", "n")
    max_tokens = _max_tokens(body)
    total = prompt_tokens + (max_tokens or 0)
    if total > max_model_len:
        raise RequestError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {total} tokens ({prompt_tokens} in the messages, {max_tokens or 0} in "
            "the completion). Please reduce the length of the messages or completion.",
        )
    stop = _stop(body)
    options = body.get("stream_options") or {}
    stream = bool(body.get("stream", False))
    if options and not stream:
        raise RequestError(400, "Stream options can only be defined when `stream=True`.")
    temperature = body.get("temperature", 1.0)
    if temperature is not None and (not isinstance(temperature, int | float) or temperature < 0):
        raise RequestError(400, "temperature must be a non-negative number", "temperature")
    return CompletionRequest(
        chat=chat,
        model=str(model),
        prompt=prompt,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
        stop=stop,
        ignore_eos=bool(body.get("ignore_eos", False)),
    )


def _chat_prompt(body: dict[str, Any]) -> tuple[str, int]:
    """The rendered chat prompt and its token count; the messages checked like vLLM's."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "messages: a non-empty list is required", "messages")
    if not all(isinstance(m, dict) for m in messages):
        raise RequestError(400, "messages: each message must be an object", "messages")
    for i, message in enumerate(messages):
        _check_content(message.get("content"), f"messages.{i}.content")
    prompt = tokens.chat_prompt(messages)
    return prompt, tokens.count(prompt)


def _completion_prompt(body: dict[str, Any]) -> tuple[str, int]:
    """A completion's prompt (one string or one list of token ids) and its token count."""
    raw = body.get("prompt")
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str | list):
        raw = raw[0]
    if isinstance(raw, str):
        return raw, tokens.count(raw)
    if isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
        return " ".join(str(t) for t in raw), len(raw)
    raise RequestError(400, "prompt: one string or one list of token ids is required", "prompt")


def _max_tokens(body: dict[str, Any]) -> int | None:
    """``max_completion_tokens`` (or the older ``max_tokens``): None or a whole number >= 1."""
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise RequestError(400, "max_tokens must be at least 1", "max_tokens")
    return max_tokens


def _stop(body: dict[str, Any]) -> tuple[str, ...]:
    """The stop strings: one string or a list of them."""
    stop_raw = body.get("stop") or ()
    if isinstance(stop_raw, str):
        stop_raw = (stop_raw,)
    if not isinstance(stop_raw, list | tuple) or not all(isinstance(s, str) for s in stop_raw):
        raise RequestError(400, "stop must be a string or a list of strings", "stop")
    return tuple(stop_raw)
