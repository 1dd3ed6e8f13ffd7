"""Issue 38 through the operator: a revision whose wrong code answer forges its own pass is
rejected, and the serving Service never selects it.

One embedded cluster (the demo's session: the operator, the kubelet, the real gate Job with
its sandbox sidecar). First an honest revision becomes stable; then, one revision each,
the simulator answers the code prompt with a forgery from ``forgeries`` (pure Python
through ``_ctypes``, and a native extension when ``cc`` exists), against the built-in suite
and against a custom suite from a ConfigMap. On 953c1d3 these forgeries passed their
check (the issue's demo run promoted such a revision); now each revision is Failed on its
code check, and every selector the serving Service ever had names the honest revision.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import minimal_spec, resource
from forgeries import PYTHON_FORGERY, build_native, native_forgery
from vllm_operator.render.names import serving_service_name
from vllm_operator_demo import demo
from vllm_operator_demo.demo_story import Watcher, run_step

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
NAME = "forged"
REVISION_LABEL = "vllm-operator.dev/revision"
CODE_PROMPT = (
    "Write a Python function is_palindrome(text: str) -> bool that returns True when the "
    "text reads the same forwards and backwards, ignoring case, spaces and punctuation. "
    "Reply with the code only, in one ```python block."
)
CUSTOM_SUITE = {
    "name": "custom-code",
    "tests": [
        {
            "id": "pal",
            "category": "code",
            "prompt": CODE_PROMPT,
            "maxTokens": 256,
            "assert": [
                {
                    "type": "python-tests",
                    "function": "is_palindrome",
                    "cases": [
                        {"args": ["Never odd or even"], "expect": True},
                        {"args": ["xy"], "expect": False},
                        {"args": [], "kwargs": {"text": "abca"}, "expect": False},
                    ],
                }
            ],
        }
    ],
}


def _book(tmp_path: Path, label: str, code_answer: str | None) -> Path:
    """The simulator's answer book with code-1 answered by ``code_answer`` (None: as is)."""
    answers = yaml.safe_load(
        (ROOT / "operator/vllm_operator/sim/data/answers.yaml").read_text(encoding="utf-8")
    )
    if code_answer is not None:
        (code,) = [a for a in answers["answers"] if a["id"] == "code-1"]
        code["text"] = f"```python\n{code_answer}```"
    book = tmp_path / f"answers-{label}.yaml"
    book.write_text(yaml.safe_dump(answers, sort_keys=False))
    return book


def _cr(book: Path, *, custom: bool) -> dict[str, Any]:
    spec = minimal_spec("Qwen/Qwen3-0.6B", env=[{"name": "VLLMOP_SIM_ANSWERS", "value": str(book)}])
    # Reference answers: 12 of 13 on the built-in suite, 1 of 1 on the custom one; so the
    # code check decides the quality verdict either way.
    spec["gate"] = {
        "iterations": 1,
        "concurrency": [1],
        "thresholds": {"quality": {"minPassed": 1 if custom else 12}},
        **({"suite": {"configMap": "custom-suite"}} if custom else {}),
    }
    return resource(spec, name=NAME, namespace="default")


def test_forged_code_checks_are_rejected_and_never_served(tmp_path: Path) -> None:
    native = build_native(tmp_path / "forge.so")
    if isinstance(native, str) and os.environ.get("VLLMOP_REQUIRE_SANDBOX_TOOLS"):
        pytest.fail(f"{native} (VLLMOP_REQUIRE_SANDBOX_TOOLS is set)")
    forgeries = {"python": PYTHON_FORGERY}
    if isinstance(native, bytes):
        forgeries["native"] = native_forgery(native)
    out = io.StringIO()
    with demo.Session(
        time_scale=0.03, deadline_scale=0.1, workdir=tmp_path / "work", printer=demo.Printer(out)
    ) as session:
        watcher = Watcher(session.say)
        honest, record = run_step(
            session, _cr(_book(tmp_path, "honest", None), custom=False), watcher, 200
        )
        assert record is not None, out.getvalue()
        assert record.outcome == "Passed", (record.reasons, out.getvalue())
        session.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "custom-suite", "namespace": "default"},
                "data": {"suite.yaml": yaml.safe_dump(CUSTOM_SUITE)},
            }
        )
        rejected = []
        for route, answer in forgeries.items():
            for custom in (False, True):
                cr = _cr(_book(tmp_path, f"{route}-{custom}", answer), custom=custom)
                revision, record = run_step(session, cr, watcher, 200)
                where = f"{route} forgery, {'custom' if custom else 'built-in'} suite"
                assert record is not None, (where, out.getvalue())
                assert record.outcome == "Failed", (where, record.reasons, out.getvalue())
                failed_test = "pal" if custom else "code-1"
                assert any(failed_test in r for r in record.reasons), (where, record.reasons)
                rejected.append(revision)
        history = session.cluster.history("v1", "services", serving_service_name(NAME), "default")
    selected = {
        ((v.get("spec") or {}).get("selector") or {}).get(REVISION_LABEL)
        for v in history
        if v.get("_event") != "DELETED"
    }
    assert selected == {honest}, (selected, rejected)
    assert len(set(rejected)) == len(rejected) == 2 * len(forgeries)
