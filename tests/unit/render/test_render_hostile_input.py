"""`vllm-operator render` against hostile files: exit 2, a message naming where, no traceback.

Each case once reproduced a failure (traceback, or a run that did not finish); every one
must now end in exit 2 within a second or two, with nothing on stdout.
"""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from vllm_operator.commands.render import run

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "qwen3-30b-a3b-v0.17-throughput.yaml"
PROG = "vllm-operator render"


def with_affinity(text: str) -> bytes:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"].pop("scheduling", None)
    return (yaml.safe_dump(doc) + "  scheduling:\n    affinity:\n" + text).encode()


LAUGHS = "".join(
    f"      l{i}: &l{i} [" + ", ".join([f"*l{i - 1}" if i else '"lol"'] * 9) + "]\n"
    for i in range(10)
)

CASES = {
    "billion-laughs": (with_affinity(LAUGHS), "alias *l0 is not accepted"),
    "deep-1000": (with_affinity("      a: " + "[" * 1000 + "]" * 1000 + "\n"), "line "),
    "deep-maps-300": (with_affinity("      a: " + "{a: " * 300 + "1" + "}" * 300 + "\n"), "nested"),
    "int-5000-digits": (
        EXAMPLE.read_bytes() + b"  replicas: " + b"9" * 5000 + b"\n",
        "5000 digits",
    ),
    "int-beyond-int64": (
        with_affinity("      nodeAffinity: {weight: 99999999999999999999}\n"),
        "spec.scheduling.affinity.nodeAffinity.weight: is an integer outside",
    ),
    "invalid-utf8": (EXAMPLE.read_bytes() + b"# \xc3\x28\n", "not UTF-8"),
    "50-MB": (EXAMPLE.read_bytes() + b"#" + b"x" * (50 * 1024 * 1024), "bytes accepted"),
    "nan": (
        with_affinity("      a: .nan\n"),
        "spec.scheduling.affinity.a: is nan, not a finite number",
    ),
    "date": (with_affinity("      a: 2024-01-01\n"), "spec.scheduling.affinity.a: is a date"),
}


@pytest.mark.parametrize(("data", "needle"), CASES.values(), ids=CASES.keys())
def test_hostile_file_exits_2_naming_the_problem(tmp_path: Path, data: bytes, needle: str) -> None:
    path = tmp_path / "cr.yaml"
    path.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    code = run(["-f", str(path)], PROG, io.StringIO(), out, err)
    assert time.perf_counter() - started < 5.0
    assert code == 2
    assert out.getvalue() == ""
    assert needle in err.getvalue()
    assert "Traceback" not in err.getvalue()


def test_hostile_stdin_bytes_through_the_console_script() -> None:
    data = EXAMPLE.read_bytes() + b"# \xff\n"
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_operator.commands", "render", "-f", "-"],
        input=data,
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == b""
    assert b"<stdin>: not UTF-8: byte" in proc.stderr
    assert b"Traceback" not in proc.stderr


def test_help_states_the_limits(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run(["--help"], PROG, io.StringIO(), io.StringIO(), io.StringIO())
    text = capsys.readouterr().out
    assert "at most 1 MiB" in text
    assert "no YAML aliases" in text
