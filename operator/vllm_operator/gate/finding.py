"""One thing the gate noticed: how much it weighs and, for a judged figure, what was decided.

Every rule module (limits, ``gate.regression``, ``gate.differential``, ``gate.slo``)
produces ``Finding`` values; ``gate.verdict`` orders them, marks the ones that decided the
outcome and renders them for the CLI, the status, Events and the report page. A rule that
judges a *figure* (a median latency, a tokens/s level, an SLO percentile at a load level)
fills the figure fields so that every view can say, per figure, what was decided and why
the run stopped where it did; any other finding (a failed request, a missing baseline, a
note) keeps them empty.

Fields (all but ``severity`` and ``text`` optional, so a rule fills what it knows):

- ``severity``: how much it weighs. "fail" and "error" end the gate Failed / Error,
  "inconclusive" Inconclusive, "note" is context.
- ``text``: the reason in full, as one line (figures, interval, limit, what was decided).
- ``figure``: the judged figure as people name it ("2 streams tok/s", "short prompts median
  latency", "TTFT p99 at 10 req/s"); None for a finding that is not about one figure.
- ``outcome``: "beyond" (decided: beyond its limit with confidence), "within" (decided:
  within it), "undecided" (the interval straddles the limit). ``gate.verdict`` derives it
  from the severity for a finding with a figure key that left it None (fail -> beyond,
  note -> within, inconclusive -> undecided), so a judge may leave it to the verdict.
- ``stop``: why an undecided figure was not measured further: "budget" (the run's time
  budget ran out before another round), "failed-first" (another figure had already failed
  for good, so more trials could not change the outcome), "plan-exhausted" (the trial plan's
  ``maxTrials`` were all run, or the run had a fixed number of trials). A judge sets
  "early" when it only knows the run stopped before ``maxTrials``; ``gate.verdict`` resolves
  it to "budget" or "failed-first" from the other findings.
- ``deciding``: set by ``gate.verdict`` only: this finding decided the outcome (for Failed,
  the fails; for Error, the errors; for Inconclusive, the inconclusive ones; for Passed,
  every figure judged within its limit). Views show deciding findings in full and first,
  the rest in a few words (``brief``).
- ``comparison``: the figure's numbers, for tables and the interval chart (``Comparison``).
- ``brief``: the reason in a few words (figure, change, interval, limit, outcome), for the
  status line and for the findings that did not decide; empty means ``text`` is brief.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

Severity = Literal["fail", "error", "inconclusive", "note"]
FigureOutcome = Literal["beyond", "within", "undecided"]
StopReason = Literal["budget", "failed-first", "plan-exhausted", "early"]

STOP_TEXT: dict[StopReason, str] = {
    "budget": "stopped early: the time budget ran out before another trial",
    "failed-first": "stopped early: another figure had already failed, so more trials "
    "could not change the outcome",
    "plan-exhausted": "every trial the plan allows was run",
    "early": "stopped early",
}
"""How each stop reason reads in a reason and on the page."""

STOP_BRIEF: dict[StopReason, str] = {
    "budget": "time budget ran out",
    "failed-first": "another figure failed first",
    "plan-exhausted": "every allowed trial run",
    "early": "stopped early",
}
"""The same in a few words, for brief reasons and headlines."""

BRIEF: dict[FigureOutcome, str] = {
    "beyond": "beyond the limit",
    "within": "within the limit",
    "undecided": "undecided",
}
"""How each outcome reads in a brief reason."""


@dataclass(frozen=True)
class Comparison:
    """One judged figure's numbers: the candidate's value, what it is judged against, the
    relative change with its interval, and the limit on that change (all fractions: -0.2 is
    20% lower). ``baseline`` is the baseline's value, or the absolute limit itself when the
    figure is judged against a limit (an SLO percentile); ``higher_is_worse`` says which way
    the limit points."""

    candidate: float
    baseline: float
    unit: str
    change: float
    low: float
    high: float
    limit: float
    higher_is_worse: bool
    trials: int
    against: Literal["baseline", "limit"] = "baseline"


@dataclass(frozen=True)
class Finding:
    """One thing the gate noticed (the module docstring describes every field)."""

    severity: Severity
    text: str
    figure: str | None = None
    outcome: FigureOutcome | None = None
    stop: StopReason | None = None
    deciding: bool = False
    comparison: Comparison | None = None
    brief: str = ""

    @property
    def short(self) -> str:
        """The reason in a few words (``brief``, else ``text``)."""
        return self.brief or self.text


class FigureKey(NamedTuple):
    """One figure the benchmark can measure once more: a prompt class's latency, a
    concurrency level's throughput, or a whole load level of a sweep."""

    kind: Literal["latency", "concurrency", "load"]
    name: str
    """The prompt class, or the level as people read it (``f"{level:g}"``: 20.0 -> "20")."""

    @classmethod
    def latency(cls, prompt_class: str) -> FigureKey:
        return cls("latency", prompt_class)

    @classmethod
    def concurrency(cls, streams: int) -> FigureKey:
        return cls("concurrency", str(streams))

    @classmethod
    def load(cls, level: float) -> FigureKey:
        return cls("load", f"{level:g}")

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True)
class Judged:
    """One finding, and whether more trials of its figure could still decide it."""

    finding: Finding
    figure: FigureKey | None = None
    undecided: bool = False
