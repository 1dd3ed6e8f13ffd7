"""Bounded reading of what a server sends: sizes, decompression and JSON nesting.

The server under test is the measured side and may be hostile or simply broken, so no
answer may cost bench more than a fixed amount of memory: a 1 MB gzip bomb must not become
1 GB, a 100 MB ``/v1/models`` body must not be read whole, and JSON nested ten thousand
levels deep must not reach a RecursionError in the middle of a run. Everything here is
pure and bounded: the decoder inflates at most ``PIECE_BYTES`` per step (zlib's
``max_length``), ``loads`` refuses oversize input before parsing and measures depth without
recursion after.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import Any

from vllm_operator.errors import VLLMOperatorError

MAX_JSON_DEPTH = 32
"""Nesting that any OpenAI-style answer stays far below (vLLM's chunks nest 4-5 levels)."""
MAX_GET_BYTES = 4 << 20
"""``/v1/models``, ``/version``: an honest body is a few kB."""
PIECE_BYTES = 256 << 10
"""Largest piece the decoder inflates at once."""
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BoundError(VLLMOperatorError, ValueError):
    """An answer exceeded a limit (size, decompressed size, nesting) or cannot be decoded."""


class Decoder:
    """Undo ``Content-Encoding`` (identity, gzip, deflate) in bounded pieces."""

    def __init__(self, encoding: str | None) -> None:
        name = (encoding or "identity").strip().lower()
        if name in ("", "identity"):
            self._z: Any = None
        elif name in _WBITS:
            self._z = zlib.decompressobj(_WBITS[name])
        else:
            raise BoundError(f"content-encoding {encoding!r} is not supported (gzip, deflate)")

    def feed(self, raw: bytes) -> Iterator[bytes]:
        """The decoded bytes of ``raw``, at most ``PIECE_BYTES`` at a time."""
        if self._z is None:
            for start in range(0, len(raw), PIECE_BYTES):
                yield raw[start : start + PIECE_BYTES]
            return
        data = raw
        while data:
            try:
                out = self._z.decompress(data, PIECE_BYTES)
            except zlib.error as exc:
                raise BoundError(f"compressed body is corrupt: {exc}") from exc
            if out:
                yield out
            data = self._z.unconsumed_tail
            if not out and data:
                break  # nothing more can come out of this input


def depth(value: object) -> int:
    """Nesting depth of parsed JSON (0 for a scalar), without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            level += 1
            stack.extend((v, level) for v in item.values())
        elif isinstance(item, list):
            level += 1
            stack.extend((v, level) for v in item)
        deepest = max(deepest, level)
    return deepest


def loads(
    data: bytes | str, *, max_bytes: int = MAX_GET_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """``json.loads`` with a size and a nesting limit; every failure is a ``BoundError``."""
    if len(data) > max_bytes:
        raise BoundError(f"JSON of {len(data)} bytes exceeds {max_bytes}")
    try:
        value = json.loads(data)
    except RecursionError as exc:
        raise BoundError(f"JSON nested deeper than {max_depth} levels") from exc
    except ValueError as exc:  # includes integers past Python's digit limit
        raise BoundError(f"not JSON: {exc}") from exc
    if _openers(data) > max_depth and depth(value) > max_depth:
        raise BoundError(f"JSON nested deeper than {max_depth} levels")
    return value


def _openers(data: bytes | str) -> int:
    """Opening brackets in ``data``: an upper bound of its nesting depth, counted in C.

    Every level of nesting opens with ``{`` or ``[`` (brackets inside strings only raise the
    count), so at or below ``max_depth`` the walk of the parsed value can be skipped: a
    streamed chunk has about six, and the walk cost 5 us per event on top of json.loads's
    4 us (``benchmarks/bench_load.py``: 0.3 ms of the bench's 5 ms CPU per request).
    """
    if isinstance(data, bytes):
        return data.count(b"{") + data.count(b"[")
    return data.count("{") + data.count("[")
