"""`vllm-operator report` refuses a document with more objects than any report before it
parses it (issue 31: a 128 MiB array of ``{}`` took 6.4 GB before it was refused)."""

from __future__ import annotations

import json
import os
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from report_fixtures import load_report

from vllm_operator.bench.page import view
from vllm_operator.commands.report import main as report_main

SIXTEEN_MIB = 16 << 20


def peak_of(text: bytes) -> tuple[view.ReportError, int]:
    tracemalloc.start()
    try:
        with pytest.raises(view.ReportError) as caught:
            view.from_bytes(text, "r.json", "REPORT r.json")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return caught.value, peak


def test_an_array_of_empty_objects_is_refused_before_parsing() -> None:
    text = b"[" + b"{}," * (SIXTEEN_MIB // 3) + b"{}]"
    error, peak = peak_of(text)
    assert "objects or arrays" in str(error)
    assert "more than a report has" in str(error)
    assert peak < 4 << 20, f"{peak >> 20} MiB to refuse a 16 MiB document"


def test_a_log_of_many_small_lines_is_searched_without_splitting_it_whole() -> None:
    text = b"{}\n" * (SIXTEEN_MIB // 3)
    error, peak = peak_of(text)
    assert "no report event among its lines" in str(error)
    assert peak < 4 << 20, f"{peak >> 20} MiB to search a log of 5 million lines"


def test_a_log_of_many_small_lines_costs_one_scan_not_a_slice_per_line() -> None:
    # Only lines holding "report" are cut out (found by a search in C): a 16 MiB log of 5
    # million other lines once cost a slice each, 4 CPU s here (20 s under tracemalloc);
    # now 0.02 s.
    text = b"{}\n" * (SIXTEEN_MIB // 3)
    started = time.thread_time()  # CPU of this thread: the machine's load does not count
    with pytest.raises(view.ReportError, match="no report event among its lines"):
        view.from_bytes(text, "r.json", "REPORT r.json")
    assert time.thread_time() - started < 0.5


def test_a_real_report_and_a_log_ending_in_one_still_open() -> None:
    report = load_report()
    assert view.from_bytes(json.dumps(report).encode(), "r", "r").load is not None
    log = (
        b'{"event": "progress"}\n' * 1000
        + json.dumps({"event": "report", "report": report}).encode()
        + b"\n"
    )
    assert view.from_bytes(log, "r", "r").load is not None


def test_the_bounds_hold_the_largest_report() -> None:
    # 320 runs x 2,000 samples, each an object of 9 values, fit both bounds.
    assert view.MAX_CONTAINERS > 320 * 2000
    assert view.MAX_VALUES > 320 * 2000 * 9


def test_a_fifo_report_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("plotly")
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    codes: list[int] = []
    argv = [str(fifo), "-o", str(tmp_path / "r.html")]
    worker = threading.Thread(target=lambda: codes.append(report_main(argv, "r")), daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # unblock today's open so the test ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(5)
        pytest.fail("reading a FIFO blocked")
    assert codes == [2]
    assert "a FIFO (named pipe), not a regular file" in capsys.readouterr().err
