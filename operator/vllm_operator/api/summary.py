"""The compact benchmark summary and the verdict, shared by bench, gate and operator.

The benchmark Job writes a ``BenchSummary`` to its termination message (at most 4,096
bytes), the operator stores it in status as the stable revision's baseline, and the gate
compares a candidate's summary with it. One type for all three keeps them from drifting.

``Verdict`` is the one type of a decision: the gate returns it, the bench reports it, the
operator records it on a revision (``api.status.GateRecord`` is a ``Verdict`` with where and
when), and a summary carries the bench's own as its flat ``verdict``/``reasons`` fields (the
termination-message format every bench image writes; ``BenchSummary.own_verdict`` reads it
back as a ``Verdict``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from vllm_operator.api import summary_checks
from vllm_operator.api.base import APIModel

# re-exported: the counts are a part of a summary (api.tail_counts, a module of their own)
from vllm_operator.api.tail_counts import MAX_TRIALS as MAX_TRIALS  # noqa: PLC0414
from vllm_operator.api.tail_counts import TailCounts as TailCounts  # noqa: PLC0414

VerdictOutcome = Literal["Passed", "Failed", "Inconclusive", "Error"]
# The gate's order of outcomes, strictest first (gate/verdict.py): Failed and Error never
# promote, and of two verdicts on one run the stricter stands (rollout/trust.py).
STRICTEST_FIRST: tuple[VerdictOutcome, ...] = ("Failed", "Error", "Inconclusive", "Passed")

SUMMARY_SCHEMA = "vllm-operator.dev/bench-summary/v1"


PERCENTILE_KEYS = frozenset(
    f"{m}.{p}" for m in ("ttft", "itl", "tpot", "e2e") for p in ("p50", "p90", "p95", "p99")
)
"""Keys of ``LoadLevelFigures.percentiles`` (api.workload's metrics and percentiles)."""

TrialFigures = Annotated[list[Annotated[float, Field(ge=0)]], Field(max_length=MAX_TRIALS)]


class LatencyFigures(APIModel):
    """Medians of one prompt class, measured sequentially (one stream)."""

    prompt_class: str = Field(description="short, medium or long.")
    requests: int = Field(ge=0, description="Measured requests (warm-up excluded).")
    median_ms: float = Field(ge=0, description="Median end-to-end latency (ms).")
    ttft_ms: float = Field(ge=0, description="Median time to first content token (ms).")
    output_tokens: float = Field(ge=0, description="Median output tokens per request.")
    # Explicit alias: to_camel would give "e2ETokensPerSecond" (it capitalises after a digit).
    e2e_tokens_per_second: float = Field(
        ge=0,
        alias="e2eTokensPerSecond",
        description="Median output tokens / end-to-end latency.",
    )
    decode_tokens_per_second: float = Field(
        ge=0,
        description=(
            "Median (tokens - 1) / (end-to-end - TTFT); 0 when requests have too few output "
            "tokens for a decode rate to mean anything (see docs/bench.md)."
        ),
    )
    trials: TrialFigures = Field(
        default_factory=list,
        description=(
            "Median end-to-end latency (ms) of each trial, in trial order; the gate computes "
            "its interval from these. Empty in summaries from before trials (one figure)."
        ),
    )


class ConcurrencyFigures(APIModel):
    """Aggregate throughput at one concurrency level (closed loop)."""

    concurrency: int = Field(ge=1, description="Concurrent streams.")
    aggregate_tokens_per_second: float = Field(
        ge=0, description="Output tokens/s of all streams over the steady window."
    )
    requests_per_second: float = Field(ge=0, description="Completed requests per second.")
    requests: int = Field(
        default=0,
        ge=0,
        description=(
            "Requests completed at this level; the gate calls a level with fewer requests "
            "than streams too thin to compare."
        ),
    )
    trials: TrialFigures = Field(
        default_factory=list,
        description=(
            "Aggregate tokens/s of each trial, in trial order; the gate computes its interval "
            "from these. Empty in summaries from before trials (one figure)."
        ),
    )


class QualityDifferential(APIModel):
    """The candidate's quality answers against the paired baseline's, test by test.

    Both servers got the same prompts at temperature 0 (the suite's own requests, no extra
    ones); the gate judges ``minIdenticalPercent`` and ``minStillPassingPercent`` on these
    counts. A test either server did not answer counts as differing and as not passed there.
    """

    compared: int = Field(ge=0, description="Suite tests compared (the identical share's base).")
    identical: int = Field(
        ge=0, description="Tests whose two answers are the same text, character for character."
    )
    baseline_passed: int = Field(
        ge=0, description="Tests the baseline passed (the still-passing share's base)."
    )
    still_passing: int = Field(
        ge=0, description="Tests the baseline passed that the candidate passed too."
    )
    differing: list[str] = Field(
        default_factory=list,
        description="Ids whose answers differ, in suite order (cut to fit 4,096 bytes).",
    )
    lost: list[str] = Field(
        default_factory=list,
        description="Ids the baseline passed and the candidate did not (cut to fit).",
    )
    omitted: int = Field(
        default=0, ge=0, description="Ids left out of `differing` and `lost` to fit 4,096 bytes."
    )

    @model_validator(mode="after")
    def _consistent(self) -> QualityDifferential:
        summary_checks.differential(self)
        return self

    @property
    def identical_percent(self) -> float:
        return 100.0 * self.identical / self.compared if self.compared else 100.0

    @property
    def still_passing_percent(self) -> float:
        return 100.0 * self.still_passing / self.baseline_passed if self.baseline_passed else 100.0


class QualityFigures(APIModel):
    """Quality suite outcome."""

    suite: str = Field(description="Suite name.")
    passed: int = Field(ge=0, description="Tests passed.")
    total: int = Field(ge=0, description="Tests run.")
    failed: list[str] = Field(
        default_factory=list,
        description="Ids of failed tests (must-pass ids first when the list is cut to fit).",
    )
    failed_omitted: int = Field(
        default=0, ge=0, description="Failed ids left out of `failed` to fit 4,096 bytes."
    )
    differential: QualityDifferential | None = Field(
        default=None,
        description=(
            "The candidate's answers against the paired baseline's (absent without a paired "
            "baseline that ran the same suite)."
        ),
    )

    @model_validator(mode="after")
    def _consistent(self) -> QualityFigures:
        summary_checks.quality(self)
        return self


class RunIdentity(APIModel):
    """Which benchmark run wrote a summary: the operator checks it against the Job it read.

    A summary is only believed from the Job it names: one copied from another run (an older
    attempt, another resource's Job, a forged file) is an Error, never a verdict.
    """

    job: str = Field(max_length=63, description="Name of the benchmark Job.")
    revision: str = Field(max_length=63, description="Revision the Job benchmarked.")
    attempt: int = Field(ge=1, le=10**6, description="Gate attempt on that revision, from 1.")


class Placement(APIModel):
    """Where one measured server ran (recorded by the benchmark, told by the operator)."""

    node: str | None = Field(default=None, max_length=253, description="Node name.")
    gpu_product: str | None = Field(
        default=None,
        max_length=200,
        description="GPU product (node label nvidia.com/gpu.product), when known.",
    )
    vllm_version: str | None = Field(
        default=None, max_length=100, description="vLLM version the server reported (/version)."
    )


class LoadLevelFigures(APIModel):
    """One load level of a sweep (gate.workload.load): the figures its SLO limits reference.

    Compact on purpose (the summary must fit 4,096 bytes): only the percentiles that a limit
    of ``gate.thresholds.slo`` names at this level, and goodput and error share, each one
    value per trial in trial order. The full per-request figures are in the report.
    """

    level: float = Field(gt=0, description="Streams (concurrency) or requests/s (rate).")
    requests: int = Field(
        default=0, ge=0, description="Requests sent at this level over every trial (0: not run)."
    )
    percentiles: dict[str, TrialFigures] = Field(
        default_factory=dict,
        description=(
            "Per-trial values (ms) of each limited percentile, keyed metric.percentile "
            "(ttft.p99, itl.p50, tpot.p90, e2e.p95)."
        ),
    )
    pooled: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict,
        description="Each limited percentile (ms) over every trial's observations together.",
    )
    tails: dict[str, TailCounts] = Field(
        default_factory=dict,
        description=(
            "Each limited percentile as counts above its limit per trial (keyed like "
            "`percentiles`); absent in summaries written before exceedance counting."
        ),
    )
    goodput_percent: TrialFigures = Field(
        default_factory=list,
        description="Share of each trial's requests that met every latency limit (percent).",
    )
    error_percent: TrialFigures = Field(
        default_factory=list, description="Share of each trial's requests that failed (percent)."
    )

    @field_validator("percentiles", "pooled", "tails")
    @classmethod
    def _known_keys(cls, value: dict[str, object]) -> dict[str, object]:
        unknown = sorted(set(value) - PERCENTILE_KEYS)[:3]
        if unknown:
            raise ValueError(f"unknown percentile keys {unknown}: use metric.pNN, e.g. ttft.p99")
        return value


