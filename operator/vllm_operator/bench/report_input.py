"""The one bounded reader of a benchmark report, summary or Job log handed to a command.

``vllm-operator report`` and ``vllm-operator judge`` read files that may come from anywhere
(another cluster, a log copied by hand, a forged gzip). A 40 KB gzip of 40 MiB of
``[{},{},...]`` once cost ``judge --report`` 2 GB and 20 s before its named error (12 GB
at its own 256 MiB cap), while ``report`` refused it at 103 MB: each command had its own
reader. Here is the one both use, with the same caps: the raw bytes at most
``MAX_REPORT_BYTES`` (gzip inflated in bounded steps, to the same cap), then the objects,
arrays and values counted in C before any parse (``too_many``), then ``bounded.loads`` with a
nesting limit. The text is one JSON document (a report, a summary) or JSON lines (a Job's
log, ``bench --output jsonl``: its last ``report`` event is used). Text that is neither
(bench's printed tables, say) is an ``InputError`` naming what to give instead.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from vllm_operator.bench.http import bounded
from vllm_operator.errors import SpecError

MAX_REPORT_BYTES = 128 << 20
"""Largest input read (after gzip): 16 load levels x 10 trials x 2 servers x 2,000 samples
is ~110 MB."""
MAX_JSON_DEPTH = 48
MAX_CONTAINERS = 1_000_000
"""Objects and arrays an input may open ('{' and '['): the largest report has ~650,000 (a
sample per request, 2,000 per run, 320 runs); a 128 MiB array of ``{}`` would be 43 million,
6.4 GB of Python objects before the first field is read."""
MAX_VALUES = 8_000_000
"""Values an input may hold, counted by its commas (a sample has 9): ~6 million at most."""

GIVE = (
    "give the JSON `vllm-operator bench` writes: --summary-path FILE (the summary), "
    "--report-path FILE (the full report), or its output with --output jsonl (a Job's log)"
)
"""The fix of an input that is not one: the files bench writes, and the flags that write them."""


class InputError(SpecError):
    """An input that is too large, not JSON or not what bench writes (exit 2)."""


def too_many(text: bytes) -> str | None:
    """Why ``text`` holds more objects or values than any report, or None; counted before
    parsing, in C (an upper bound: brackets and commas inside strings count too)."""
    containers = text.count(b"{") + text.count(b"[")
    values = text.count(b",")
    if containers > MAX_CONTAINERS or values > MAX_VALUES:
        return (
            f"{containers} objects or arrays and {values} commas: more than a report has "
            f"({MAX_CONTAINERS} and {MAX_VALUES})"
        )
    return None


def inflate(raw: bytes, path: str, where: str) -> bytes:
    """``raw`` itself, or its gzip content when it starts with gzip's magic; either way
    at most ``MAX_REPORT_BYTES`` (one more byte read or inflated tells a larger one)."""
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = zlib.decompressobj(wbits=31).decompress(raw, MAX_REPORT_BYTES + 1)
        except zlib.error as exc:
            raise InputError(where, f"not valid gzip ({exc})", GIVE) from exc
    if len(raw) > MAX_REPORT_BYTES:
        raise InputError(where, f"the input is larger than {MAX_REPORT_BYTES >> 20} MiB", GIVE)
    return raw


def _parsed(text: bytes) -> object:
    """``text`` as JSON, counted first; ``BoundError`` when too large or not JSON."""
    problem = too_many(text)
    if problem is not None:
        raise bounded.BoundError(problem)
    return bounded.loads(text, max_bytes=MAX_REPORT_BYTES, max_depth=MAX_JSON_DEPTH)


def _lines_naming_a_report(text: bytes) -> Iterator[bytes]:
    """The lines of ``text`` that hold ``"report"``, last first, without splitting it all
    at once: found by searching (in C) for that word, so a log of millions of other lines
    costs one scan, not a slice per line."""
    end = len(text)
    while (hit := text.rfind(b'"report"', 0, end)) >= 0:
        start = text.rfind(b"\n", 0, hit) + 1
        stop = text.find(b"\n", hit, end)
        yield text[start : end if stop < 0 else stop]
        end = start


def last_report_event(text: bytes) -> dict[str, object] | None:
    """The last ``{"event": "report", ...}`` line of JSON lines, or None."""
    for line in _lines_naming_a_report(text):
        if not line.strip().startswith(b"{"):
            continue
        try:
            event = _parsed(line)
        except bounded.BoundError:
            continue
        if isinstance(event, dict) and event.get("event") == "report":
            return event
    return None


def read_json(raw: bytes, path: str, where: str) -> object:
    """The JSON document in ``raw`` (read from ``path`` with one byte past the cap), or
    its last report event when it is JSON lines; ``InputError`` otherwise."""
    text = inflate(raw, path, where)
    try:
        return _parsed(text)
    except bounded.BoundError as exc:
        whole_error = str(exc)
    found = last_report_event(text)
    if found is not None:
        return found
    if text.lstrip()[:1] in (b"#", b"(") or b"## " in text[:4096]:
        whole_error = "this is bench's printed tables, not the JSON it writes"
    raise InputError(where, f"not JSON, and no report event among its lines ({whole_error})", GIVE)
