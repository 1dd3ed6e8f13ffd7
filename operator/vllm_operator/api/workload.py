"""What traffic the gate measures, how it arrives, and the service-level objectives it must meet.

The study's shapes (three prompt sizes at one stream, tokens/s at 1-8 streams) say whether a
revision kept its speed; they do not say whether it meets "TTFT p99 under 500 ms at 20
requests/s on our prompts". ``gate.workload`` names the requests (the study's, a synthetic
distribution of token counts, or the team's own dataset), ``gate.workload.load`` how they
arrive (closed loop at a number of streams, or open loop at Poisson request rates), and
``gate.thresholds.slo`` the limits at each load level. The same types are read by the
benchmark (``bench``), the Job renderer and the gate, so they cannot disagree.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, JsonValue, field_validator, model_validator

from vllm_operator.api.base import APIModel
from vllm_operator.api.kube_rules import (
    SUB_PATH_PATTERN,
    SUB_PATH_RULES,
    ConfigKey,
    ObjectName,
    check_sub_path,
)

MAX_TOKENS = 131_072
"""Largest token count a distribution may ask for (context lengths beyond are rare)."""
MAX_LEVELS = 16
"""Most load levels of one sweep (each level costs its duration on both servers)."""
MAX_LEVEL_REQUESTS = 100_000
"""Requests of one level (server, trial) at most: a rate's rate x secondsPerLevel beyond it
is refused here and by the CRD, not by the bench mid-run (``bench.load.send.MAX_RUN_REQUESTS``)."""

Distribution = Literal["fixed", "normal", "lognormal"]
DatasetFormat = Literal["chat-jsonl", "sharegpt"]
LoadMode = Literal["concurrency", "rate"]
Percentile = Literal["p50", "p90", "p95", "p99"]
PERCENTILES: tuple[Percentile, ...] = ("p50", "p90", "p95", "p99")
LatencyMetric = Literal["ttft", "itl", "tpot", "e2e"]
LATENCY_METRICS: tuple[LatencyMetric, ...] = ("ttft", "itl", "tpot", "e2e")


# The CRD's CEL rules say what the model validators below say, so `kubectl apply` refuses
# the same specs the operator would (each has a case in the embedded cluster's CEL tests).
# Defaults are spelled out (`has(...) ? ... : default`) so a rule holds with or without the
# API server's defaulting.
_MIN = "(has(self.min) ? self.min : 1)"
_MAX = f"(has(self.max) ? self.max : {MAX_TOKENS})"
TOKEN_COUNT_RULES: list[JsonValue] = [
    {"rule": f"{_MIN} <= {_MAX}", "message": "min must not exceed max"},
    {
        # Only judged when min <= max (the rule above speaks otherwise).
        "rule": f"{_MIN} > {_MAX} || ({_MIN} <= self.mean && self.mean <= {_MAX})",
        "message": "mean must lie within [min, max]",
    },
    {
        "rule": (
            "!has(self.spread) || self.spread == 0.0 || "
            "(has(self.distribution) && self.distribution != 'fixed')"
        ),
        "message": "spread must be 0 with distribution fixed: use normal or lognormal",
    },
]
DATASET_RULES: list[JsonValue] = [
    {
        "rule": "has(self.configMap) != has(self.persistentVolumeClaim)",
        "message": "set exactly one of configMap (with key) or persistentVolumeClaim (with path)",
    },
    {
        "rule": "!has(self.persistentVolumeClaim) || has(self.path)",
        "message": "persistentVolumeClaim needs path: the dataset file in the claim",
    },
    {
        "rule": "!has(self.configMap) || !has(self.path)",
        "message": "path is for persistentVolumeClaim; a ConfigMap's file is its key",
    },
]
_RATE = "(has(self.mode) && self.mode == 'rate')"
UNUSED_LEVELS = (
    "rates are the levels of mode rate, and the load mode is concurrency (the default): "
    "set mode: rate, or give concurrency levels instead"
)
LOAD_RULES: list[JsonValue] = [
    {
        "rule": (
            f"{_RATE} ? (has(self.rates) && size(self.rates) > 0) "
            ": (!has(self.concurrency) || size(self.concurrency) > 0)"
        ),
        "message": "mode rate needs at least one level in rates; mode concurrency in concurrency",
    },
    {
        "rule": (
            f"{_RATE} ? (!has(self.rates) || (self.rates.isSorted() && "
            "self.rates.all(x, self.rates.exists_one(y, y == x)))) "
            ": (!has(self.concurrency) || (self.concurrency.isSorted() && "
            "self.concurrency.all(x, self.concurrency.exists_one(y, y == x))))"
        ),
        "message": "load levels must be distinct and ascending",
    },
    {
        "rule": (
            f"!{_RATE} || !has(self.rates) || self.rates.all(r, r * "
            f"double(has(self.secondsPerLevel) ? self.secondsPerLevel : 30) <= "
            f"{MAX_LEVEL_REQUESTS}.0)"
        ),
        "message": (
            f"every rate x secondsPerLevel must be at most {MAX_LEVEL_REQUESTS} requests per "
            "level: lower the rate or secondsPerLevel"
        ),
    },
    {
        "rule": f"{_RATE} || !has(self.rates) || size(self.rates) == 0",
        "message": UNUSED_LEVELS,
    },
]
SLO_LEVEL_RULES: list[JsonValue] = [
    {
        "rule": "self.all(x, self.exists_one(y, y.at == x.at))",
        "message": "slo.levels must name each level once (`at`)",
    }
]
_LOAD = "self.workload.load"
_SLO_LEVELS = "self.thresholds.slo.levels"
SLO_AT_RULES: list[JsonValue] = [
    {
        # The study (no workload) is refused by the rule that slo needs a workload.
        "rule": (
            "!has(self.workload) || !has(self.thresholds) || !has(self.thresholds.slo) || "
            f"!has({_SLO_LEVELS}) || {_SLO_LEVELS}.all(l, "
            f"(has({_LOAD}) && has({_LOAD}.mode) && {_LOAD}.mode == 'rate') ? "
            f"(has({_LOAD}.rates) && {_LOAD}.rates.exists(r, r == l.at)) : "
            f"((has({_LOAD}) && has({_LOAD}.concurrency)) ? "
            f"{_LOAD}.concurrency.exists(c, double(c) == l.at) : "
            "[1.0, 2.0, 4.0, 8.0].exists(c, c == l.at)))"
        ),
        "message": (
            "every gate.thresholds.slo.levels[].at must be a level of gate.workload.load "
            "(a level never measured has no figures to judge)"
        ),
    }
]

WORKLOAD_RULES: list[JsonValue] = [
    {
        "rule": (
            "(has(self.builtin) ? 1 : 0) + (has(self.synthetic) ? 1 : 0) "
            "+ (has(self.dataset) ? 1 : 0) <= 1"
        ),
        "message": "set one of builtin, synthetic or dataset",
    }
]


class TokenCounts(APIModel):
    """A distribution of token counts: fixed, normal, or lognormal (mean and spread)."""

    distribution: Distribution = Field(
        default="fixed", description="fixed (always mean), normal or lognormal."
    )
    mean: int = Field(ge=1, le=MAX_TOKENS, description="Mean token count.")
    spread: float = Field(
        default=0.0,
        ge=0,
        le=MAX_TOKENS,
        description=(
            "Standard deviation in tokens (normal and lognormal: the standard deviation of "
            "the counts themselves, not of their logarithm); 0 with fixed."
        ),
    )
    min: int = Field(default=1, ge=1, le=MAX_TOKENS, description="Smallest count drawn.")
    max: int = Field(default=MAX_TOKENS, ge=1, le=MAX_TOKENS, description="Largest count drawn.")

    @model_validator(mode="after")
    def _consistent(self) -> TokenCounts:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max}): set min <= max")
        if not self.min <= self.mean <= self.max:
            raise ValueError(f"mean ({self.mean}) is outside [min, max]: move it inside")
        if self.distribution == "fixed" and self.spread != 0:
            raise ValueError("spread must be 0 with distribution fixed: use normal or lognormal")
        return self


class SyntheticWorkload(APIModel):
    """Requests drawn from token-count distributions; every prompt differs from the others."""

    input_tokens: TokenCounts = Field(
        description="Prompt length in tokens.",
        json_schema_extra={"x-kubernetes-validations": TOKEN_COUNT_RULES},
    )
    output_tokens: TokenCounts = Field(
        description="Output length in tokens (max_tokens with ignore_eos, so it is exact).",
        json_schema_extra={"x-kubernetes-validations": TOKEN_COUNT_RULES},
    )
    shared_prefix_percent: float = Field(
        default=0.0,
        ge=0,
        le=100,
        description=(
            "Share of each prompt that is one prefix common to all requests (a system prompt: "
            "vLLM's prefix cache serves it); the rest of every prompt is unique."
        ),
    )


class DatasetRef(APIModel):
    """The team's own requests: JSONL of chat requests or ShareGPT conversations."""

    format: DatasetFormat = Field(
        default="chat-jsonl",
        description=(
            "chat-jsonl: one JSON object per line with `messages` (OpenAI chat) and optional "
            "`max_tokens`; sharegpt: a JSON array (or JSONL) of objects with `conversations` "
            "[{from: human|gpt|system, value}], the first human turn (and a system turn) sent."
        ),
    )
    config_map: ObjectName | None = Field(
        default=None, description="ConfigMap holding the dataset (in the resource's namespace)."
    )
    key: ConfigKey = Field(
        default="dataset.jsonl", description="Key of the dataset in the ConfigMap."
    )
    persistent_volume_claim: ObjectName | None = Field(
        default=None, description="PersistentVolumeClaim holding the dataset (mounted read-only)."
    )
    path: Annotated[str, AfterValidator(check_sub_path)] | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description=(
            "Path of the dataset file inside the claim (relative, no '..', no control characters)."
        ),
        json_schema_extra={"x-kubernetes-validations": SUB_PATH_RULES, "pattern": SUB_PATH_PATTERN},
    )
    max_output_tokens: int = Field(
        default=1024,
        ge=1,
        le=MAX_TOKENS,
        description="max_tokens for requests that do not give one (and the cap for those that do).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> DatasetRef:
        if (self.config_map is None) == (self.persistent_volume_claim is None):
            raise ValueError(
                "set exactly one of configMap (with key) or persistentVolumeClaim (with path)"
            )
        if self.persistent_volume_claim is not None and self.path is None:
            raise ValueError("persistentVolumeClaim needs path: the dataset file in the claim")
        if self.config_map is not None and self.path is not None:
            raise ValueError("path is for persistentVolumeClaim; a ConfigMap's file is its key")
        return self


class LoadSpec(APIModel):
    """How requests arrive: a closed loop of streams, or open-loop Poisson request rates."""

    mode: LoadMode = Field(
        default="concurrency",
        description=(
            "concurrency: each stream sends its next request when the last one ends; rate: "
            "requests arrive as a Poisson process at each of `rates` requests/s, whether or "
            "not earlier ones have finished (what users do)."
        ),
    )
    concurrency: list[Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=lambda: [1, 2, 4, 8],
        max_length=MAX_LEVELS,
        description="Streams of each level (mode concurrency).",
    )
    rates: list[Annotated[float, Field(gt=0, le=10_000)]] = Field(
        default_factory=list,
        max_length=MAX_LEVELS,
        description="Request rates of the sweep, requests/s, ascending (mode rate).",
    )
    seconds_per_level: int = Field(
        default=30,
        ge=1,
        le=3600,
        description="How long each level sends requests (per trial, on each server).",
    )
    stop_at_first_breach: bool = Field(
        default=True,
        description=(
            "End the sweep at the first level that breaks an SLO; the level before it is "
            "reported as the capacity."
        ),
    )

    @model_validator(mode="after")
    def _levels(self) -> LoadSpec:
        levels: list[float] = list(self.rates if self.mode == "rate" else self.concurrency)
        if not levels:
            field = "rates" if self.mode == "rate" else "concurrency"
            raise ValueError(f"mode {self.mode} needs at least one level in {field}")
        if levels != sorted(set(levels)):
            raise ValueError("load levels must be distinct and ascending")
        if self.mode == "rate":
            for rate in self.rates:
                if rate * self.seconds_per_level > MAX_LEVEL_REQUESTS:
                    raise ValueError(
                        f"rate {rate:g} x secondsPerLevel {self.seconds_per_level} is "
                        f"{rate * self.seconds_per_level:.0f} requests, more than "
                        f"{MAX_LEVEL_REQUESTS} per level: lower the rate or secondsPerLevel"
                    )
        if self.mode != "rate" and self.rates:
            raise ValueError(UNUSED_LEVELS)
        return self

    @property
    def levels(self) -> tuple[float, ...]:
        """The levels of the sweep in order (streams or requests/s)."""
        return tuple(self.rates if self.mode == "rate" else map(float, self.concurrency))


class WorkloadSpec(APIModel):
    """The requests the gate measures: the study's classes (default), synthetic, or a dataset."""

    builtin: Literal["study"] | None = Field(
        default=None,
        description="study: the published study's three prompt classes (the default).",
    )
    synthetic: SyntheticWorkload | None = Field(
        default=None, description="Requests drawn from token-count distributions."
    )
    dataset: DatasetRef | None = Field(
        default=None,
        description="The team's own requests, sampled with `seed`.",
        json_schema_extra={"x-kubernetes-validations": DATASET_RULES},
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=2**31 - 1,
        description="Seed of sampling and arrivals: candidate and baseline get the same requests.",
    )
    load: LoadSpec = Field(
        default_factory=LoadSpec,
        description="How requests arrive (synthetic and dataset workloads).",
        json_schema_extra={"x-kubernetes-validations": LOAD_RULES},
    )

    @model_validator(mode="after")
    def _one_kind(self) -> WorkloadSpec:
        chosen = [n for n in ("builtin", "synthetic", "dataset") if getattr(self, n) is not None]
        if len(chosen) > 1:
            both = " and ".join(chosen)
            raise ValueError(f"set one of builtin, synthetic or dataset, not {both}")
        return self

    @property
    def is_study(self) -> bool:
        """True when the gate measures the study's classes (nothing else chosen)."""
        return self.synthetic is None and self.dataset is None


DEFAULT_FLOOR_PERCENT: dict[LatencyMetric, float] = {"ttft": 10, "itl": 25, "tpot": 10, "e2e": 25}
"""Each metric's regression floor (percent of its SLO limit) where the spec sets none, fitted
from identical vLLM servers on an H100 and an H200 (docs/bench.md, "Allowances per metric")."""


class PercentileLimits(APIModel):
    """Upper limits in ms on percentiles of one latency metric."""

    p50: float | None = Field(default=None, gt=0, le=3_600_000, description="Median (ms).")
    p90: float | None = Field(default=None, gt=0, le=3_600_000, description="90th (ms).")
    p95: float | None = Field(default=None, gt=0, le=3_600_000, description="95th (ms).")
    p99: float | None = Field(default=None, gt=0, le=3_600_000, description="99th (ms).")
    regression_floor_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="This metric's allowance against the gate's baseline: the smallest "
        "regression of a limited percentile that counts, percent of its limit (wins over "
        "slo.regressionFloorPercent; absent: that, else ttft 10, itl 25, tpot 10, e2e 25). "
        "A canary's comparisons have their own floorMs and do not read it.",
    )

    def limits(self) -> dict[Percentile, float]:
        """The percentiles that have a limit."""
        return {p: v for p in PERCENTILES if (v := getattr(self, p)) is not None}


