"""Judging a python-tests check: bench compares what the answer's function gave back.

The verdict of a code check is decided here, in bench, from data: the sandboxed process
that ran the answer received only the function's name and each case's arguments, and sent
back what each call returned (a JSON value) or raised (``bench.sandbox.run.Outcome``). The
expected values never left this process, so nothing the answer does in its own (it can
print, exit 0, read its memory, load native code) can do more than change its own outputs.

Values are compared as JSON, strictly: ``true`` is not ``1``, ``1`` equals ``1.0``, a list
equals a list of equal items in order, an object has the same keys with equal values.
"""

from __future__ import annotations

import json

from vllm_operator.bench.quality.suite import Case, PythonTests
from vllm_operator.bench.sandbox.run import Call, Outcome, RunResult

SHOWN_CHARS = 80


def calls(assertion: PythonTests) -> list[Call]:
    """What the sandbox gets: the function's name and each case's inputs, nothing else."""
    return [Call(assertion.function, tuple(c.args), dict(c.kwargs)) for c in assertion.cases]


def same_json(got: object, want: object) -> bool:
    """Equal as JSON values, with ``bool`` apart from numbers (``True == 1`` in Python)."""
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        return got == want
    if isinstance(got, list) and isinstance(want, list):
        if len(got) != len(want):
            return False
        return all(same_json(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(same_json(got[k], want[k]) for k in want)
    return type(got) is type(want) and got == want


def mismatch(case: Case, got: Outcome | None) -> str | None:
    """Why ``got`` does not meet ``case`` (None when it does)."""
    if got is None:
        return "no output (the run stopped before this call)"
    if case.raises is not None:
        if got.raised is None:
            return f"returned {_shown(got.value)}, expected to raise {case.raises}"
        if got.raised.split(":", 1)[0] != case.raises:
            return f"raised {_short(got.raised)}, expected {case.raises}"
        return None
    if got.raised is not None:
        return f"raised {_short(got.raised)}, expected {_shown(case.expect)}"
    if not same_json(got.value, case.expect):
        return f"returned {_shown(got.value)}, expected {_shown(case.expect)}"
    return None


def judge(assertion: PythonTests, result: RunResult) -> tuple[bool, str]:
    """(passed, detail) of a check whose code ran (``result.ran``)."""
    failed = []
    for number, case in enumerate(assertion.cases, start=1):
        got = result.outcomes[number - 1] if number <= len(result.outcomes) else None
        problem = mismatch(case, got)
        if problem is not None:
            failed.append(f"case {number} {_call(assertion.function, case)}: {problem}")
    total = len(assertion.cases)
    if not failed:
        return True, f"all {total} cases passed"
    detail = f"{len(failed)} of {total} cases failed; {failed[0]}"
    if result.detail:
        detail += f" [{_short(result.detail, 300)}]"
    return False, detail


def _call(function: str, case: Case) -> str:
    parts = [_shown(a) for a in case.args] + [f"{k}={_shown(v)}" for k, v in case.kwargs.items()]
    return _short(f"{function}({', '.join(parts)})")


def _shown(value: object) -> str:
    return _short(json.dumps(value, ensure_ascii=False))


def _short(text: str, limit: int = SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
