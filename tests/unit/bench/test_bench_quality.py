"""The quality suite's concurrency (bounded, suite order kept) and its differential.

``run_suite`` is driven with a scripted ``ask`` whose answers the test releases one by one
(asyncio events, no sleeps): which requests are in flight at any moment is then exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from vllm_operator.bench.http.request import RequestRecord
from vllm_operator.bench.quality import run as quality
from vllm_operator.bench.quality.run import (
    SuiteOutcome,
    differential,
    judge,
    run_suite,
)
from vllm_operator.bench.quality.suite import QualityTest, Suite, parse_suite


def suite_of(n: int, name: str = "s", max_tokens: list[int] | None = None) -> Suite:
    sizes = max_tokens or [512] * n
    lines = "\n".join(
        f'  - {{id: t{i}, category: c, prompt: "p{i}", maxTokens: {sizes[i]}, '
        f'assert: [{{type: equals, value: "a{i}"}}]}}'
        for i in range(n)
    )
    return parse_suite(f"name: {name}\ntests:\n{lines}\n", "s.yaml")


class Scripted:
    """An ``ask`` that holds every answer until the test releases it."""

    def __init__(self) -> None:
        self.in_flight: set[str] = set()
        self.started: list[str] = []
        self.finished: list[str] = []
        self.most = 0
        self.release: dict[str, asyncio.Event] = {}
        self.tick = asyncio.Event()

    async def __call__(self, test: QualityTest, into: list[RequestRecord]) -> RequestRecord:
        record = RequestRecord(scheduled_at=0.0)
        into.append(record)
        event = self.release.setdefault(test.id, asyncio.Event())
        self.in_flight.add(test.id)
        self.started.append(test.id)
        self.most = max(self.most, len(self.in_flight))
        self.tick.set()
        try:
            await event.wait()
        except asyncio.CancelledError:
            record.fail("timeout", "cancelled")  # as ``request.send`` marks it
            raise
        finally:
            self.in_flight.discard(test.id)
            self.tick.set()
        record.text = "a" + test.id[1:]
        return record

    def done(self, outcome: quality.TestOutcome) -> None:
        self.finished.append(outcome.test.id)
        self.tick.set()

    async def until(self, predicate: Callable[[], bool]) -> None:
        async def wait() -> None:
            while not predicate():
                self.tick.clear()
                await self.tick.wait()

        await asyncio.wait_for(wait(), 5)

    def answer(self, test_id: str) -> None:
        self.release.setdefault(test_id, asyncio.Event()).set()


async def test_at_most_n_in_flight_started_in_suite_order_kept_in_suite_order() -> None:
    suite = suite_of(10)
    ask = Scripted()
    outcome = SuiteOutcome(suite)
    done = ask.finished
    task = asyncio.create_task(run_suite(outcome, ask, concurrency=4, done=ask.done))
    await ask.until(lambda: len(ask.in_flight) == 4)
    assert ask.started == ["t0", "t1", "t2", "t3"]  # four at once, the first four
    # answers arrive out of order; each frees a slot for the next test in suite order
    for test_id in ["t3", "t1", "t2", "t0", "t6", "t5", "t4", "t9", "t8", "t7"]:
        ask.answer(test_id)
        await ask.until(lambda t=test_id: t in done)
        assert len(ask.in_flight) <= 4
    await asyncio.wait_for(task, 5)
    assert ask.most == 4
    assert ask.started == [f"t{i}" for i in range(10)]
    assert done[:4] == ["t3", "t1", "t2", "t0"]  # completion order ...
    assert [o.test.id for o in outcome.outcomes] == [f"t{i}" for i in range(10)]  # ... not kept
    assert outcome.passed == 10


async def test_results_stay_in_suite_order_while_answers_are_still_missing() -> None:
    ask = Scripted()
    outcome = SuiteOutcome(suite_of(4))
    task = asyncio.create_task(run_suite(outcome, ask, concurrency=4, done=ask.done))
    await ask.until(lambda: len(ask.in_flight) == 4)
    ask.answer("t2")
    ask.answer("t0")
    await ask.until(lambda: sorted(ask.finished) == ["t0", "t2"])
    assert [o.test.id for o in outcome.outcomes] == ["t0", "t2"]
    assert outcome.failed_ids() == ["t1", "t3"]
    ask.answer("t1")
    ask.answer("t3")
    await asyncio.wait_for(task, 5)
    assert [o.test.id for o in outcome.outcomes] == ["t0", "t1", "t2", "t3"]


async def test_the_longest_answers_start_first_results_stay_in_suite_order() -> None:
    ask = Scripted()
    outcome = SuiteOutcome(suite_of(5, max_tokens=[16, 384, 16, 128, 384]))
    task = asyncio.create_task(run_suite(outcome, ask, concurrency=2, done=ask.done))
    await ask.until(lambda: len(ask.in_flight) == 2)
    assert ask.in_flight == {"t1", "t4"}  # both 384-token tests
    for test_id in ["t4", "t3", "t1", "t0", "t2"]:
        ask.answer(test_id)
        await ask.until(lambda t=test_id: t in ask.finished)
    await asyncio.wait_for(task, 5)
    assert ask.started == ["t1", "t4", "t3", "t0", "t2"]
    assert [o.test.id for o in outcome.outcomes] == ["t0", "t1", "t2", "t3", "t4"]


async def test_one_at_a_time_keeps_suite_order_whatever_the_sizes() -> None:
    ask = Scripted()
    outcome = SuiteOutcome(suite_of(3, max_tokens=[16, 384, 128]))
    task = asyncio.create_task(run_suite(outcome, ask, concurrency=1, done=ask.done))
    for test_id in ["t0", "t1", "t2"]:
        await ask.until(lambda t=test_id: ask.in_flight == {t})
        ask.answer(test_id)
    await asyncio.wait_for(task, 5)
    assert ask.started == ["t0", "t1", "t2"]


async def test_concurrency_one_is_one_at_a_time() -> None:
    ask = Scripted()
    outcome = SuiteOutcome(suite_of(5))
    task = asyncio.create_task(run_suite(outcome, ask, concurrency=1))
    for i in range(5):
        await ask.until(lambda i=i: ask.started == [f"t{j}" for j in range(i + 1)])
        assert ask.in_flight == {f"t{i}"}
        ask.answer(f"t{i}")
    await asyncio.wait_for(task, 5)
    assert ask.most == 1


async def test_a_large_suite_opens_no_more_than_the_bound() -> None:
    ask = Scripted()
    outcome = SuiteOutcome(suite_of(300))
    task = asyncio.create_task(run_suite(outcome, ask, concurrency=8))
    for i in range(300):
        await ask.until(lambda i=i: f"t{i}" in ask.in_flight)
        ask.answer(f"t{i}")
    await asyncio.wait_for(task, 5)
    assert ask.most == 8
    assert outcome.passed == 300


@pytest.mark.parametrize("bad", [0, -1, 65])
async def test_concurrency_out_of_range_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match=r"quality concurrency must be 1\.\.64"):
        await run_suite(SuiteOutcome(suite_of(1)), Scripted(), concurrency=bad)


async def test_an_aborting_request_starts_no_further_test_and_lets_others_finish() -> None:
    class Abort(Exception):
        pass

    ask = Scripted()

    async def failing(test: QualityTest, into: list[RequestRecord]) -> RequestRecord:
        if test.id == "t1":
            await ask.until(lambda: len(ask.in_flight) == 2)  # t0 and t2 in flight
            raise Abort
        return await ask(test, into)

    outcome = SuiteOutcome(suite_of(8))
    task = asyncio.create_task(run_suite(outcome, failing, concurrency=3))
    await ask.until(lambda: ask.in_flight == {"t0", "t2"})
    ask.answer("t0")
    ask.answer("t2")
    with pytest.raises(Abort):
        await asyncio.wait_for(task, 5)
    assert ask.started == ["t0", "t2"]  # nothing after the abort
    assert [o.test.id for o in outcome.outcomes] == ["t0", "t2"]


async def test_cancelled_run_keeps_in_flight_records_as_timeouts_in_order() -> None:
    ask = Scripted()
    outcome = SuiteOutcome(suite_of(6))
    task = asyncio.create_task(run_suite(outcome, ask, concurrency=3))
    await ask.until(lambda: len(ask.in_flight) == 3)
    ask.answer("t1")
    await ask.until(lambda: ask.in_flight == {"t0", "t2", "t3"})
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [o.test.id for o in outcome.outcomes] == ["t0", "t1", "t2", "t3"]
    assert [o.record.error for o in outcome.outcomes] == ["timeout", None, "timeout", "timeout"]
    assert outcome.failed_ids() == ["t0", "t2", "t3", "t4", "t5"]


async def outcome_of(suite: Suite, answers: dict[str, str | None]) -> SuiteOutcome:
    """A finished run: ``None`` is a failed request, a missing id a test never run."""
    out = SuiteOutcome(suite)
    for test in suite.tests:
        if test.id not in answers:
            continue
        record = RequestRecord(scheduled_at=0.0)
        text = answers[test.id]
        if text is None:
            record.fail("http_5xx", "HTTP 500")
        else:
            record.text = text
        out.outcomes.append(await judge(test, record))
    return out


async def test_differential_per_test() -> None:
    suite = suite_of(6)
    base = await outcome_of(
        suite, {"t0": "a0", "t1": "a1", "t2": "a2", "t3": "wrong", "t4": "a4", "t5": "a5"}
    )
    cand = await outcome_of(
        suite,
        {"t0": "a0", "t1": "a1", "t2": " a2", "t3": "wrong", "t4": "nope", "t5": None},
    )
    diff = differential(cand, base)
    assert diff is not None
    rows = {t.id: (t.identical, t.baseline_passed, t.candidate_passed) for t in diff.tests}
    assert rows == {
        "t0": (True, True, True),
        "t1": (True, True, True),
        "t2": (False, True, True),  # equals trims, so it passes, but the text differs
        "t3": (True, False, False),  # the same wrong answer is identical
        "t4": (False, True, False),
        "t5": (False, True, False),  # no answer: differing, not passed
    }
    assert (diff.compared, diff.identical, diff.baseline_passed, diff.still_passing) == (
        6,
        3,
        5,
        3,
    )
    assert diff.differing == ["t2", "t4", "t5"]
    assert diff.lost == ["t4", "t5"]


async def test_differential_counts_unrun_and_failed_on_both_sides_as_differing() -> None:
    suite = suite_of(3)
    base = await outcome_of(suite, {"t0": None, "t1": "a1"})  # t2 never ran (deadline)
    cand = await outcome_of(suite, {"t0": None, "t1": "a1", "t2": "a2"})
    diff = differential(cand, base)
    assert diff is not None
    assert [t.identical for t in diff.tests] == [False, True, False]
    assert diff.baseline_passed == 1


async def test_no_differential_between_different_suites() -> None:
    a = await outcome_of(suite_of(3, "one"), {})
    assert differential(a, await outcome_of(suite_of(3, "two"), {})) is None
    assert differential(a, await outcome_of(suite_of(4, "one"), {})) is None
