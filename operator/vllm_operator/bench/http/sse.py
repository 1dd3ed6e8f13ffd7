"""An incremental Server-Sent Events parser that owns its buffering.

HTTP libraries hand over bytes in whatever pieces the socket delivered: half an event, or
ten events at once, and some of them cap line length (aiohttp's line iterator breaks on
lines over its buffer, vllm#39963). The benchmark reads raw chunks and parses here, so an
event split across reads or a 1 MB ``data:`` line is handled the same way, and each event
is stamped with the time of the read that completed it.

Only what OpenAI-style streams use is kept: ``data:`` fields (several lines are joined with
``\\n``), comment lines (``:``) are skipped, other fields are ignored; an event is
dispatched at a blank line. Line endings ``\\n``, ``\\r\\n`` and ``\\r`` are all accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.errors import VLLMOperatorError

MAX_EVENT_BYTES = 4 * 1024 * 1024
"""An event larger than this is treated as a malformed stream rather than buffered forever
(an honest chunk is under 1 kB; several streams may each buffer this much at once)."""


class SSEError(VLLMOperatorError, ValueError):
    """The byte stream is not SSE the benchmark can trust."""


@dataclass(frozen=True)
class Event:
    """One dispatched event: its joined ``data`` and the time its last byte was read."""

    data: str
    at: float


class SSEParser:
    """Feed bytes with their arrival time; get back the events they completed."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._pending_cr = False
        self._event_bytes = 0

    def feed(self, chunk: bytes, at: float) -> list[Event]:
        """Parse ``chunk`` (read at time ``at``); return the events it completed, in order."""
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the \n of a \r\n split across two reads
        self._pending_cr = False
        buffer = self._buffer + chunk
        events: list[Event] = []
        start = 0
        size = len(buffer)
        while start < size:
            cr = buffer.find(b"\r", start)
            lf = buffer.find(b"\n", start)
            if cr < 0 and lf < 0:
                break
            if cr < 0 or (0 <= lf < cr):
                end, next_start = lf, lf + 1
            else:
                end = cr
                if cr + 1 < size:
                    next_start = cr + 2 if buffer[cr + 1 : cr + 2] == b"\n" else cr + 1
                else:
                    next_start = cr + 1
                    self._pending_cr = True
            self._line(buffer[start:end], at, events)
            start = next_start
        self._buffer = buffer[start:]
        if len(self._buffer) + self._event_bytes > MAX_EVENT_BYTES:
            raise SSEError(f"event larger than {MAX_EVENT_BYTES} bytes")
        return events

    def close(self) -> str:
        """The stream ended: return any incomplete trailing text ('' when it ended cleanly)."""
        rest = self._buffer
        if self._data:
            rest = b"\n".join(self._data) + (b"\n" + rest if rest else b"")
        self._buffer, self._data, self._event_bytes = b"", [], 0
        return rest.decode("utf-8", "replace").strip()

    def _line(self, line: bytes, at: float, events: list[Event]) -> None:
        if not line:
            if self._data:
                text = b"\n".join(self._data).decode("utf-8", "strict")
                events.append(Event(text, at))
            self._data, self._event_bytes = [], 0
            return
        if line.startswith(b":"):
            return
        name, sep, value = line.partition(b":")
        if name != b"data":
            return
        if sep and value.startswith(b" "):
            value = value[1:]
        self._data.append(value)
        self._event_bytes += len(value)