class LoadSweep(APIModel):
    """A load sweep over the levels of gate.workload.load (absent for the study's shapes)."""

    mode: Literal["concurrency", "rate"] = Field(
        description="concurrency: levels are streams; rate: levels are requests/s."
    )
    levels: list[LoadLevelFigures] = Field(
        default_factory=list,
        max_length=16,
        description="Every level asked, in order; one the sweep did not reach has requests 0.",
    )
    stopped_at: float | None = Field(
        default=None,
        gt=0,
        description="The level where the sweep ended early (an SLO broken, stopAtFirstBreach).",
    )


class Figures(APIModel):
    """What one run measured on one server: the candidate's (``BenchSummary``) and the
    paired baseline's (``PairedBaseline``) are this one shape, so the gate compares like with
    like and nothing copies one into the other.

    A new figure of both sides is a new field here (give it a default, so summaries written
    before it still parse); ``bench.summary.fit`` decides whether it may be cut to fit 4,096
    bytes.
    """

    latency: list[LatencyFigures] = Field(
        default_factory=list, description="Latency per prompt class."
    )
    concurrency: list[ConcurrencyFigures] = Field(
        default_factory=list, description="Aggregate tokens/s per concurrency level."
    )
    quality: QualityFigures | None = Field(default=None, description="Quality suite result.")
    errors: dict[str, int] = Field(
        default_factory=dict,
        description="Failed requests by class (timeout, http_5xx, no_done, ...).",
    )
    placement: Placement | None = Field(
        default=None,
        description="Where this server ran (the candidate; in pairedBaseline, the baseline).",
    )

    load: LoadSweep | None = Field(
        default=None,
        description=(
            "The load sweep of a synthetic or dataset workload (gate.workload): the figures "
            "its SLO limits name, per level and trial; absent for the study's shapes."
        ),
    )

    @model_validator(mode="after")
    def _each_figure_once(self) -> Figures:
        summary_checks.twice((f.prompt_class for f in self.latency), "latency")
        summary_checks.twice((f.concurrency for f in self.concurrency), "concurrency")
        if self.load is not None:
            summary_checks.twice((f.level for f in self.load.levels), "load.levels")
        return self


