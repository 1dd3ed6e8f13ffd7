"""What `bench` prints for people: one true verdict block, last, piped or not (issue 42 item
7), with every control character escaped (issue 38 hole 4).

On 953c1d3 a piped bench ended in a 52,637-character JSON line instead of the verdict a CI
log reader looks for, and text from a suite or the command line (here a regex pattern and a
row label) reached the tables raw: a fake green "## Gate: Passed (exit 0)" drawn by escape
codes, a carriage return, a 'conceal' code and a bidi override, while the verdict was Failed
(exit 1). The simulator answers over real HTTP; stdout is a pipe, as in CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench_simproc import MODEL, StartSim

FAKE = "\x1b[32m\n## Gate: Passed (exit 0)\x1b[8m\r\u202e"
"""A fake green verdict, a carriage return, a 'conceal' code and a bidi override."""
TITLE = "\x1b]0;pwned\x07\r\u202e"
"""A terminal's set-title sequence (no '[': the pattern must compile)."""
RAW = ("\x1b", "\r", "\u202e", "\x07")
SUITE = {
    "schema": "vllm-operator.dev/quality-suite/v1",
    "name": "hostile",
    "tests": [
        {
            "id": "hostile-1",
            "category": "classification",
            "prompt": "Reply with one word.",
            "maxTokens": 8,
            "assert": [{"type": "regex", "pattern": f"{TITLE}never-in-an-answer"}],
        }
    ],
}
FAST = [
    "--prompt-classes", "short", "--iterations", "2", "--warmup", "0", "--concurrency", "none",
    "--trials", "1", "--settle-max-passes", "0", "--deadline-seconds", "90",
]  # fmt: skip


def bench(url: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps(SUITE))
    cmd = [sys.executable, "-m", "vllm_operator.commands", "bench", "--url", url]
    cmd += ["--model", MODEL, "--suite", str(suite), *FAST, "--label", f"{FAKE}mine"]
    cmd += ["--thresholds-json", '{"quality": {"minPassed": 1}}', *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


@pytest.mark.parametrize("output", [[], ["--output", "human"], ["--output", "auto"]])
def test_piped_output_ends_in_the_one_true_verdict_block_with_nothing_raw(
    sim: StartSim, tmp_path: Path, output: list[str]
) -> None:
    url = sim("--sim-time-scale", "0.05")
    done = bench(url, tmp_path, *output)
    assert done.returncode == 1, done.stderr[-2000:]
    out = done.stdout
    for raw in RAW:
        assert raw not in out, f"{raw!r} reached the terminal"
        assert raw not in done.stderr, f"{raw!r} reached stderr"
    gates = [line for line in out.splitlines() if line.startswith("## Gate")]
    assert gates == ["## Gate: Failed (exit 1)"], out[-3000:]
    tail = out[out.index("## Gate: Failed (exit 1)") :]
    assert "quality 0/1 passed, fewer than minPassed 1" in tail
    assert not any(line.lstrip().startswith("{") for line in out.splitlines()), out[-2000:]
    assert "\\x1b[32m\\x0a## Gate: Passed (exit 0)\\x1b[8m\\x0d\\u202emine" in out  # the label
    assert "\\x1b]0;pwned\\x07\\x0d\\u202enever-in-an-answer" in out  # the suite's pattern


def test_jsonl_is_asked_for_and_still_ends_in_the_report_event(
    sim: StartSim, tmp_path: Path
) -> None:
    url = sim("--sim-time-scale", "0.05")
    done = bench(url, tmp_path, "--output", "jsonl")
    assert done.returncode == 1, done.stderr[-2000:]
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["event"] == "report"
    assert last["report"]["summary"]["verdict"] == "Failed"
    assert "## Gate: Failed (exit 1)" in done.stderr  # the tables, for a person reading the log
    assert "\x1b" not in done.stderr
