"""Judging one answer against one assertion: deterministic, explained, never in-process code.

Each check returns pass/fail and a one-line reason a person can act on ("expected
'billing', got 'Billing.'"). Everything here is a pure function of the answer text except
``python-tests``, which hands the code and the cases' inputs to an executor
(``bench.sandbox.executors``): a sandbox outside bench, or none (the check is then refused,
never run in bench); what the calls gave back is compared here (``cases``), never there.

Extraction rules shared by several checks: the JSON or code of an answer is the content of
its first fenced block (```` ```json ```` / ```` ```python ```` / ```` ``` ````) when it has
one, else the whole answer, trimmed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from vllm_operator.bench.quality import cases, jsonschema_lite
from vllm_operator.bench.quality.suite import (
    Assertion,
    Contains,
    Equals,
    IsJson,
    JsonSchema,
    Not,
    NumberClose,
    PythonTests,
    Regex,
    WordCount,
)
from vllm_operator.bench.sandbox import executors

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class Check:
    """The outcome of one assertion."""

    passed: bool
    detail: str
    refused: bool = False
    """The check could not be evaluated (python-tests without a sandbox): not run."""


def fenced_or_all(text: str) -> str:
    """The first fenced block's content, or the whole text, trimmed."""
    match = _FENCE.search(text)
    return (match.group(2) if match else text).strip()


def parse_number(token: str) -> float | None:
    """``$12,345.50`` -> 12345.5; ``None`` when it is not a number."""
    cleaned = token.replace("$", "").replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return None


async def check(
    assertion: Assertion, answer: str, executor: executors.Executor | None = None
) -> Check:
    """Evaluate ``assertion`` on ``answer``; code runs only through ``executor``.

    Without an executor a python-tests check is refused (``Check.refused``), never run.
    """
    if isinstance(assertion, Not):
        inner = await check(assertion.assert_, answer, executor)
        if inner.refused:
            return inner
        verb = "failed as required" if not inner.passed else "passed but must not"
        return Check(not inner.passed, f"not {assertion.assert_.type}: {verb} ({inner.detail})")
    if isinstance(assertion, PythonTests):
        code = fenced_or_all(answer)
        result = await (executor or executors.Refused()).run(
            code, cases.calls(assertion), limit_seconds=assertion.timeout_seconds
        )
        if not result.ran:
            return Check(False, result.detail, refused=True)
        return Check(*cases.judge(assertion, result))
    return check_text(assertion, answer)


def check_text(assertion: Assertion, answer: str) -> Check:
    """Every assertion except ``python-tests`` and ``not``: a pure function of the text."""
    if isinstance(assertion, Equals):
        got, want = answer.strip(), assertion.value.strip()
        same = got.lower() == want.lower() if assertion.ignore_case else got == want
        return Check(same, f"expected {want!r}, got {_short(got)!r}")
    if isinstance(assertion, Contains):
        wanted = [assertion.value] if isinstance(assertion.value, str) else assertion.value
        hay = answer.lower() if assertion.ignore_case else answer
        missing = [w for w in wanted if (w.lower() if assertion.ignore_case else w) not in hay]
        if missing:
            return Check(False, f"missing {missing!r}")
        return Check(True, f"contains {wanted!r}")
    if isinstance(assertion, Regex):
        flags = re.IGNORECASE if assertion.ignore_case else 0
        found = re.search(assertion.pattern, answer, flags)
        return Check(found is not None, f"/{assertion.pattern}/ {'found' if found else 'absent'}")
    if isinstance(assertion, IsJson):
        value, error = _json(answer)
        return Check(error is None, error or f"valid JSON ({type(value).__name__})")
    if isinstance(assertion, JsonSchema):
        value, error = _json(answer)
        if error is not None:
            return Check(False, error)
        problems = jsonschema_lite.errors(value, assertion.schema_)
        return Check(not problems, "; ".join(problems[:3]) or "matches the schema")
    if isinstance(assertion, NumberClose):
        return _number_close(assertion, answer)
    if isinstance(assertion, WordCount):
        n = len(answer.split())
        low = assertion.min if assertion.min is not None else 0
        high = assertion.max if assertion.max is not None else n
        return Check(low <= n <= high, f"{n} words (allowed {low}..{assertion.max or 'any'})")
    raise TypeError(f"check_text cannot evaluate {assertion.type}")


def _number_close(assertion: NumberClose, answer: str) -> Check:
    if assertion.pattern is not None:
        match = re.search(assertion.pattern, answer)
        token = match.group(1) if match else None
    else:
        numbers = _NUMBER.findall(answer)
        token = numbers[-1] if numbers else None
    value = parse_number(token) if token is not None else None
    if value is None:
        return Check(False, f"no number found (expected {assertion.value:g})")
    close = abs(value - assertion.value) <= assertion.tolerance
    return Check(close, f"got {value:g}, expected {assertion.value:g} ± {assertion.tolerance:g}")


def _json(answer: str) -> tuple[Any, str | None]:
    text = fenced_or_all(answer)
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, f"not JSON: {exc} in {_short(text)!r}"


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
