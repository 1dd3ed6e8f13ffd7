"""Progress output: JSON lines for logs, one rewritten line for terminals."""

from __future__ import annotations

import io
import json

from vllm_operator.bench.progress import JsonLinesProgress, TerminalProgress


def test_json_lines_are_one_object_per_event() -> None:
    out = io.StringIO()
    progress = JsonLinesProgress(out)
    progress.emit("request", phase="latency", index=0, ttft_ms=1.5)
    progress.emit("quality", id="code-1", passed=False)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["request", "quality"]
    assert lines[0]["ttft_ms"] == 1.5
    assert all(isinstance(line["t"], float) for line in lines)


def test_terminal_line_is_rewritten_and_cleared() -> None:
    out = io.StringIO()
    progress = TerminalProgress(out)
    progress.emit(
        "request", phase="latency", **{"class": "medium"}, index=0, e2e_ms=4602.0, ttft_ms=410.0,
        tokens=105,
    )  # fmt: skip
    progress.emit("quality", id="code-1", passed=True)
    progress.emit("start", config={})  # not shown
    progress.close()
    text = out.getvalue()
    assert "\rlatency medium #1: 4,602 ms, TTFT 410 ms, 105 tokens" in text
    assert "\rquality code-1: pass" in text
    assert "\n" not in text
    assert text.endswith("\r")
