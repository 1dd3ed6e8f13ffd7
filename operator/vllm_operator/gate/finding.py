"""One thing the gate noticed, with how much it weighs, and which figure it is about; shared
by the gate's rule modules and by the benchmark, which measures open figures once more."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

Severity = Literal["fail", "error", "inconclusive", "note"]


@dataclass(frozen=True)
class Finding:
    """One thing the gate noticed."""

    severity: Severity
    text: str


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
