"""Running a quality suite: one request per test, then its assertions on the answer.

Quality requests stream like the others (so a broken stream is caught and counted here
too) but without ``ignore_eos``: the model decides where its answer ends.

**Concurrency.** Tests are sent ``concurrency`` at a time (``--quality-concurrency``,
default ``DEFAULT_CONCURRENCY``), the longest first (``start_order``: by ``maxTokens``, then
suite order), and the outcomes are kept in suite order whatever order the answers arrive
in. Sequentially the built-in suite took 123 s on a real eager server, most of it one long
answer after another; started in suite order, its longest test (the last) ran alone at the
end. The price: at temperature 0 a real model's answer can still change with the batch it
was computed in (vLLM's kernels are not batch-invariant unless the server runs with
``VLLM_BATCH_INVARIANT=1``, https://docs.vllm.ai/en/stable/features/batch_invariance/), so
with several tests in flight an answer may differ from run to run, and between candidate
and baseline, for reasons that are not the revision's. ``concurrency`` 1 restores one test
at a time, the strictest repeatability the server allows; use it (or batch-invariant
servers) when ``minIdenticalPercent`` demands identical answers. Checks run one at a time
even when requests overlap: a python-tests sandbox run kills every leftover process of its
uid.

**Differential** (``differential``): the same prompts, greedy, to the candidate and to the
paired baseline, compared test by test from the answers the suite already collected on both
(no extra requests): identical answer or not, and whether each side passed the assertions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from vllm_operator.bench.http.request import ChatRequest, RequestRecord
from vllm_operator.bench.quality.assertions import Check, check
from vllm_operator.bench.quality.suite import QualityTest, Suite
from vllm_operator.bench.sandbox.executors import Executor

DEFAULT_CONCURRENCY = 4
"""Quality tests in flight at once unless told otherwise (1: one at a time)."""
MAX_CONCURRENCY = 64
"""Most quality tests in flight at once: a long suite never opens more connections."""

Ask = Callable[[QualityTest, list[RequestRecord]], Awaitable[RequestRecord]]
"""Sends one test's request; appends its record to the list before sending it."""


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


async def run_suite(
    outcome: SuiteOutcome,
    ask: Ask,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    executor: Executor | None = None,
    done: Callable[[TestOutcome], None] | None = None,
) -> None:
    """Ask and judge every test of ``outcome.suite``, at most ``concurrency`` in flight.

    Tests start in ``start_order`` and ``outcome.outcomes`` stays in suite order as answers
    arrive (a test not yet answered is simply absent). When one request raises (the run
    aborts) no further test starts; the tests already in flight finish first. When the run
    is cancelled (the deadline), every test in flight keeps its record, already marked
    ``timeout``, so it is counted like any other request cut by the deadline.
    """
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"quality concurrency must be 1..{MAX_CONCURRENCY}, not {concurrency}")
    tests = outcome.suite.tests
    order = start_order(tests, concurrency)
    slots: list[TestOutcome | None] = [None] * len(tests)
    holders: list[list[RequestRecord]] = [[] for _ in tests]
    judging = asyncio.Lock()
    taken = 0
    stopped = False

    def publish() -> None:
        outcome.outcomes[:] = [s for s in slots if s is not None]

    async def worker() -> None:
        nonlocal taken, stopped
        while taken < len(tests) and not stopped:
            i = order[taken]
            taken += 1
            try:
                record = await ask(tests[i], holders[i])
            except BaseException:
                stopped = True
                raise
            async with judging:
                result = await judge(tests[i], record, executor)
            slots[i] = result
            publish()
            if done is not None:
                done(result)

    try:
        # Not a TaskGroup: when one request gives up (the run aborts), the others must
        # finish their own answer rather than be cancelled and miscounted as timeouts.
        results = await asyncio.gather(
            *(worker() for _ in range(min(concurrency, len(tests)))), return_exceptions=True
        )
    finally:
        for i, holder in enumerate(holders):
            if slots[i] is None and holder:
                slots[i] = TestOutcome(tests[i], holder[0])
        publish()
    for result in results:
        if isinstance(result, BaseException):
            raise result


def start_order(tests: list[QualityTest], concurrency: int) -> list[int]:
    """Indices of ``tests`` in the order they start (their outcomes stay in suite order).

    One at a time: suite order. Otherwise the largest ``maxTokens`` first, ties in suite
    order, so the longest answers do not start last and run alone at the end: the suite's
    wall time stays near its total work divided by ``concurrency``.
    """
    indices = list(range(len(tests)))
    if concurrency == 1:
        return indices
    return sorted(indices, key=lambda i: -tests[i].max_tokens)


@dataclass(frozen=True)
class Compared:
    """One test answered by both servers: the same answer or not, and who passed."""

    id: str
    identical: bool
    baseline_passed: bool
    candidate_passed: bool


@dataclass(frozen=True)
class Differential:
    """The candidate's answers against the paired baseline's, test by test, in suite order.

    A test either server did not answer (failed request, deadline) counts as differing and
    as not passed on that side. ``identical`` compares the answer texts character for
    character: the same prompt at temperature 0 gives the same text on an unchanged
    revision (modulo batch composition, see the module docstring).
    """

    tests: tuple[Compared, ...]

    @property
    def compared(self) -> int:
        return len(self.tests)

    @property
    def identical(self) -> int:
        return sum(1 for t in self.tests if t.identical)

    @property
    def baseline_passed(self) -> int:
        return sum(1 for t in self.tests if t.baseline_passed)

    @property
    def still_passing(self) -> int:
        """Tests the baseline passed that the candidate passed too."""
        return sum(1 for t in self.tests if t.baseline_passed and t.candidate_passed)

    @property
    def differing(self) -> list[str]:
        """Ids whose answers differ, in suite order."""
        return [t.id for t in self.tests if not t.identical]

    @property
    def lost(self) -> list[str]:
        """Ids the baseline passed and the candidate did not, in suite order."""
        return [t.id for t in self.tests if t.baseline_passed and not t.candidate_passed]


def differential(candidate: SuiteOutcome, baseline: SuiteOutcome) -> Differential | None:
    """Compare two runs of one suite; None when they ran different suites."""
    if candidate.suite.name != baseline.suite.name or candidate.suite.ids != baseline.suite.ids:
        return None
    mine = {o.test.id: o for o in candidate.outcomes}
    theirs = {o.test.id: o for o in baseline.outcomes}
    rows = []
    for test in candidate.suite.tests:
        a, b = mine.get(test.id), theirs.get(test.id)
        same = (
            a is not None
            and b is not None
            and a.record.ok
            and b.record.ok
            and a.record.text == b.record.text
        )
        rows.append(
            Compared(
                id=test.id,
                identical=same,
                baseline_passed=b is not None and b.passed,
                candidate_passed=a is not None and a.passed,
            )
        )
    return Differential(tuple(rows))
