"""Progress while a run lasts: a live line on a terminal, JSON lines in a Job log.

A person at a terminal wants one updating line; a Job's log is read by machines and by
``kubectl logs`` after the fact, so there every event is one JSON object per line
(``{"event": ..., "t": seconds since start, ...}``), ending with the full report.
"""

from __future__ import annotations

import json
import time
from typing import Any, TextIO

from vllm_operator.api.text import printable


class JsonLinesProgress:
    """One JSON object per event, flushed at once (the Job log keeps every line)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._t0 = time.monotonic()

    def emit(self, event: str, **fields: Any) -> None:
        line = {"event": event, "t": round(time.monotonic() - self._t0, 3), **fields}
        self._stream.write(json.dumps(line, default=str) + "\n")
        self._stream.flush()


class TerminalProgress:
    """A single status line rewritten in place (carriage return), cleared at the end."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._width = 0

    def emit(self, event: str, **fields: Any) -> None:
        text = _describe(event, fields)
        if text is None:
            return
        text = printable(text, newlines=False)  # a test id or error may be hostile
        pad = max(0, self._width - len(text))
        self._stream.write("\r" + text + " " * pad)
        self._stream.flush()
        self._width = len(text)

    def close(self) -> None:
        if self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()


def _describe(event: str, f: dict[str, Any]) -> str | None:
    text = _what(event, f)
    if text is not None and f.get("server") == "baseline":
        return f"baseline: {text}"
    return text


def _what(event: str, f: dict[str, Any]) -> str | None:
    if event == "request":
        trial = f" (trial {f['trial']})" if "trial" in f else ""
        what = f"{f['phase']} {f['class']} #{f['index'] + 1}{trial}"
        if "error" in f:
            return f"{what}: {f['error']}"
        return f"{what}: {f['e2e_ms']:,.0f} ms, TTFT {f['ttft_ms']:,.0f} ms, {f['tokens']} tokens"
    if event == "concurrency":
        return f"concurrency {f['level']}: {f['completed']} requests done"
    if event == "warmup":
        if f.get("mode") == "rate":  # a load sweep's level: requests/s, not streams
            return f"warm-up at {f['level']:g} requests/s done"
        return f"warm-up of {f['level']:g} streams done"
    if event == "trials":
        return f"{f['phase']} after {f['trial']} trial(s)"
    if event == "quality":
        return f"quality {f['id']}: {'pass' if f['passed'] else 'FAIL'}"
    if event in ("deadline", "aborted"):
        return f"{event}: {f.get('reason', f.get('seconds'))}"
    if event == "preflight":
        return f"server {f.get('server_version') or '?'} serves {f.get('served')}"
    return None
