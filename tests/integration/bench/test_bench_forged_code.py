"""Issue 38 at bench's level: the gate of a server whose code answer forges its pass is Failed.

`vllm-operator bench --allow-code-execution` (the laptop executor) against a simulator
whose answer to code-1 is a forgery from ``forgeries``: on 953c1d3 the check passed and,
with the reference answers' 12 of 13, the gate with ``minPassed: 12`` was Passed (exit 0).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bench_simproc import StartSim
from test_bench_cli_sim import FAST, bench

from forgeries import PYTHON_FORGERY, build_native, native_forgery
from vllm_operator.api.summary import BenchSummary

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("route", ["python", "native"])
def test_a_forged_code_answer_fails_the_gate(sim: StartSim, tmp_path: Path, route: str) -> None:
    if route == "python":
        answer = PYTHON_FORGERY
    else:
        built = build_native(tmp_path / "forge.so")
        if isinstance(built, str):
            pytest.skip(built)
        answer = native_forgery(built)
    answers = yaml.safe_load(
        (ROOT / "operator/vllm_operator/sim/data/answers.yaml").read_text(encoding="utf-8")
    )
    (code,) = [a for a in answers["answers"] if a["id"] == "code-1"]
    code["text"] = f"```python\n{answer}```"
    book = tmp_path / "answers.yaml"
    book.write_text(yaml.safe_dump(answers, sort_keys=False))
    url = sim("--sim-time-scale", "0.05", "--sim-answers", str(book))
    summary_path = tmp_path / "termination-log"
    done = bench(
        "--url", url, *FAST, "--summary-path", str(summary_path),
        "--thresholds-json", '{"quality": {"minPassed": 12}}', "--allow-code-execution",
    )  # fmt: skip
    assert done.returncode == 1, (done.stdout + done.stderr)[-3000:]
    summary = BenchSummary.model_validate_json(summary_path.read_text())
    assert summary.verdict == "Failed", summary.reasons
    assert summary.quality is not None
    assert summary.quality.passed == 11
    # the human tables, on stdout since piped output ends in them (issue 42, item 7)
    assert "| code-1 | code | ✗ FAIL |" in done.stdout
