"""Running a quality suite: one request per test, then its assertions on the answer.

Quality requests stream like the others (so a broken stream is caught and counted here
too) but without ``ignore_eos``: the model decides where its answer ends. Tests run one at
a time, because batch composition can change a real model's greedy output and the suite
should be as repeatable as the server allows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm_operator.bench.assertions import Check, check
from vllm_operator.bench.pyexec import Executor
from vllm_operator.bench.request import ChatRequest, RequestRecord
from vllm_operator.bench.suite import QualityTest, Suite


@dataclass
class TestOutcome:
    """One quality test: its answer, each assertion's check, and the verdict."""

    test: QualityTest
    record: RequestRecord
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.record.ok and bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def refused(self) -> int:
        """Checks that could not run (python-tests without a sandbox)."""
        return sum(1 for c in self.checks if c.refused)

    @property
    def reason(self) -> str:
        if not self.record.ok:
            return f"request failed ({self.record.error}): {self.record.detail}"
        refused = [c.detail for c in self.checks if c.refused]
        if refused:
            return f"not run: {refused[0]}"
        failing = [c.detail for c in self.checks if not c.passed]
        return "; ".join(failing) if failing else "all assertions passed"


def request_of(test: QualityTest) -> ChatRequest:
    """The chat request for a test: temperature 0, the model's own stop."""
    return ChatRequest(
        prompt=test.prompt, max_tokens=test.max_tokens, ignore_eos=False, system=test.system
    )


async def judge(
    test: QualityTest, record: RequestRecord, executor: Executor | None = None
) -> TestOutcome:
    """Evaluate every assertion of ``test`` on the answer in ``record``."""
    outcome = TestOutcome(test, record)
    if record.ok:
        for assertion in test.assert_:
            outcome.checks.append(await check(assertion, record.text, executor))
    return outcome


@dataclass
class SuiteOutcome:
    """A suite's run (possibly cut short by the deadline)."""

    suite: Suite
    outcomes: list[TestOutcome] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for o in self.outcomes if o.passed)

    @property
    def refused(self) -> int:
        """Tests with a check that could not run (counted as ``code_refused``)."""
        return sum(1 for o in self.outcomes if o.refused)

    def failed_ids(self, first: tuple[str, ...] = ()) -> list[str]:
        """Failed or unrun test ids, ``first`` (the must-pass ids) leading, then suite order."""
        done = {o.test.id: o.passed for o in self.outcomes}
        failed = [t.id for t in self.suite.tests if not done.get(t.id, False)]
        return sorted(failed, key=lambda i: (i not in first, failed.index(i)))
