"""Which two revisions the page puts on the same axes: the candidate and its baseline.

The baseline is the report's own (the twin or ``--baseline-url`` server measured in the same
run, interleaved with the candidate) unless ``--baseline OTHER.json`` names another run, whose
candidate then becomes the baseline: "this run against last week's". Comparing a load sweep
with a study run would put different figures on one axis, so that is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.bench.page.view import LoadRun, Report, ReportError, Role, Server


@dataclass(frozen=True)
class Side:
    """One revision as drawn: its figures, its load runs (if any) and where they come from."""

    role: Role
    server: Server
    runs: tuple[LoadRun, ...]
    source: str  # plain text; escaped where it is shown

    @property
    def label(self) -> str:
        """The legend's name: the role and the server's version, as people tell them apart."""
        version = self.server.server_version
        return f"{self.role} ({version})" if version else self.role


@dataclass(frozen=True)
class Comparison:
    report: Report
    candidate: Side
    baseline: Side | None
    baseline_file: str | None  # set when the baseline is another run's report

    @property
    def sides(self) -> tuple[Side, ...]:
        return (self.candidate,) if self.baseline is None else (self.candidate, self.baseline)


def _runs(report: Report, role: Role) -> tuple[LoadRun, ...]:
    if report.load is None:
        return ()
    return tuple(r for r in report.load.runs if r.server == role)


def compare(report: Report, other: Report | None = None, other_name: str = "") -> Comparison:
    """The candidate of ``report`` against its paired baseline, or against ``other``'s
    candidate when given (``--baseline``)."""
    version = report.server_version or "unknown version"
    runs = _runs(report, "candidate")
    candidate = Side("candidate", report, runs, f"{report.config.url} ({version})")
    if other is not None:
        if (report.load is None) != (other.load is None):
            kinds = {True: "a study report", False: "a load report"}
            raise ReportError(
                "--baseline",
                f"{other_name} is {kinds[other.load is None]} and REPORT is "
                f"{kinds[report.load is None]}: the charts compare like with like",
                "give a baseline report measured with the same workload and load",
            )
        theirs = _runs(other, "candidate")
        moved = tuple(r.model_copy(update={"server": "baseline"}) for r in theirs)
        source = (
            f"the candidate of {other_name}: {other.config.url} "
            f"({other.server_version or 'unknown version'})"
        )
        return Comparison(report, candidate, Side("baseline", other, moved, source), other_name)
    if report.baseline is None:
        return Comparison(report, candidate, None, None)
    base = report.baseline
    source = (
        f"measured in the same run, interleaved with the candidate: "
        f"{report.config.baseline_url or 'the twin of the stable revision'} "
        f"({base.server_version or 'unknown version'})"
    )
    paired = Side("baseline", base, _runs(report, "baseline"), source)
    return Comparison(report, candidate, paired, None)
