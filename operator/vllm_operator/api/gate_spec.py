"""The gate of a VLLMDeployment: what users write in ``spec.gate``.

Split from ``api/spec.py`` (the rest of the spec) because the gate is its own subject: the
suite, the thresholds every verdict is judged against, the baseline and the trial plan. The
CRD and ``kubectl explain`` read these models like the rest of the spec.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, field_validator, model_validator

from vllm_operator.api.base import APIModel
from vllm_operator.api.kube_rules import ConfigKey, ObjectName
from vllm_operator.api.text import did_you_mean, printable
from vllm_operator.api.workload import (
    WORKLOAD_RULES,
    SloThresholds,
    WorkloadSpec,
    unmeasured_slo_levels,
)

BaselineMode = Literal["auto", "twin", "stored"]

BUILTIN_SUITE = "default"
"""The built-in suite's name, as a summary records it (``quality.suite``)."""
BUILTIN_TEST_IDS: tuple[str, ...] = (
    "classify-1",
    "classify-2",
    "classify-3",
    "structured-output-1",
    "structured-output-2",
    "structured-output-3",
    "instruct-1",
    "instruct-2",
    "code-1",
    "email-draft-1",
    "summarize-1",
    "reason-1",
    "multi-step-reason-1",
)
"""The built-in suite's test ids (bench/quality/data/default_suite.yaml; a unit test keeps
the two equal): the core may not read the bench's files, and a ``mustPass`` name must be
checked where the spec is (``render``, the operator's InvalidSpec condition)."""


def unknown_must_pass(must_pass: list[str], known: tuple[str, ...], suite: str) -> str | None:
    """Why ``must_pass`` names a test the suite ``suite`` (test ids ``known``) does not
    have, with "did you mean" for the first five, or None: such a limit would never be
    enforced. Bounded for hostile input: a set lookup per name, twenty ids shown."""
    ids = frozenset(known)
    unknown = [t for t in must_pass if t not in ids]
    if not unknown:
        return None
    shown = []
    for test in unknown[:5]:
        close = did_you_mean(test, known, quote=True)
        name = printable(test[:80], newlines=False)
        shown.append(f"'{name}' ({close})" if close else f"'{name}'")
    return (
        f"mustPass names {len(unknown)} test(s) suite {suite} does not have: "
        f"{', '.join(shown)}; its tests: {', '.join(known[:20])}"
        + (f" and {len(known) - 20} more" if len(known) > 20 else "")
    )


class SuiteRef(APIModel):
    """The quality suite: the built-in one or a ConfigMap with a suite file."""

    builtin: Literal["default", "none"] | None = Field(
        default=None,
        description="default: the built-in 13-test suite; none: no quality tests.",
    )
    config_map: ObjectName | None = Field(
        default=None, description="ConfigMap holding a suite file (overrides builtin)."
    )
    key: ConfigKey = Field(
        default="suite.yaml",
        description="Key of the suite file in the ConfigMap ([-._a-zA-Z0-9]+, no '/').",
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        le=64,  # bench.quality.run.MAX_CONCURRENCY
        description=(
            "Quality tests in flight at once (default: the benchmark's, 4). A real model's "
            "greedy answer can change with the batch it is computed in, so 1 (one test at a "
            "time) gives the strictest repeatability, e.g. with "
            "thresholds.quality.minIdenticalPercent; higher is faster."
        ),
    )

    @property
    def runs_tests(self) -> bool:
        """True unless the suite is ``builtin: none`` without a ConfigMap (which overrides
        builtin)."""
        return self.config_map is not None or self.builtin != "none"


class QualityThresholds(APIModel):
    """What the quality suite must achieve."""

    min_passed: int | None = Field(
        default=None, ge=0, description="Fewest tests that must pass (default: no minimum)."
    )
    must_pass: list[str] = Field(
        default_factory=list,
        description=(
            "Test ids that must pass whatever the count; each must be a test of the suite "
            "(the built-in suite's are checked when the spec is applied, a ConfigMap suite's "
            "when the benchmark starts: an Error verdict)."
        ),
    )
    min_identical_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description=(
            "Lowest share, in percent of the suite's tests, whose answer from the candidate is "
            "character for character the answer of the baseline measured in the same run "
            "(gate.baseline.mode twin, bench --baseline-url): the same prompts at temperature "
            "0, compared from the suite's own answers. A test either server did not answer "
            "counts as differing. Judged only with a paired baseline (a note otherwise). A "
            "real model's greedy answer can change with its batch: for a high limit run the "
            "suite one test at a time (bench --quality-concurrency 1) or the servers with "
            "VLLM_BATCH_INVARIANT=1. Unset: not judged."
        ),
    )
    min_still_passing_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description=(
            "Of the suite's tests the paired baseline passed, the lowest share, in percent, "
            "the candidate must pass too (the same test ids, judged by the suite's own "
            "assertions); a candidate that fixes one test and breaks another keeps its pass "
            "count but not this share. Judged only with a paired baseline (a note "
            "otherwise); nothing to keep when the baseline passed none. Unset: not judged."
        ),
    )


