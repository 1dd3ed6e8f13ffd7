"""Splitting a dataset file into its records' raw bytes, streaming and bounded.

The benchmark Job's container has 512 MiB, and a dataset at the documented bounds (32 MiB,
1 MiB lines) read whole, split into lines and parsed into Python objects all at once
measured 663-923 MB RSS; a ShareGPT array's single 32 MiB entry was parsed whole before its
1 MiB check. So the file is read in ``CHUNK`` pieces and cut into one record's bytes at a
time (a JSONL line, or a JSON array's entry found by scanning its brackets and strings
without parsing), each refused the moment it passes ``MAX_LINE_BYTES``, and the caller
parses and keeps only what it will send. At most one record and one chunk are held here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

from vllm_operator.errors import DatasetError

MAX_DATASET_BYTES = 32 << 20
"""Largest dataset file (a ConfigMap holds at most 1 MiB; a volume may hold more)."""
MAX_LINE_BYTES = 1 << 20
"""Largest line (JSONL) or array entry: a 128k-token prompt is about 700 kB of text."""
MAX_LINES = 100_000
"""Most lines (JSONL, blank ones included) or array entries."""
MAX_DEPTH = 8
"""JSON nesting of one record (an honest chat request nests 5 levels)."""
CHUNK = 1 << 20
"""Bytes read from the file at a time."""
SAMPLE_FIX = "take a sample of the file (e.g. `head -n 2000 big.jsonl`)"
SHAREGPT_FIX = 'entries like {"conversations": [{"from": "human", "value": "..."}]}'
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"
_STRUCTURE = re.compile(rb'[\[\]{}"]')
_IN_STRING = re.compile(rb'["\\]')
_SCALAR_END = re.compile(rb"[,\]\s]")


def too_big(size: int, unit: str = "bytes") -> str:
    return f"the file has {size} {unit}, more than the {MAX_DATASET_BYTES} allowed"


class _Buffer:
    """The unread bytes of the file, the line ``pos`` is on, and the bytes read so far."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.data = b""
        self.pos = 0
        self.line = 1
        self.total = 0

    def more(self) -> int:
        """Read a chunk (dropping what is before ``pos``); how far indices shifted, or -1 at
        the end of the file."""
        chunk = self.stream.read(CHUNK)
        if not chunk:
            return -1
        self.total += len(chunk)
        if self.total > MAX_DATASET_BYTES:  # a file that grew, or one whose size lies
            raise DatasetError(None, too_big(self.total), SAMPLE_FIX)
        shift = self.pos
        self.data = self.data[shift:] + chunk
        self.pos = 0
        return shift

    def advance(self, to: int) -> None:
        self.line += self.data.count(b"\n", self.pos, to)
        self.pos = to

    def peek(self) -> bytes:
        """The next byte after whitespace (consumed), b'' at the end of the file."""
        while True:
            at = self.pos
            while at < len(self.data) and self.data[at] in _WHITESPACE:
                at += 1
            self.advance(at)
            if at < len(self.data):
                return self.data[at : at + 1]
            if self.more() < 0:
                return b""


def records(stream: BinaryIO, *, array_ok: bool) -> Iterator[tuple[int, bytes]]:
    """(line, raw bytes) of each record: the entries of a JSON array when the file starts
    with '[' (``array_ok``: the format reads arrays; otherwise that is refused), else its
    non-blank lines."""
    buf = _Buffer(stream)
    buf.more()
    if buf.data.startswith(_BOM):
        buf.data = buf.data[len(_BOM) :]
    if buf.peek() == b"[":
        if not array_ok:
            raise DatasetError(
                buf.line,
                "a JSON array, but format chat-jsonl reads one object per line",
                "write one object per line, or set format: sharegpt",
            )
        yield from _array_entries(buf)
    else:
        yield from _lines(buf)