class SloLimits(APIModel):
    """Service-level objectives at one load level (all optional)."""

    ttft_ms: PercentileLimits | None = Field(default=None, description="Time to first token.")
    itl_ms: PercentileLimits | None = Field(
        default=None, description="Inter-token latency (gaps between streamed tokens)."
    )
    tpot_ms: PercentileLimits | None = Field(
        default=None, description="Time per output token: (end-to-end - TTFT) / (tokens - 1)."
    )
    # Explicit alias: to_camel would give "e2EMs" (it capitalises after a digit).
    e2e_ms: PercentileLimits | None = Field(
        default=None, alias="e2eMs", description="End-to-end latency."
    )
    min_goodput_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description=(
            "Least share of requests that met every latency limit above (goodput): a request "
            "meets a metric when it is within the limit of that metric's highest limited "
            "percentile (with p50 200 and p99 500, within 500 ms); failed requests never do."
        ),
    )
    max_error_percent: float | None = Field(
        default=None, ge=0, le=100, description="Largest share of failed requests."
    )

    def metric_limits(self) -> dict[LatencyMetric, dict[Percentile, float]]:
        """Metric -> percentile -> limit (ms), only those set."""
        out: dict[LatencyMetric, dict[Percentile, float]] = {}
        for metric in LATENCY_METRICS:
            limits: PercentileLimits | None = getattr(self, f"{metric}_ms")
            if limits is not None and limits.limits():
                out[metric] = limits.limits()
        return out


