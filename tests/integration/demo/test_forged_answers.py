"""The demo attack of issue 20: answer code that forges its own pass is not believed.

A candidate whose simulator answers the suite's python-tests prompt with wrong code that
then prints the runner's "tests passed" marker (read from the runner's frame) and exits 0.
Before the fix this revision was Passed and promoted; now its code check fails (it runs in
the Job's sandbox sidecar, under the kernel's limits and the hook), so the gate fails it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builders import minimal_spec, resource

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
FORGERY = """```python
import os, sys

def is_palindrome(text: str) -> bool:
    return False  # wrong: only a forged marker would let its tests pass

f = sys._getframe()
while f is not None and "marker" not in f.f_locals:
    f = f.f_back
print(f.f_locals["marker"], flush=True)
os._exit(0)
```"""


def test_answer_code_forging_its_pass_ends_failed_never_passed(tmp_path: Path) -> None:
    answers = yaml.safe_load(
        (ROOT / "operator/vllm_operator/sim/data/answers.yaml").read_text(encoding="utf-8")
    )
    (code,) = [a for a in answers["answers"] if a["id"] == "code-1"]
    code["text"] = FORGERY
    book = tmp_path / "answers.yaml"
    book.write_text(yaml.safe_dump(answers, sort_keys=False))
    spec = minimal_spec("Qwen/Qwen3-0.6B", env=[{"name": "VLLMOP_SIM_ANSWERS", "value": str(book)}])
    # The reference answers pass 12 of 13 here: code-1 decides the verdict.
    spec["gate"] = {
        "iterations": 1,
        "concurrency": [1],
        "thresholds": {"quality": {"minPassed": 12}},
    }
    cr = resource(spec, name="forged", namespace="default")
    file = tmp_path / "forged.yaml"
    file.write_text(yaml.safe_dump(cr))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "vllm_operator.commands",
            "demo",
            "--apply",
            str(file),
            "--time-scale",
            "0.03",
            "--workdir",
            str(tmp_path / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    text = out.stdout + out.stderr
    assert out.returncode != 0, text
    assert "verdict on revision" in text, text
    assert "PASSED" not in text
    assert "RESULT: not every revision was promoted" in text
    assert "| Failed |" in text or "| Error |" in text, text
    assert "failed: code-1" in text, text  # the code ran, and its tests failed
