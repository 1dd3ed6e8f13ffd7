"""The quoted demo runs agree with each other and name objects as the operator names them.

``hack/demo_docs.py`` writes README's excerpt, docs/demo.md's run and ``--keep`` session and
``benchmarks/results/demo_output.txt`` from one run; ``tests/integration/demo/test_story.py``
compares them with a fresh run. This cheap check runs everywhere: the quoted blocks share one
shape, and every object name in them is one ``render/names.py`` produces for the quoted
revisions (docs/demo.md once showed ``qwen3-30b-a3b-fa5c654ac5``, with one dash).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from vllm_operator.render import names as child_names

ROOT = Path(__file__).resolve().parents[2]
NAME = "qwen3-30b-a3b"


def _demo_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_docs", ROOT / "hack" / "demo_docs.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DOCS = _demo_docs()
DOC = (ROOT / "docs" / "demo.md").read_text()
RUN = DOCS.quoted(DOC, "demo-run")
KEEP = DOCS.quoted(DOC, "demo-keep")
EXCERPT = DOCS.quoted((ROOT / "README.md").read_text(), "demo-excerpt")
OUTPUT = (ROOT / "benchmarks" / "results" / "demo_output.txt").read_text()


def test_the_quoted_blocks_come_from_one_run() -> None:
    assert RUN.strip().startswith("```text")
    assert DOCS.shape(RUN) == DOCS.shape(OUTPUT)
    assert RUN.strip().removeprefix("```text").removesuffix("```").strip() == OUTPUT.strip()
    assert DOCS.shape(EXCERPT) == DOCS.shape(DOCS.excerpt(OUTPUT))
    assert len(DOCS.shape(OUTPUT)) >= 20


def _expected_names(text: str) -> set[str]:
    revisions = set(re.findall(r"revision ([0-9a-f]{10})", text))
    assert revisions
    made = {child_names.serving_service_name(NAME), child_names.candidate_service_name(NAME)}
    for rev in revisions:
        made |= {
            child_names.deployment_name(NAME, rev),
            child_names.twin_deployment_name(NAME, rev),
            child_names.job_name(NAME, rev, 1),
        }
    expected = DOCS.names(" ".join(f"Job {n}" for n in made))
    return expected | {f"{n}-POD" for n in expected if n.endswith("--REV")}


def test_every_quoted_name_is_one_the_operator_makes() -> None:
    expected = _expected_names(OUTPUT)
    for block in (RUN, KEEP, EXCERPT, OUTPUT):
        assert DOCS.names(block) <= expected, DOCS.names(block) - expected
    assert {f"{NAME}--REV", f"{NAME}--REV-POD", f"{NAME}--candidate"} <= DOCS.names(KEEP)


def test_a_stale_name_is_caught() -> None:
    stale = KEEP.replace(f"{NAME}--", f"{NAME}-")
    assert not DOCS.names(stale) <= _expected_names(OUTPUT)


def test_the_excerpt_keeps_what_decided() -> None:
    text = DOCS.excerpt(OUTPUT)
    assert "== Step 4/4" in text
    assert "live users:" in text
    assert "FAILED" in text
    assert "regression beyond the limit" in text
    assert "RESULT:" in text
    assert "## Latency and generation speed" in text