class LevelSlo(SloLimits):
    """Objectives for one load level, replacing the common ones there."""

    at: float = Field(gt=0, le=10_000, description="The load level (streams or requests/s).")


class SloThresholds(SloLimits):
    """Objectives at every load level, with per-level replacements."""

    regression_floor_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Shorthand for every metric's regressionFloorPercent (the smallest "
        "regression that counts, percent of the SLO limit) where a metric sets none. Absent: "
        "each metric's default, from identical servers: ttft 10, itl 25, tpot 10, e2e 25.",
    )

    levels: list[LevelSlo] = Field(
        default_factory=list,
        max_length=MAX_LEVELS,
        description="Objectives for single levels (they replace the common ones there).",
        json_schema_extra={"x-kubernetes-validations": SLO_LEVEL_RULES},
    )

    @field_validator("levels")
    @classmethod
    def _each_level_once(cls, levels: list[LevelSlo]) -> list[LevelSlo]:
        seen = [one.at for one in levels]
        twice = sorted({at for at in seen if seen.count(at) > 1})
        if twice:
            named = ", ".join(f"{at:g}" for at in twice)
            raise ValueError(f"slo.levels names level {named} more than once: keep one each")
        return levels

    def floor_percent(self, metric: LatencyMetric, at: SloLimits) -> tuple[float, str]:
        """(percent, what set it) of ``metric``'s regression floor where ``at`` (this or a
        level's entry) holds: the metric's own, else this shorthand, else its default."""
        own: PercentileLimits | None = getattr(at, f"{metric}_ms")
        if own is not None and own.regression_floor_percent is not None:
            return own.regression_floor_percent, f"{metric}Ms.regressionFloorPercent"
        if self.regression_floor_percent is not None:
            return self.regression_floor_percent, "slo.regressionFloorPercent"
        return DEFAULT_FLOOR_PERCENT[metric], f"the {metric} default"

    def at(self, level: float) -> SloLimits:
        """The objectives that hold at ``level``."""
        for one in self.levels:
            if one.at == level:
                return one
        return self

    @property
    def is_empty(self) -> bool:
        """True when no objective is set at any level."""
        return all(
            not s.metric_limits() and s.min_goodput_percent is None and s.max_error_percent is None
            for s in (self, *self.levels)
        )


def unmeasured_slo_levels(slo: SloThresholds | None, load: LoadSpec) -> str | None:
    """Why ``slo.levels`` names a level ``load`` never measures, or None (``SLO_AT_RULES``)."""
    if slo is None:
        return None
    missing = [one.at for one in slo.levels if one.at not in load.levels]
    if not missing:
        return None
    asked = ", ".join(f"{level:g}" for level in load.levels)
    return (
        f"gate.thresholds.slo.levels at {', '.join(f'{at:g}' for at in missing)}: not a level "
        f"of gate.workload.load ({load.mode}: {asked}); a level never measured has no figures "
        "to judge: name one of those"
    )
