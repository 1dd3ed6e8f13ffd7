"""Prompt classes: what "short", "medium" and "long" mean, and the exact prompts sent.

Defaults follow the published study and the H200 calibration run: prompts of about 24, 256
and 1,024 tokens asking for exactly 2, 105 and 700 output tokens (``max_tokens`` with
``ignore_eos``). The study capped short answers at 16 tokens, but its figures (8.0 tok/s at
280 ms) say the model stopped after about 2, and a fixed length is what makes two revisions
comparable, so short asks for exactly 2.

Token counts follow the simulator's documented rule (``vllm_operator.sim.tokens``: a token is
a whitespace-separated word, and a chat message adds one token for its role marker), which
any client can reproduce; on a real model the counts are close, not exact, and the report
records the ``prompt_tokens`` the server returned. Prompts are deterministic (seeded word
choices) so every revision gets the same text, and distinct per request from the first word
on, so a prefix cache cannot turn a repeated prompt into a fake TTFT win.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from vllm_operator.bench.http.request import ChatRequest
from vllm_operator.errors import SpecError

_VOCABULARY = (
    "river stone cloud market window garden letter engine morning silver harbor orchard "
    "lantern copper meadow signal ladder pocket quiet rapid yellow winter basket candle "
    "forest island journey kettle mirror number planet rabbit saddle thunder valley wagon "
    "anchor bridge castle desert feather glacier hollow insect jungle kitchen lemon "
    "mountain needle ocean pepper question ribbon shadow tunnel umbrella velvet whistle"
)
_WORDS = tuple(_VOCABULARY.split(" "))


@dataclass(frozen=True)
class PromptClass:
    """A named size: prompt tokens in, exact output tokens out."""

    name: str
    prompt_tokens: int
    output_tokens: int


DEFAULT_CLASSES: tuple[PromptClass, ...] = (
    PromptClass("short", 24, 2),
    PromptClass("medium", 256, 105),
    PromptClass("long", 1024, 700),
)
SIZES: dict[str, PromptClass] = {c.name: c for c in DEFAULT_CLASSES}
"""The default classes by name; the simulator's profiles are fitted to exactly these sizes."""
CONCURRENCY_CLASS = PromptClass("concurrency", 1024, 105)
"""Closed-loop concurrency requests: long (1,024-token) prompts, 105 output tokens.

The study did not publish the shape of its concurrency requests. With medium prompts its
0.17.0 throughput figures contradict each other (118.6 tok/s for one medium request, 97.2
for one stream); with long prompts and 105 output tokens its three tables agree, so that is
the shape we send (docs/bench.md, "Concurrency request shape")."""


def words(n: int, seed: str) -> str:
    """``n`` deterministic words for ``seed`` (``n >= 0``)."""
    digest = hashlib.blake2b(seed.encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    return " ".join(rng.choices(_WORDS, k=n))


def prompt_for(cls: PromptClass, index: int) -> str:
    """The ``index``-th prompt of a class: one role marker plus words, ``prompt_tokens`` total.

    The text asks the model to keep writing, so a real model without ``ignore_eos`` would
    still tend to produce long answers.
    """
    lead = "Continue this list of words:"
    body = max(0, cls.prompt_tokens - 1 - len(lead.split()))
    return f"{lead} {words(body, f'{cls.name}/{index}')}".strip()


def parse_classes(text: str) -> tuple[PromptClass, ...]:
    """``short,medium`` or ``medium=256/105,long``: names, optionally with prompt/output sizes.

    Raises ``SpecError`` naming ``--prompt-classes`` on anything it cannot read.
    """
    defaults = {c.name: c for c in DEFAULT_CLASSES}
    out: list[PromptClass] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        name, _, sizes = item.partition("=")
        if sizes:
            prompt_s, slash, output_s = sizes.partition("/")
            if not slash or not prompt_s.isdigit() or not output_s.isdigit():
                raise SpecError(
                    "--prompt-classes",
                    f"{item!r}: sizes must be PROMPT/OUTPUT tokens",
                    "medium=256/105",
                )
            cls = PromptClass(name, int(prompt_s), int(output_s))
        elif name in defaults:
            cls = defaults[name]
        else:
            raise SpecError(
                "--prompt-classes",
                f"unknown class {name!r}",
                "short, medium, long, or NAME=PROMPT/OUTPUT",
            )
        if cls.prompt_tokens < 8 or cls.output_tokens < 1:
            raise SpecError("--prompt-classes", f"{item!r}: prompt >= 8 and output >= 1 tokens")
        if any(c.name == cls.name for c in out):
            raise SpecError("--prompt-classes", f"class {cls.name!r} given twice")
        out.append(cls)
    return tuple(out)


def sized_request(cls: PromptClass, index: int) -> ChatRequest:
    """The ``index``-th request of a prompt class: its prompt and its output length."""
    return ChatRequest(prompt=prompt_for(cls, index), max_tokens=cls.output_tokens)
