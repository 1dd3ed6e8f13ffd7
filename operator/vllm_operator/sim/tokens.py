"""The simulator's tokenisation, and the prompt sizes the benchmark sends.

Why a rule of our own: the simulator has no real tokenizer, yet a benchmark must know how
many prompt tokens it sends and ``usage`` must agree with what was streamed. The rule is
deliberately trivial so any client can reproduce it without this package:

* A **token** is a maximal run of non-whitespace characters (Python ``str.split()``); the
  token count of a text is ``len(text.split())``. Punctuation glued to a word belongs to it
  (``"Hello, world!"`` is 2 tokens); a 40-character word is still one token.
* When text is **streamed**, the first token is sent without leading whitespace and every
  later token carries the whitespace that precedes it in the text (``"Hello"``, ``" world"``),
  so the concatenation of the deltas equals the text with outer whitespace stripped.
* A **chat prompt** is rendered as one line per message, ``"<|ROLE|> CONTENT"``, and counted
  with the same rule: each message adds one token for its role marker plus the words of its
  content (content given as a list of parts contributes the words of its ``text`` parts).
* ``usage.prompt_tokens`` uses the rule above; ``usage.completion_tokens`` is the number of
  tokens streamed (one per content delta).

The sizes the benchmark sends (short/medium/long and the concurrency shape) live with the
benchmark (``vllm_operator.bench.prompts``); the built-in profiles are fitted to them.
``prompt_of(n)`` builds a prompt of exactly ``n`` tokens under this rule.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable, Mapping
from typing import Any

_PIECE = re.compile(r"\s*\S+")

# Filler vocabulary: ordinary English words so that the text looks like text in logs.
_WORDS = [
    "the",
    "model",
    "answers",
    "a",
    "request",
    "with",
    "words",
    "that",
    "carry",
    "no",
    "meaning",
    "but",
    "keep",
    "the",
    "stream",
    "moving",
    "at",
    "a",
    "steady",
    "pace",
    "while",
    "the",
    "benchmark",
    "measures",
    "latency",
    "and",
    "throughput",
    "for",
    "each",
    "revision",
    "of",
    "the",
    "deployment",
    "before",
    "the",
    "gate",
    "decides",
    "whether",
    "the",
    "candidate",
    "may",
    "serve",
    "traffic",
    "in",
    "place",
    "of",
    "the",
    "stable",
    "one",
]


def count(text: str) -> int:
    """Number of tokens in ``text`` under the module rule."""
    return len(text.split())


def pieces(text: str) -> list[str]:
    """The streamed deltas of ``text``: first token bare, later ones with their whitespace."""
    return _PIECE.findall(text.strip())


def join(parts: Iterable[str]) -> str:
    """Inverse of :func:`pieces` (the deltas concatenated)."""
    return "".join(parts)


def chat_prompt(messages: Iterable[Mapping[str, Any]]) -> str:
    """Render chat messages as the simulator counts and matches them."""
    lines = []
    for message in messages:
        role = str(message.get("role", "user"))
        content = message.get("content", "")
        if isinstance(content, list):
            text = " ".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, Mapping) and part.get("type", "text") == "text"
            )
        else:
            text = "" if content is None else str(content)
        lines.append(f"<|{role}|> {text}")
    return "\n".join(lines)


def seed_of(text: str) -> int:
    """A stable 64-bit seed derived from ``text`` (independent of PYTHONHASHSEED)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def filler(n: int, seed: int) -> list[str]:
    """``n`` deterministic filler deltas (first bare, later with a leading space)."""
    rng = random.Random(seed)
    words = rng.choices(_WORDS, k=n)
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def prompt_of(n: int, seed: int = 0) -> str:
    """A prompt of exactly ``n`` tokens (``n >= 1``); different seeds give different text."""
    if n < 1:
        raise ValueError("a prompt needs at least one token")
    return join(filler(n, seed))
