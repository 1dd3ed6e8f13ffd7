"""Reading a command's input file (or standard input) with a size cap.

Every input a command reads may be hostile or simply huge; reading one byte more than
allowed tells an oversized input apart without reading all of it. Each command words its
own error (the option that named the file, the fix), so this only reads.
"""

from __future__ import annotations

import sys


def read_capped(path: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``path`` ('-': standard input); raises ``OSError``."""
    if path == "-":
        return sys.stdin.buffer.read(limit + 1)
    with open(path, "rb") as handle:
        return handle.read(limit + 1)