def _lines(buf: _Buffer) -> Iterator[tuple[int, bytes]]:
    number = buf.line  # leading blank lines were skipped; count from where we are
    rest = buf.data[buf.pos :]
    stream = buf.stream
    total = buf.total
    while True:
        if number > MAX_LINES:
            raise DatasetError(number, f"more than {MAX_LINES} lines", SAMPLE_FIX)
        newline = rest.find(b"\n")
        while newline < 0 and len(rest) <= MAX_LINE_BYTES:
            chunk = stream.read(CHUNK)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_DATASET_BYTES:
                raise DatasetError(None, too_big(total), SAMPLE_FIX)
            start = len(rest)
            rest += chunk
            newline = rest.find(b"\n", start)
        end = newline if newline >= 0 else len(rest)
        if end > MAX_LINE_BYTES:
            raise DatasetError(number, f"longer than {MAX_LINE_BYTES} bytes", "shorten the request")
        line = rest[:end]
        if line.strip(_WHITESPACE):
            yield number, line
        if newline < 0:
            return
        rest = rest[newline + 1 :]
        number += 1
        if not rest and (chunk := stream.read(CHUNK)):
            total += len(chunk)
            if total > MAX_DATASET_BYTES:
                raise DatasetError(None, too_big(total), SAMPLE_FIX)
            rest = chunk
        elif not rest:
            # A file that ends with a newline has no line after it.
            return


def _array_entries(buf: _Buffer) -> Iterator[tuple[int, bytes]]:
    buf.advance(buf.pos + 1)  # "["
    count = 0
    if buf.peek() == b"]":
        buf.advance(buf.pos + 1)
    else:
        while True:
            if count >= MAX_LINES:
                raise DatasetError(buf.line, f"more than {MAX_LINES} entries", SAMPLE_FIX)
            line = buf.line
            end = _entry_end(buf, line)
            yield line, buf.data[buf.pos : end]
            count += 1
            buf.advance(end)
            after = buf.peek()
            if after == b",":
                buf.advance(buf.pos + 1)
                buf.peek()
                continue
            if after == b"]":
                buf.advance(buf.pos + 1)
                break
            raise DatasetError(buf.line, "expected ',' or ']' after an entry", SHAREGPT_FIX)
    if buf.peek():
        raise DatasetError(buf.line, "text after the array's closing ']'", "remove it")


def _entry_end(buf: _Buffer, line: int) -> int:
    """Where the entry starting at ``buf.pos`` ends, found without parsing it: brackets
    are counted outside strings; a scalar ends at ',', ']' or whitespace."""
    start = buf.pos
    at = start
    depth = 0
    in_string = False
    scalar = buf.data[start : start + 1] not in (b"{", b"[", b'"')
    while True:
        if at - start > MAX_LINE_BYTES:
            raise DatasetError(line, f"entry longer than {MAX_LINE_BYTES} bytes", "shorten it")
        if scalar:
            match = _SCALAR_END.search(buf.data, at)
        elif in_string:
            match = _IN_STRING.search(buf.data, at)
        else:
            match = _STRUCTURE.search(buf.data, at)
        if match is None:
            at = max(at, len(buf.data))
            shift = buf.more()
            if shift < 0:
                if scalar:
                    return len(buf.data)
                raise DatasetError(line, "the array ends inside an entry", SHAREGPT_FIX)
            start -= shift
            at -= shift
            continue
        found = match[0]
        if scalar:
            at = match.start()
        elif in_string:
            if found == b"\\":
                at = match.end() + 1  # skip the escaped byte (a quote, say)
                continue
            in_string = False
            at = match.end()
        elif found == b'"':
            in_string = True
            at = match.end()
            continue
        elif found in (b"{", b"["):
            depth += 1
            if depth > MAX_DEPTH:
                raise DatasetError(line, f"JSON nested deeper than {MAX_DEPTH}", SHAREGPT_FIX)
            at = match.end()
            continue
        else:
            depth -= 1
            at = match.end()
        if depth <= 0:
            if at - start > MAX_LINE_BYTES:
                raise DatasetError(line, f"entry longer than {MAX_LINE_BYTES} bytes", "shorten")
            return at
