"""A limited percentile of a load level as counts, the part of a summary the tail judge
reads (``gate.slo_tails``): per trial, the observations above the limit, and against the
paired baseline above each pair's bar, with the clustering the bench fixed for them
(``gate.clustering``). Apart from ``api.summary`` to keep each module to one subject.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from vllm_operator.api.base import APIModel

MAX_TRIALS = 10
"""Trials per compared figure (bounds the summary: two servers x 19 figures x 10 numbers)."""

Counts = Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=MAX_TRIALS)]
DesignEffects = Annotated[list[Annotated[float, Field(ge=1)]], Field(max_length=MAX_TRIALS)]
Across = Annotated[float | None, Field(ge=1, le=1e9)]
StrayTrial = Annotated[int | None, Field(ge=1, le=MAX_TRIALS)]
ACROSS = (
    "The design effect across trials, estimated once over the candidate's tail "
    "(gate.clustering), the same at every bar; absent: a summary of the earlier rule, whose "
    "clustering is estimated from the counts."
)
STRAY = "The trial (1-based) left out as a stray at every bar (with `across`)."
EARLIER_RULE_FIELDS = frozenset({"top", "candidate", "design_effect", "designEffect"})


class TailRegression(APIModel):
    """A limited percentile against the paired baseline's, pair by pair (``gate.pair_tails``).

    In each trial the bar is the baseline's own percentile plus the regression limit (the
    larger of ``relativePercent`` of it and ``floor``), and ``above`` counts the candidate's
    observations over that bar, out of its ``total`` that trial (0 where the baseline
    measured nothing to set a bar). About the
    percentile's own share (1% for p99) is above when the candidate's percentile sits
    exactly at the limit; the operator re-decides from these counts, and limits other than
    the ones counted at need a re-judge from the report.
    """

    relative_percent: float = Field(
        ge=0, le=1000, description="maxRegressionPercent the bars were set with."
    )
    floor: float = Field(ge=0, description="The floor (ms) the bars were set with.")
    bars: list[Annotated[float, Field(ge=0, le=1e9)]] = Field(
        default_factory=list,
        max_length=MAX_TRIALS,
        description="Per trial, the bar (ms): the baseline's percentile plus the limit.",
    )
    total: Counts = Field(
        default_factory=list,
        description="Per trial, the candidate's observations counted (0: no bar that trial).",
    )
    above: Counts = Field(
        default_factory=list, description="Per trial, the candidate's observations above it."
    )
    design_effect: DesignEffects | None = Field(
        default=None,
        description="Per trial, the design effect of those counted (ITL: by request; absent: 1).",
    )
    across: Across = Field(default=None, description=ACROSS)
    stray_trial: StrayTrial = Field(default=None, description=STRAY)

    @model_validator(mode="before")
    @classmethod
    def _earlier_rule(cls, data: object) -> object:
        """Summaries of the earlier rule (each pair's slowest share: ``top``, ``candidate``)
        are read without its counts; ``gate.slo_tails`` asks for a re-judge from the report."""
        if isinstance(data, dict) and "bars" not in data and ("top" in data or "candidate" in data):
            return {k: v for k, v in data.items() if k not in EARLIER_RULE_FIELDS}
        return data


class TailCounts(APIModel):
    """One limited percentile of a level as counts: per trial, the observations above the
    limit (requests; ITL: gaps, with the design effect of their requests), what the gate
    judges (``gate.tails``)."""

    limit: float = Field(ge=0, description="The limit (ms) the counts were taken above.")
    total: Counts = Field(
        default_factory=list,
        description="Per trial, the observations counted (completed requests; ITL: gaps).",
    )
    above: Counts = Field(default_factory=list, description="Per trial, those above `limit`.")
    design_effect: DesignEffects | None = Field(
        default=None,
        description=(
            "Per trial, the design effect of gaps clustered by request (absent: 1 each); with "
            "`across`, estimated once over the candidate's tail, else at the limit."
        ),
    )
    across: Across = Field(default=None, description=ACROSS)
    stray_trial: StrayTrial = Field(default=None, description=STRAY)
    missing: str | None = Field(
        default=None,
        max_length=200,
        description="Why no counts could be taken (absent: counted).",
    )
    regression: TailRegression | None = Field(
        default=None, description="Against the paired baseline (maxRegressionPercent set)."
    )