class LatencyThresholds(APIModel):
    """Highest median end-to-end latency allowed per prompt class, in milliseconds."""

    short: float | None = Field(default=None, gt=0, description="Short prompts (ms).")
    medium: float | None = Field(default=None, gt=0, description="Medium prompts (ms).")
    long: float | None = Field(default=None, gt=0, description="Long prompts (ms).")


class ThroughputThreshold(APIModel):
    """Lowest aggregate output tokens/s at one concurrency level."""

    concurrency: int = Field(ge=1, le=1024, description="Concurrent streams.")
    min_tokens_per_second: float = Field(gt=0, description="Lowest aggregate output tokens/s.")


class Thresholds(APIModel):
    """Limits a candidate must meet, alone and against the stable revision."""

    quality: QualityThresholds = Field(
        default_factory=QualityThresholds, description="Quality suite limits."
    )
    latency_ms: LatencyThresholds = Field(
        default_factory=LatencyThresholds, description="Median latency limits per prompt class."
    )
    throughput: list[ThroughputThreshold] = Field(
        default_factory=list, description="Aggregate tokens/s limits per concurrency level."
    )
    max_regression_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description=(
            "Largest allowed regression against the baseline (a twin of the stable revision "
            "measured in the same run, or its stored benchmark: gate.baseline.mode), in "
            "percent, for latency, tokens/s and quality passes, decided on the interval of "
            "each difference (confidencePercent). Unset: no comparison."
        ),
    )
    confidence_percent: float = Field(
        default=95.0,
        ge=50,
        le=99.9,
        description=(
            "Confidence of the interval on each relative difference against the baseline: "
            "Failed only when the whole interval is beyond the limit, Passed only when it is "
            "all within, otherwise more trials (up to gate.maxTrials), then Inconclusive. The "
            "interval of each look is widened for the looks gate.trials..gate.maxTrials allow, "
            "so this confidence holds over the whole sequence."
        ),
    )
    regression_floor_ms: float = Field(
        default=5.0,
        ge=0,
        le=60_000,
        description=(
            "Smallest latency regression that counts, in ms: the latency limit is the larger "
            "of maxRegressionPercent of the baseline and this. Default 5 ms: on an H200 a "
            "20 ms short-prompt median moved up to 5.1 ms between trials of one server and "
            "6.0 ms between two identical servers in one trial (shared/calibration "
            "h200-paired-2026-12-01), so 10% of it (2 ms) is below what one trial resolves."
        ),
    )
    regression_floor_tokens_per_second: float = Field(
        default=5.0,
        ge=0,
        le=1_000_000,
        description=(
            "Smallest aggregate tokens/s drop that counts: the throughput limit is the larger "
            "of maxRegressionPercent of the baseline and this. Default 5 tok/s: the median "
            "trial-to-trial spread of the smallest H200 figure (1 stream, about 300 tok/s) "
            "was 9.6 tok/s; 5 tok/s only matters for figures under 50 tok/s (eager or CPU "
            "bound), where 10% is within one trial's noise."
        ),
    )
    slo: SloThresholds | None = Field(
        default=None,
        description=(
            "Service-level objectives at each load level of gate.workload (synthetic or "
            "dataset): latency percentiles, goodput and error rate, judged on the interval "
            "over trials, and against the baseline with maxRegressionPercent."
        ),
    )


class BaselineSpec(APIModel):
    """What the candidate is compared against."""

    mode: BaselineMode = Field(
        default="auto",
        description=(
            "twin: while the gate runs, a zero-traffic replica of the stable revision (its "
            "pod template, candidateReplicas pods, never selected by the serving Service) "
            "starts next to the candidate and the benchmark measures both in interleaved "
            "trials, so both see the same nodes' noise and the same time window, both fresh; "
            "costs the stable revision's GPUs once more for the gate's duration, and a twin "
            "that cannot be scheduled makes the gate an Error after "
            "rollout.progressDeadlineSeconds. stored: the stable revision's figures from its "
            "own gate, measured earlier on a server of another age, maybe on another node (no "
            "extra GPU, but biased: it rejected an identical revision on H200s). auto (the "
            "default): the twin once the candidate's pods are scheduled (so the twin never "
            "takes the candidate's GPUs), used when it is scheduled within twinWaitSeconds "
            "and Ready within rollout.progressDeadlineSeconds; otherwise the twin is removed "
            "and the gate judges against the stored figures, and the gate record says which "
            "baseline was used and why. The default is auto because twin is the unbiased "
            "comparison wherever GPUs allow it, and a full GPU cluster should still get a "
            "verdict without a person. Without a stable revision (or, in stored mode and "
            "auto's fallback, without stored figures) the candidate is judged on absolute "
            "limits only."
        ),
    )
    twin_wait_seconds: int = Field(
        default=300,
        ge=10,
        le=86_400,
        description=(
            "auto mode: how long the twin may stay unscheduled before the gate uses the "
            "stored baseline instead (counted from the twin's creation). The scheduler "
            "answers in seconds; only new or freed capacity helps after that (a cluster "
            "autoscaler adding a GPU node takes minutes), so the default of 5 minutes lets a "
            "scaling cluster supply the twin and costs a full one 5 minutes per gate."
        ),
    )


