"""`judge` on summaries whose figures contradict each other: Error naming the contradiction,
never Passed; and the command inputs bounded: @FILE, non-UTF-8, FIFOs (issue 31)."""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vllm_operator.api.summary import BenchSummary
from vllm_operator.bench.quality.suite import load_suite
from vllm_operator.commands.judge import main
from vllm_operator.errors import SpecError

TEN = '{"maxRegressionPercent": 10}'
GOOD: dict[str, Any] = {
    "schema": "vllm-operator.dev/bench-summary/v1",
    "model": "m",
    "latency": [
        {
            "promptClass": c,
            "requests": 5,
            "medianMs": 100.0,
            "ttftMs": 10.0,
            "outputTokens": 20.0,
            "e2eTokensPerSecond": 200.0,
            "decodeTokensPerSecond": 210.0,
        }
        for c in ("short", "medium")
    ],
    "concurrency": [
        {"concurrency": n, "aggregateTokensPerSecond": 100.0 * n, "requestsPerSecond": 1.0}
        for n in (1, 2)
    ],
    "quality": {"suite": "default", "passed": 12, "total": 13, "failed": ["t1"]},
}


def judged(tmp_path: Path, doc: dict[str, Any] | str) -> int:
    path = tmp_path / "summary.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return main(["--summary", str(path), "--thresholds-json", TEN], "judge")


def edit(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    doc = copy.deepcopy(GOOD)
    change(doc)
    return doc


def test_the_good_summary_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    BenchSummary.model_validate(GOOD)
    assert judged(tmp_path, GOOD) == 0
    assert capsys.readouterr().out.startswith("verdict: Passed")


def _dup_class(d: dict[str, Any]) -> None:
    d["latency"].append({**d["latency"][0], "medianMs": 1.0})


def _dup_level(d: dict[str, Any]) -> None:
    d["concurrency"].append({**d["concurrency"][1], "aggregateTokensPerSecond": 9e9})


def _dup_load(d: dict[str, Any]) -> None:
    level = {"level": 2.0, "requests": 10}
    d.update(latency=[], concurrency=[], load={"mode": "rate", "levels": [level, level]})


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("duplicate class", _dup_class, "latency lists short more than once"),
    ("duplicate level", _dup_level, "concurrency lists 2 more than once"),
    ("duplicate load level", _dup_load, "load.levels lists 2 more than once"),
    (
        "passed above total",
        lambda d: d["quality"].update(passed=14, failed=[]),
        "passed 14 is above total 13",
    ),
    (
        "failed with all passed",
        lambda d: d["quality"].update(passed=13),
        "1 failed tests listed (failed and failedOmitted) but passed 13 of 13 leaves 0",
    ),
    (
        "identical above compared",
        lambda d: d["quality"].update(
            differential={"compared": 3, "identical": 4, "baselinePassed": 2, "stillPassing": 2}
        ),
        "identical 4 is above compared 3",
    ),
    (
        "paired baseline duplicate",
        lambda d: d.update(pairedBaseline={"concurrency": d["concurrency"] * 2}),
        "concurrency lists 1, 2 more than once",
    ),
]


@pytest.mark.parametrize(("change", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_contradicting_figures_are_an_error_naming_them(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: Callable[[dict[str, Any]], None],
    expected: str,
) -> None:
    code = judged(tmp_path, edit(change))
    out = capsys.readouterr().out
    assert code == 3, out
    assert out.startswith("verdict: Error\n")
    assert "the figures contradict each other" in out
    assert expected in out


def test_infinity_is_not_a_measurement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = json.dumps(GOOD).replace(
        '"aggregateTokensPerSecond": 200.0', '"aggregateTokensPerSecond": Infinity'
    )
    assert "Infinity" in text
    code = judged(tmp_path, text)
    out = capsys.readouterr().out
    assert code == 3, out
    assert "verdict: Error" in out
    assert "concurrency.1.aggregateTokensPerSecond is inf: not a finite number" in out


def test_a_contradicting_baseline_is_an_error_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD))
    base = tmp_path / "base.json"
    base.write_text(json.dumps(edit(_dup_level)))
    code = main(["--summary", str(good), "--baseline", str(base), "--thresholds-json", TEN], "j")
    out = capsys.readouterr().out
    assert code == 3
    assert "--baseline" in out
    assert "concurrency lists 2 more than once" in out


# --- inputs ---------------------------------------------------------------------------
def test_thresholds_at_file_is_bounded_and_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "s.json"
    summary.write_text(json.dumps(GOOD))
    big = tmp_path / "big.json"
    big.write_text('{"maxRegressionPercent": 10, "x": "' + "a" * (2 << 20) + '"}')
    code = main(["--summary", str(summary), "--thresholds-json", f"@{big}"], "judge")
    assert code == 2
    assert f"--thresholds-json: {big} is larger than 1048576 bytes" in capsys.readouterr().err
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{\n"maxRegressionPercent": 10, "x": "\xe9"}')
    code = main(["--summary", str(summary), "--thresholds-json", f"@{latin}"], "judge")
    assert code == 2
    assert f"{latin} is not UTF-8 (line 2" in capsys.readouterr().err
    code = main(["--summary", str(summary), "--thresholds-json", "@/dev/zero"], "judge")
    assert code == 2
    assert "not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--summary", "--thresholds-json"])
def test_a_fifo_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    summary = tmp_path / "s.json"
    summary.write_text(json.dumps(GOOD))
    argv = {
        "--summary": ["--summary", str(fifo), "--thresholds-json", TEN],
        "--thresholds-json": ["--summary", str(summary), "--thresholds-json", f"@{fifo}"],
    }[option]
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(main(argv, "judge")), daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # unblock today's open so the test ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(5)
        pytest.fail("reading a FIFO blocked")
    assert codes == [2]
    assert "a FIFO (named pipe), not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"name: x\ntests: []\n# \xe9\n", "is not UTF-8"),
        (None, "not a regular file"),
        (b"#" * ((1 << 20) + 1), "is larger than 1048576 bytes"),
    ],
)
def test_bench_suite_files_are_bounded_regular_utf8(
    tmp_path: Path, content: bytes | None, words: str
) -> None:
    path = tmp_path / "suite.yaml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(SpecError, match=words):
        load_suite(str(path))
    with pytest.raises(SpecError, match="not a regular file"):
        load_suite("/dev/zero")
