"""Text for people: "did you mean" for a misspelt name, and control characters made visible.

Two things every human output needs, owned here once so that no command words them its own
way. ``did_you_mean`` answers a misspelt name (a CLI flag, a CR field, a workload key, a
``mustPass`` test id, a vLLM flag in ``extraArgs``) with the closest known spellings.
``printable`` is applied where text meets a terminal or a log: much of what bench and judge
print was written by the measured side or by a stranger (a failure message quoting the
server's answer, a test id from a suite file, a model name), and a raw ``ESC [`` sequence
in it can paint a fake green "Gate: Passed" over the real verdict, ``\\r`` can overwrite a
line, a "conceal" code can hide the rest and a bidi override (U+202E) can reverse what is
read. So every control, format or unassigned character (Unicode categories Cc, Cf, Cs, Co,
Cn, Zl, Zp) becomes its visible escape (``\\x1b``, ``\\u202e``); printable text,
including any language's letters, passes unchanged. Pure.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Categories that move the cursor, change colours or direction, or show nothing."""


@lru_cache(maxsize=4096)
def _shown(char: str) -> str:
    if unicodedata.category(char) not in _HIDDEN:
        return char
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str, *, newlines: bool = True) -> str:
    """``text`` with every control or format character written as its escape; newlines are
    kept when ``newlines`` (a multi-line block), escaped otherwise (one line of a table)."""
    if text.isprintable() and (newlines or "\n" not in text):
        return text  # the common case, checked in C
    if newlines:
        return "\n".join("".join(map(_shown, line)) for line in text.split("\n"))
    return "".join(map(_shown, text))


def close_to(word: str, known: Iterable[str], n: int = 2) -> list[str]:
    """The spellings in ``known`` closest to ``word``, best first (none when nothing is
    close: difflib's ratio below 0.6)."""
    return difflib.get_close_matches(word, list(known), n=n, cutoff=0.6)


def did_you_mean(word: str, known: Iterable[str], *, quote: bool = False, n: int = 2) -> str:
    """``did you mean X?`` (or ``X or Y``) for a misspelt ``word``; '' when nothing in
    ``known`` is close. ``quote`` writes each as ``'X'`` (an id, not a flag or a field)."""
    close = close_to(word, known, n)
    if not close:
        return ""
    shown = [f"'{printable(c, newlines=False)}'" if quote else c for c in close]
    return f"did you mean {' or '.join(shown)}?"


LINE_CHARS = 170
"""Longest one-line message meant for ``kubectl describe`` (status messages, an Event's):
with describe's indent and column (24-60 characters) each line stays within 200 (issue 42).
The whole text goes to the operator's log and the report; status keeps the deciding part."""


EVENT_CHARS = 145
"""Longest Event message we post where a longer one would not fit: describe's Events table
puts about 52 characters before it."""


def clip(text: str, limit: int = LINE_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters at a word, ``...`` marking the cut."""
    if len(text) <= limit:
        return text
    head = text[: max(limit - 3, 0)]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:(") + "..."
