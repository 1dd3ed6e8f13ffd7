"""What a benchmark run measured so far, and the callbacks it is driven by.

``bench.runner`` (the study's phases) and ``bench.load.sweep`` (a workload's load sweep) both
fill a ``RunState``; the report is built from it, complete or not. The types live apart from
both so neither imports the other for them (``tests/unit/test_import_cycles.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from vllm_operator.bench.http.request import RequestRecord
from vllm_operator.bench.load.send import LoadRun
from vllm_operator.bench.quality.run import SuiteOutcome
from vllm_operator.errors import VLLMOperatorError
from vllm_operator.gate.budget import RESERVE_FRACTION, fits_budget
from vllm_operator.gate.finding import FigureKey

Clock = Callable[[], float]

OpenFigures = Callable[["RunState"], set[FigureKey]]
"""The figures still undecided on what was measured so far (``gate.open_figures``)."""

Breached = Callable[["RunState", float], bool]
"""Did the candidate break an SLO limit at this load level (``gate.slo.breached``)?"""


class Progress(Protocol):
    """Where progress goes (terminal line, JSON lines, nowhere)."""

    def emit(self, event: str, **fields: Any) -> None: ...


class NoProgress:
    """Progress for in-process callers that want none."""

    def emit(self, event: str, **fields: Any) -> None:
        return None


class Aborted(VLLMOperatorError):
    """The server failed too many requests in a row; the run stops early."""


@dataclass
class SettlePass:
    """One warm-up pass on one server: its figures and whether they matched the pass before."""

    number: int
    latency_ms: dict[str, float]
    """Prompt class -> median end-to-end latency of the pass's requests."""
    tokens_per_second: dict[int, float]
    """Concurrency level -> aggregate tokens/s over the pass's steady window."""
    seconds: float
    started_unix: float = 0.0
    """Wall-clock start, to match against a server's log (e.g. vLLM's JIT warnings)."""
    agreed: bool = False
    """True when every figure was within the tolerance of the previous pass's."""


@dataclass
class ServerRun:
    """What one server (the candidate, or the baseline of a paired run) measured."""

    role: str
    url: str
    server_version: str | None = None
    preflight: RequestRecord | None = None
    warmups: list[RequestRecord] = field(default_factory=list)
    latency: dict[str, list[list[RequestRecord]]] = field(default_factory=dict)
    """Prompt class -> one list of records per trial."""
    concurrency: dict[int, list[list[list[RequestRecord]]]] = field(default_factory=dict)
    """Concurrency level -> one list of streams (each a list of records) per trial."""
    quality: SuiteOutcome | None = None
    warmed: set[str] = field(default_factory=set)
    settle: list[SettlePass] = field(default_factory=list)
    """The settling warm-up's passes, in order."""
    load: list[LoadRun] = field(default_factory=list)
    """A workload's load sweep (``bench.load.send``): one run per level and trial, in order."""
    load_warmup: list[LoadRun] = field(default_factory=list)
    """Its discarded warm-up run(s)."""
    consecutive_failures: int = 0
    """Its requests that failed in a row, last first (the runner aborts at a few)."""

    def load_runs(self, level: float) -> list[LoadRun]:
        """The measured runs at ``level`` in trial order."""
        return [r for r in self.load if r.level == level]

    def records(self) -> Iterator[RequestRecord]:
        if self.preflight is not None:
            yield self.preflight
        yield from self.warmups
        for load_run in (*self.load_warmup, *self.load):
            yield from load_run.records
        for trials in self.latency.values():
            for recs in trials:
                yield from recs
        for level_trials in self.concurrency.values():
            for streams in level_trials:
                for stream in streams:
                    yield from stream
        if self.quality is not None:
            yield from (o.record for o in self.quality.outcomes)

    def errors(self) -> Counter[str]:
        counts = Counter(r.error for r in self.records() if r.error is not None)
        if self.quality is not None and self.quality.refused:
            counts["code_refused"] += self.quality.refused
        return counts


@dataclass(frozen=True)
class RoundRecord:
    """One round of trials: its number, the figures it measured, its duration."""

    number: int
    classes: tuple[str, ...]
    levels: tuple[int, ...]
    seconds: float
    started_unix: float = 0.0
    """Wall-clock start, to match against a server's log (e.g. vLLM's JIT warnings)."""


@dataclass
class RunState:
    """Everything measured so far; the report is built from it, complete or not."""

    started: float
    wall_started: float
    candidate: ServerRun
    baseline: ServerRun | None = None
    finished: float | None = None
    deadline_hit: bool = False
    aborted: str | None = None
    settled: bool | None = None
    """None: no settling warm-up; else whether it ended with agreeing passes."""
    rounds: list[RoundRecord] = field(default_factory=list)
    """Every measured round: which figures it measured and how long it took."""
    load_stopped_at: float | None = None
    """The load level where the sweep ended early (an SLO broken on the candidate)."""
    closed_by_failure: bool = False
    """Set by the gate's ``open_figures`` when no more trials are taken because a figure
    already failed for good (the progress line then says so, not "every figure decided")."""

    @property
    def server_version(self) -> str | None:
        return self.candidate.server_version

    @property
    def servers(self) -> tuple[ServerRun, ...]:
        return (self.candidate,) if self.baseline is None else (self.candidate, self.baseline)

    def records(self) -> Iterator[RequestRecord]:
        for server in self.servers:
            yield from server.records()

    def within_budget(
        self, now: float, estimate: float, deadline: float, reserve: float = RESERVE_FRACTION
    ) -> bool:
        """Would ``estimate`` more seconds from ``now`` end before the time budget: the
        ``deadline`` less ``reserve`` of it (extra rounds of the study and the sweep;
        ``gate.budget.reserve_for``)?"""
        return fits_budget(now - self.started, estimate, deadline, reserve)

    def errors(self) -> Counter[str]:
        """The candidate's failed requests by class, plus ``deadline`` if it was reached."""
        counts = self.candidate.errors()
        if self.deadline_hit:
            counts["deadline"] += 1
        return counts
