"""Reading a command's input file (or standard input) with a size cap.

Every input a command reads may be hostile or simply huge; reading one byte more than
allowed tells an oversized input apart without reading all of it. Each command words its
own error (the option that named the file, the fix), so this only reads. A path must name
a regular file (``bench.local_files``): a FIFO would block forever and ``/dev/zero`` never
ends.
"""

from __future__ import annotations

import sys

from vllm_operator.bench.local_files import read_regular
from vllm_operator.errors import SpecError

MAX_OPTION_FILE_BYTES = 1 << 20
"""Largest ``@FILE`` of a JSON option or key file (a summary or thresholds is a few kB)."""


def read_capped(path: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``path`` ('-': standard input); raises ``OSError``."""
    if path == "-":
        return sys.stdin.buffer.read(limit + 1)
    return read_regular(path, limit)


def read_option_file(path: str, option: str, limit: int = MAX_OPTION_FILE_BYTES) -> str:
    """The UTF-8 text of the file an option names (``@FILE``), bounded; ``SpecError``
    naming ``option`` when it cannot be read, is not a regular file, is larger than
    ``limit`` or is not UTF-8."""
    try:
        data = read_capped(path, limit)
    except OSError as exc:
        raise SpecError(
            option, f"cannot read {path}: {exc.strerror or exc}", "name a readable file"
        ) from exc
    if len(data) > limit:
        raise SpecError(option, f"{path} is larger than {limit} bytes", "give a smaller file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError(
            option, f"{path} is not UTF-8 (line {line}: {exc.reason})", "save it as UTF-8"
        ) from exc
