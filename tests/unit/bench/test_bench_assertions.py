"""Every assertion type has answers that pass and answers that fail."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from vllm_operator.bench.quality.assertions import check, fenced_or_all, parse_number
from vllm_operator.bench.quality.suite import Assertion
from vllm_operator.bench.sandbox.executors import LocalSandbox

ADAPTER: TypeAdapter[Any] = TypeAdapter(Assertion)

CASES: list[tuple[dict[str, Any], str, bool]] = [
    ({"type": "equals", "value": "billing"}, "  billing\n", True),
    ({"type": "equals", "value": "billing"}, "Billing", False),
    ({"type": "equals", "value": "billing", "ignoreCase": True}, "BILLING", True),
    ({"type": "equals", "value": "billing"}, "billing.", False),
    ({"type": "contains", "value": "June 3"}, "launch on June 3.", True),
    ({"type": "contains", "value": ["June 3", "$49"]}, "launch on June 3", False),
    ({"type": "contains", "value": "dana", "ignoreCase": True}, "Dear Dana,", True),
    ({"type": "regex", "pattern": r"Answer:\s*13:50\s*\Z"}, "...\nAnswer: 13:50\n", True),
    ({"type": "regex", "pattern": r"Answer:\s*13:50\s*\Z"}, "Answer: 13:50 or 13:30", False),
    ({"type": "regex", "pattern": "^yes$", "ignoreCase": True}, "YES", True),
    ({"type": "is-json"}, '{"a": [1, 2]}', True),
    ({"type": "is-json"}, 'Here: ```json\n{"a": 1}\n```', True),
    ({"type": "is-json"}, "{'a': 1}", False),
    ({"type": "is-json"}, 'Sure! {"a": 1}', False),
    ({"type": "json-schema", "schema": {"type": "object", "required": ["a"]}}, '{"a": 1}', True),
    ({"type": "json-schema", "schema": {"type": "object", "required": ["a"]}}, '{"b": 1}', False),
    ({"type": "json-schema", "schema": {"type": "object"}}, "not json", False),
    ({"type": "number-close", "value": 9422, "tolerance": 0.5}, "so it is $9,422.", True),
    ({"type": "number-close", "value": 9422}, "first 9422, finally 3922", False),
    (
        {"type": "number-close", "value": 9422, "pattern": r"Gross profit:\s*\$?([\d,.]+)"},
        "Gross profit: $9,422.00\nCheck: 3922",
        True,
    ),
    ({"type": "number-close", "value": 1.5, "tolerance": 0.1}, "no numbers here", False),
    ({"type": "word-count", "min": 2, "max": 3}, "one two three", True),
    ({"type": "word-count", "max": 2}, "one two three", False),
    ({"type": "word-count", "min": 4}, "one two three", False),
    ({"type": "not", "assert": {"type": "contains", "value": "[Your Name]"}}, "Best, Ann", True),
    (
        {"type": "not", "assert": {"type": "contains", "value": "[Your Name]"}},
        "Best, [Your Name]",
        False,
    ),
    (
        {"type": "not", "assert": {"type": "not", "assert": {"type": "equals", "value": "x"}}},
        "x",
        True,
    ),
]


@pytest.mark.parametrize(("spec", "answer", "passes"), CASES)
async def test_assertion(spec: dict[str, Any], answer: str, passes: bool) -> None:
    result = await check(ADAPTER.validate_python(spec), answer)
    assert result.passed is passes, result.detail
    assert result.detail


def test_every_type_has_a_passing_and_a_failing_case() -> None:
    types = {
        "equals",
        "contains",
        "regex",
        "is-json",
        "json-schema",
        "number-close",
        "word-count",
        "not",
    }
    for kind in types:
        outcomes = {passes for spec, _, passes in CASES if spec["type"] == kind}
        assert outcomes == {True, False}, kind


PALINDROME = {
    "type": "python-tests",
    "function": "is_palindrome",
    "cases": [
        {"args": ["A man, a plan, a canal: Panama"], "expect": True},
        {"args": ["ab"], "expect": False},
    ],
    "timeoutSeconds": 1.5,
}


@pytest.mark.parametrize(
    ("answer", "passes", "words"),
    [
        (
            "```python\ndef is_palindrome(s):\n"
            "    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n```",
            True,
            "all 2 cases passed",
        ),
        (
            "def is_palindrome(s):\n    return s == s[::-1]",
            False,
            'case 1 is_palindrome("A man, a plan, a canal: Panama"): returned false, expected true',
        ),
        ("def is_palindrome(s) return", False, "SyntaxError"),
        ("import sys\nsys.exit(0)", False, "no output"),
        ("def is_palindrome(s):\n    return 1 if s[0] == 'A' else 0", False, "returned 1"),
        ("def is_palindrome(s):\n    raise KeyError(s)", False, "raised KeyError"),
        ("def palindrome(s):\n    return True", False, "defines no function 'is_palindrome'"),
        ("def is_palindrome(s):\n    return object()", False, "TypeError"),
        ("while True:\n    pass", False, "timed out"),
    ],
)
async def test_python_tests(answer: str, passes: bool, words: str) -> None:
    result = await check(ADAPTER.validate_python(PALINDROME), answer, LocalSandbox())
    assert result.passed is passes, result.detail
    assert words in result.detail
    assert not result.refused


async def test_python_tests_expecting_an_exception_and_keyword_arguments() -> None:
    spec = {
        "type": "python-tests",
        "function": "div",
        "cases": [
            {"args": [6], "kwargs": {"by": 3}, "expect": 2.0},
            {"args": [1], "kwargs": {"by": 0}, "raises": "ZeroDivisionError"},
        ],
    }
    good = "def div(x, by):\n    return x / by"
    assert (await check(ADAPTER.validate_python(spec), good, LocalSandbox())).passed
    lax = "def div(x, by):\n    return x / by if by else None"
    result = await check(ADAPTER.validate_python(spec), lax, LocalSandbox())
    assert not result.passed
    assert "case 2 div(1, by=0): returned null, expected to raise ZeroDivisionError" in (
        result.detail
    )


async def test_python_tests_negated() -> None:
    spec = {
        "type": "not",
        "assert": {"type": "python-tests", "function": "f", "cases": [{"expect": 1}]},
    }
    result = await check(ADAPTER.validate_python(spec), "def f():\n    return 2", LocalSandbox())
    assert result.passed


@pytest.mark.parametrize("negated", [False, True])
async def test_python_tests_without_an_executor_are_refused_not_run(negated: bool) -> None:
    spec: dict[str, object] = {"type": "python-tests", "function": "f", "cases": [{"expect": 1}]}
    if negated:  # `not` of a check that did not run must not pass either
        spec = {"type": "not", "assert": spec}
    result = await check(ADAPTER.validate_python(spec), "def f():\n    return 1")
    assert (result.passed, result.refused) == (False, True)
    assert "--allow-code-execution" in result.detail


def test_fenced_extraction_and_numbers() -> None:
    assert fenced_or_all("text\n```py\ncode\n```\nmore") == "code"
    assert fenced_or_all("  plain  ") == "plain"
    assert parse_number("$12,345.50") == 12345.5
    assert parse_number("1,2,3x") is None


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "regex", "pattern": "("},
        {"type": "number-close", "value": 1, "pattern": "no group"},
        {"type": "json-schema", "schema": {"type": "object", "patternProperties": {}}},
        {"type": "equals", "value": "x", "typo": 1},
        {"type": "unknown"},
        {"type": "not"},
    ],
)
def test_bad_assertions_are_rejected_at_load(spec: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="validation error"):  # pydantic ValidationError
        ADAPTER.validate_python(spec)
