"""Figures of a summary that contradict each other: refused by name, never judged.

A summary comes from a pod where the model's answers run, or from a file someone kept: it
may be forged or simply broken. Each figure may be valid alone and the whole still say two
things at once: a prompt class, concurrency level or load level listed twice (the gate
read the last), more tests passed than ran, failed test ids when every test passed. The gate
must not pick one reading: ``api.summary``'s validators call these checks, and a
contradiction is a ``SummaryContradiction`` (a ``ValueError``, so pydantic reports it as a
validation error) that ``judge`` turns into an Error verdict naming it and the operator into
an Error on the revision (a summary that does not parse is no verdict). Non-finite numbers
(``Infinity`` tok/s) are refused by ``api.base`` for every float.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from pydantic import ValidationError

from vllm_operator.errors import VLLMOperatorError


class SummaryContradiction(VLLMOperatorError, ValueError):
    """Figures of one summary that cannot all be true."""


class _Quality(Protocol):
    @property
    def passed(self) -> int: ...
    @property
    def total(self) -> int: ...
    @property
    def failed(self) -> list[str]: ...
    @property
    def failed_omitted(self) -> int: ...


class _Differential(Protocol):
    @property
    def compared(self) -> int: ...
    @property
    def identical(self) -> int: ...
    @property
    def baseline_passed(self) -> int: ...
    @property
    def still_passing(self) -> int: ...
    @property
    def differing(self) -> list[str]: ...
    @property
    def lost(self) -> list[str]: ...


def twice(values: Iterable[object], what: str) -> None:
    """Raise when ``values`` holds one value more than once (``what``: where)."""
    seen: set[object] = set()
    repeated: list[str] = []
    for value in values:
        if value in seen and str(value) not in repeated:
            repeated.append(f"{value:g}" if isinstance(value, float) else str(value))
        seen.add(value)
    if repeated:
        raise SummaryContradiction(
            f"{what} lists {', '.join(repeated[:3])} more than once (which one was measured?)"
        )


def quality(figures: _Quality) -> None:
    """Passed within total, and failed ids only for tests that did not pass."""
    if figures.passed > figures.total:
        raise SummaryContradiction(
            f"quality: passed {figures.passed} is above total {figures.total}"
        )
    listed = len(figures.failed) + figures.failed_omitted
    if listed > figures.total - figures.passed:
        raise SummaryContradiction(
            f"quality: {listed} failed tests listed (failed and failedOmitted) but passed "
            f"{figures.passed} of {figures.total} leaves {figures.total - figures.passed}"
        )
    twice(figures.failed, "quality.failed")


def differential(figures: _Differential) -> None:
    """Each count within the count it is a share of."""
    bounds = [
        ("identical", figures.identical, "compared", figures.compared),
        ("baselinePassed", figures.baseline_passed, "compared", figures.compared),
        ("stillPassing", figures.still_passing, "baselinePassed", figures.baseline_passed),
        (
            "differing ids",
            len(figures.differing),
            "compared - identical",
            figures.compared - figures.identical,
        ),
        (
            "lost ids",
            len(figures.lost),
            "baselinePassed - stillPassing",
            figures.baseline_passed - figures.still_passing,
        ),
    ]
    for name, value, of, most in bounds:
        if value > most:
            raise SummaryContradiction(f"quality.differential: {name} {value} is above {of} {most}")


def contradiction_in(exc: ValidationError) -> str | None:
    """The first contradiction or non-finite figure among ``exc``'s errors, as a reason
    (None when the summary failed validation for another cause)."""
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        if error["type"] == "finite_number":
            return f"{where} is {error['input']!r}: not a finite number, not a measurement"
        if isinstance(error.get("ctx", {}).get("error"), SummaryContradiction):
            return f"the figures contradict each other: {error['ctx']['error']}"
    return None