class PairedBaseline(Figures):
    """The baseline's own figures, measured in the same run as the candidate (interleaved)."""


class TrialPlan(APIModel):
    """How many paired trials a run may take: the first look, then one more at a time.

    The gate judges every figure after ``minTrials`` trials and again after each further
    trial while the figure is undecided, up to ``maxTrials``. Each look's interval is widened
    for the number of looks the plan allows (``gate.sequential``), so the false-fail rate is
    what ``confidencePercent`` says however many looks were taken.
    """

    min_trials: int = Field(ge=1, le=MAX_TRIALS, description="Trials before the first look.")
    max_trials: int = Field(ge=1, le=MAX_TRIALS, description="Most trials of any one figure.")

    @model_validator(mode="after")
    def _ordered(self) -> TrialPlan:
        if self.max_trials < self.min_trials:
            raise ValueError(
                f"maxTrials {self.max_trials} is below the minimum {self.min_trials}: set "
                "gate.maxTrials >= gate.trials"
            )
        return self

    @property
    def looks(self) -> int:
        """How many times the gate may judge one figure (the first look included)."""
        return self.max_trials - self.min_trials + 1


class Warmup(APIModel):
    """How the settling warm-up ended on each server (details in the report)."""

    candidate_passes: int = Field(ge=0, le=1000, description="Warm-up passes on the candidate.")
    baseline_passes: int | None = Field(
        default=None, ge=0, le=1000, description="Warm-up passes on the paired baseline."
    )
    settled: bool = Field(
        description=(
            "True when the last two passes agreed within the tolerance on every server; "
            "false when the pass or time cap ended the warm-up first."
        )
    )


