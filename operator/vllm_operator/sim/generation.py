"""What the simulator answers: the token deltas and the finish reason of one request.

Why separate from timing: the answer is a pure function of the request (prompt, limits,
stop strings) and the answer book, so it is unit-tested without a server, and the same
plan drives streaming and non-streaming responses. Order of rules, as in vLLM: the model
text (recorded answer or filler) is padded when ``ignore_eos`` asks for exactly
``max_tokens``, cut at ``max_tokens`` (finish ``length``), then cut before the first stop
string (finish ``stop``, ``stop_reason`` = the string).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vllm_operator.sim import tokens
from vllm_operator.sim.answers import AnswerBook

# Output length when the client gives no max_tokens and no recorded answer applies:
# vLLM's /v1/completions default is 16; for chat vLLM would run to the context limit,
# the simulator stops after this many tokens as if the model had emitted EOS.
DEFAULT_COMPLETION_TOKENS = 16
DEFAULT_CHAT_TOKENS = 64


@dataclass(frozen=True)
class Plan:
    """The deltas to stream and how the generation ends."""

    deltas: tuple[str, ...]
    finish_reason: str
    stop_reason: str | None = None
    answer_id: str | None = None

    @property
    def text(self) -> str:
        return tokens.join(self.deltas)


def plan(
    prompt: str,
    *,
    max_tokens: int | None,
    book: AnswerBook,
    degraded: bool = False,
    stop: Sequence[str] = (),
    ignore_eos: bool = False,
    chat: bool = False,
) -> Plan:
    """The answer to ``prompt`` under the rules in the module docstring."""
    seed = tokens.seed_of(prompt)
    answer = book.find(prompt)
    if answer is not None:
        deltas = tokens.pieces(answer.reply(degraded=degraded))
        natural_end = True
    else:
        default = DEFAULT_CHAT_TOKENS if chat else DEFAULT_COMPLETION_TOKENS
        n = max_tokens if max_tokens is not None else default
        deltas = tokens.filler(n, seed)
        natural_end = max_tokens is None
    if ignore_eos and max_tokens is not None and len(deltas) < max_tokens:
        pad = tokens.filler(max_tokens - len(deltas) + 1, seed ^ 0x5EED)[1:]
        if not deltas:
            pad = tokens.filler(max_tokens, seed ^ 0x5EED)
        deltas = deltas + pad
        natural_end = False
    finish = "stop" if natural_end else "length"
    if max_tokens is not None and len(deltas) >= max_tokens:
        finish = "length"  # the EOS after the answer would be token max_tokens + 1
        deltas = deltas[:max_tokens]
    text = tokens.join(deltas)
    stop_at, stop_hit = _first_stop(text, stop)
    if stop_hit is not None:
        deltas = tokens.pieces(text[:stop_at])
        return Plan(tuple(deltas), "stop", stop_hit, answer.id if answer else None)
    return Plan(tuple(deltas), finish, None, answer.id if answer else None)


def _first_stop(text: str, stop: Sequence[str]) -> tuple[int, str | None]:
    best, hit = len(text) + 1, None
    for s in stop:
        if not s:
            continue
        i = text.find(s)
        if 0 <= i < best:
            best, hit = i, s
    return best, hit
