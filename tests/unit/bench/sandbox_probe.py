"""The wall tests' answers in the form the sandbox now takes: code plus calls.

Since issue 38 the sandbox never runs test code beside the answer: it calls a function the
answer defines and gives back what it returned. The wall tests (allow list, kernel,
attacks on bench) are about what answer code can *do*, not about verdicts, and their
answers report what they managed in module-level names (``WORKED``, ``CONTROL``, ...). Their
old test code becomes the body of one more function of the answer, ``probe()``, which
returns ``"held"`` when every assertion held; ``held`` reads that outcome back. What the
answer does to fake that outcome is its own business: these tests check effects from
outside as well.
"""

from __future__ import annotations

import textwrap

from vllm_operator.bench.sandbox.run import Call, Outcome, RunResult

PROBE = "sandbox_probe"
HELD = "held"


def probe(code: str, tests: str) -> tuple[str, list[Call]]:
    """``code`` with ``tests`` as the body of a function the sandbox calls once."""
    body = textwrap.indent(tests.strip() or "pass", "    ")
    return f"{code}\n\ndef {PROBE}():\n{body}\n    return {HELD!r}\n", [Call(PROBE)]


def held(result: RunResult) -> bool:
    """The probe ran and every assertion in it held."""
    return result.ran and result.outcomes == (Outcome(HELD),)


def why(result: RunResult) -> str:
    """What to show when ``held`` is not what a test expected."""
    return f"ran={result.ran} detail={result.detail!r} outcomes={result.outcomes!r}"