class Verdict(APIModel):
    """A decision on one revision's benchmark, with its reasons."""

    outcome: VerdictOutcome = Field(description="Passed, Failed, Inconclusive or Error.")
    reasons: list[str] = Field(
        default_factory=list,
        description=(
            "Why, one line per reason: the reasons that decided the outcome first and in full "
            "(the first `deciding` of them), then every other one in a few words."
        ),
    )
    deciding: int | None = Field(
        default=None,
        ge=1,
        description=(
            "How many of the first reasons decided the outcome (absent: none singled out, "
            "e.g. a person's decision, or a record written before this field)."
        ),
    )
    headline: str | None = Field(
        default=None,
        max_length=1024,
        description="The verdict in one line: the deciding figures first, then the others counted.",
    )

    def line(self) -> str:
        """The verdict in one line: its headline, else (no headline: a canary's, a person's,
        a deadline's verdict) its first deciding reasons, or first reasons."""
        if self.headline:
            return self.headline
        first = (self.reasons[: self.deciding] if self.deciding else self.reasons)[:2]
        more = len(self.reasons) - len(first)
        return "; ".join(first) + (f" (+{more} more)" if more > 0 else "")

    def decided_by_reasons(self) -> list[str]:
        """The reasons that decided the outcome (the first one when none was singled out)."""
        return self.reasons[: max(self.deciding or 0, 1)]


class BenchSummary(Figures):
    """What one benchmark run measured, small enough for a termination message: the
    candidate's figures (``Figures``), the paired baseline's, and what the run was."""

    schema_: str = Field(default=SUMMARY_SCHEMA, alias="schema", description="Format id.")
    model: str = Field(default="", description="Model name the benchmark requested.")
    paired_baseline: PairedBaseline | None = Field(
        default=None,
        description=(
            "The baseline measured in the same run (bench --baseline-url); when present the "
            "gate compares against it instead of a stored summary."
        ),
    )
    verdict: VerdictOutcome | None = Field(
        default=None, description="The benchmark's own gate verdict, when it was given limits."
    )
    reasons: list[str] = Field(default_factory=list, description="Why, in a few lines.")
    identity: RunIdentity | None = Field(
        default=None,
        description="The run that wrote this summary (bench --job-name/--revision/--attempt).",
    )
    trial_plan: TrialPlan | None = Field(
        default=None,
        description=(
            "The sequential trial plan the run followed; absent in summaries of a fixed number "
            "of trials (then judged as one look)."
        ),
    )
    warmup: Warmup | None = Field(
        default=None, description="How the settling warm-up ended (absent: no settling warm-up)."
    )

    @property
    def own_verdict(self) -> Verdict | None:
        """The benchmark's own verdict (None when it was given no limits)."""
        if self.verdict is None:
            return None
        return Verdict(outcome=self.verdict, reasons=self.reasons)