TRIAL_PLAN_RULES: list[JsonValue] = [
    {
        "rule": (
            "(has(self.maxTrials) ? self.maxTrials : 10) >= (has(self.trials) ? self.trials : 3)"
        ),
        "message": "gate.maxTrials must be >= gate.trials (equal: a fixed number of trials)",
    },
    {
        "rule": (
            "!has(self.thresholds) || !has(self.thresholds.slo) || (has(self.workload) && "
            "(has(self.workload.synthetic) || has(self.workload.dataset)))"
        ),
        "message": (
            "gate.thresholds.slo needs gate.workload.synthetic or gate.workload.dataset: the "
            "study's classes have no load levels to hold objectives at"
        ),
    },
]


class GateSpec(APIModel):
    """The benchmark Job that must pass before a candidate serves."""

    enabled: bool = Field(default=True, description="Run the gate; false promotes on Ready.")
    suite: SuiteRef = Field(default_factory=SuiteRef, description="Quality suite to run.")
    iterations: int = Field(
        default=5, ge=1, le=100, description="Measured requests per prompt class."
    )
    concurrency: list[Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=lambda: [1, 2, 4, 8],
        min_length=0,
        max_length=16,
        description="Concurrency levels for aggregate tokens/s.",
    )
    thresholds: Thresholds = Field(
        default_factory=Thresholds, description="What the candidate must achieve."
    )
    timeout_seconds: int = Field(
        default=1800,
        ge=60,
        le=86_400,
        description="Deadline of the benchmark Job (activeDeadlineSeconds).",
    )
    baseline: BaselineSpec = Field(
        default_factory=BaselineSpec,
        description="The baseline of regression limits: a twin of the stable revision, or stored.",
    )
    workload: WorkloadSpec = Field(
        default_factory=WorkloadSpec,
        description=(
            "The requests measured: the study's classes (default), a synthetic distribution "
            "or a dataset, and how they arrive (load)."
        ),
        json_schema_extra={"x-kubernetes-validations": WORKLOAD_RULES},
    )
    trials: int = Field(
        default=3,
        ge=1,
        le=10,
        description=(
            "Paired trials of every compared figure before the gate's first look (candidate "
            "and baseline interleaved in twin mode; `bench --trials`)."
        ),
    )
    max_trials: int = Field(
        default=10,
        ge=1,
        le=10,
        description=(
            "Most trials of any one figure: after `trials`, the benchmark adds one paired "
            "trial at a time of each figure still undecided (its interval straddles the "
            "limit), until it is decided, this many trials were run, or the Job's time budget "
            "(timeoutSeconds) is spent; only then is it Inconclusive. Each look's interval is "
            "widened for the number of looks (maxTrials - trials + 1), so extra looks do not "
            "raise the false-fail rate (`bench --max-trials`)."
        ),
    )

    @field_validator("concurrency")
    @classmethod
    def _distinct_levels(cls, levels: list[int]) -> list[int]:
        if len(set(levels)) != len(levels):
            raise ValueError("concurrency levels must be distinct")
        return sorted(levels)

    @model_validator(mode="after")
    def _slo_needs_a_workload(self) -> GateSpec:
        # Any slo (even an empty one) with the study: the CRD's CEL rule cannot tell an
        # empty objective from a set one, and an SLO with nothing to judge it on is a mistake.
        if self.thresholds.slo is not None and self.workload.is_study:
            raise ValueError(
                "gate.thresholds.slo needs gate.workload.synthetic or gate.workload.dataset: "
                "the study's classes have no load levels to hold objectives at"
            )
        return self

    @model_validator(mode="after")
    def _slo_levels_measured(self) -> GateSpec:
        if not self.workload.is_study and (
            problem := unmeasured_slo_levels(self.thresholds.slo, self.workload.load)
        ):
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _must_pass_in_suite(self) -> GateSpec:
        # A ConfigMap suite's ids are unknown here: bench and judge refuse those at run time.
        must_pass = self.thresholds.quality.must_pass
        if self.suite.config_map is not None or not must_pass:
            return self
        known = BUILTIN_TEST_IDS if self.suite.runs_tests else ()
        suite = "builtin:default" if self.suite.runs_tests else "builtin:none"
        if (problem := unknown_must_pass(must_pass, known, suite)) is not None:
            raise ValueError(f"gate.thresholds.quality.{problem}")
        return self

    @model_validator(mode="after")
    def _trial_plan(self) -> GateSpec:
        if self.max_trials < self.trials:
            raise ValueError(
                f"gate.maxTrials ({self.max_trials}) is below gate.trials ({self.trials}): "
                "set maxTrials >= trials (equal means a fixed number of trials)"
            )
        return self
