"""Reasons are spelled once (``api/reasons.py``) and the docs list exactly those.

docs/rollout.md carries two tables generated from the module (Event reasons, condition
reasons, each with its meaning); this test rebuilds them and fails with the text to paste
when the doc drifts. mypy keeps the code honest (an Event or a condition takes a member,
not a string); the last test checks no reason is written as a bare literal anyway.
"""

from __future__ import annotations

import re
from pathlib import Path

from vllm_operator.api.reasons import (
    CONDITION_MEANINGS,
    EVENT_MEANINGS,
    ConditionReason,
    EventReason,
)

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "rollout.md"
PACKAGE = ROOT / "operator" / "vllm_operator"


def table(meanings: dict[EventReason, str] | dict[ConditionReason, str]) -> str:
    rows = [f"| `{m.value}` | {text} |" for m, text in meanings.items()]
    return "\n".join(["| reason | meaning |", "|---|---|", *rows])


def test_every_reason_has_a_meaning() -> None:
    assert list(EVENT_MEANINGS) == list(EventReason)
    assert list(CONDITION_MEANINGS) == list(ConditionReason)
    assert all(type(m) is EventReason for m in EVENT_MEANINGS)
    assert all(type(m) is ConditionReason for m in CONDITION_MEANINGS)
    for member in [*EventReason, *ConditionReason]:
        assert member.value == member.name  # the wire spelling is the name, CamelCase
        assert re.fullmatch(r"[A-Z][A-Za-z]+", member.value)


def test_the_docs_list_every_event_reason() -> None:
    expected = table(EVENT_MEANINGS)
    assert expected in DOC.read_text(), f"docs/rollout.md, under ## Events:\n{expected}"


def test_the_docs_list_every_condition_reason() -> None:
    expected = table(CONDITION_MEANINGS)
    assert expected in DOC.read_text(), f"docs/rollout.md, under ## Conditions:\n{expected}"


def test_no_reason_is_a_bare_literal_in_events_or_outcomes() -> None:
    # state.event("Normal", "X", ...), Outcome(..., "X") or kube.event(..., "Warning", "X", ...)
    literal = re.compile(
        r"""(?:\.event\(\s*(?:body,\s*)?"(?:Normal|Warning)",\s*|"""
        r"""Outcome\((?:[^()]|\([^()]*\))*?,\s*)f?"[A-Z]""",
        re.S,
    )
    found = [
        f"{path.relative_to(PACKAGE)}: {m.group(0)[:60]!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for m in literal.finditer(path.read_text())
    ]
    assert not found, found
