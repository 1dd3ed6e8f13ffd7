"""``rollout.canary``: live traffic for a candidate that passed its gate, step by step.

The benchmark gate measures a candidate on synthetic requests; a canary then gives it a share
of the real ones and compares vLLM's own metrics of candidate and stable under that same
traffic. Kept apart from ``spec.py`` because the canary is a whole phase with its own
figures, and it shares the SLO limit types (``SloLimits``) with the SLO gate so a team writes
its limits once.

Whether a step can decide at all is a matter of counting: "p99 within its limit" needs at
least 437 requests with none above it at 95 % (``minimum_requests``).
``minimum_requests`` spells that count per percentile and confidence, and the CRD's CEL
rules carry the same table, so a canary whose steps cannot reach enough requests for its
highest limited percentile is refused by ``kubectl apply``, not found out an hour later.
"""

from __future__ import annotations

import itertools
import math
from typing import Annotated, Literal

from pydantic import Field, JsonValue, model_validator

from vllm_operator.api.base import APIModel
from vllm_operator.api.canary_prometheus import PrometheusSource
from vllm_operator.api.kube_rules import ObjectName
from vllm_operator.api.workload import PERCENTILES, Percentile, SloLimits

CanaryMetric = Literal["ttft", "itl", "e2e"]
CANARY_METRICS: tuple[CanaryMetric, ...] = ("ttft", "itl", "e2e")
CanaryPercentile = Literal["p50", "p95", "p99"]
TrafficMode = Literal["replicas", "gatewayAPI"]
Confidence = Literal[90, 95, 99]
CONFIDENCES: tuple[Confidence, ...] = (90, 95, 99)
MAX_STEPS = 10
# The percentiles of SloLimits the canary can judge (tpot is not a vLLM histogram).
_SLO_METRICS: tuple[str, ...] = ("ttft", "itl", "e2e")


def allowed_share(percentile: Percentile) -> float:
    """The share of requests a percentile leaves above itself: p99 -> 0.01."""
    return 1.0 - int(percentile[1:]) / 100.0


def minimum_requests(percentile: Percentile, confidence_percent: int) -> int:
    """Fewest requests that can show ``percentile`` within its limit at this confidence.

    A floor, not a promise: the tail judge judging a share against a limit at half of the
    error (``gate.tail_baseline``'s split) errs on the upper side with at most ``(1 - c) / 4``;
    the latency rule against the stable (``rollout.canary.latency``) needs more, as
    docs/rollout.md's table of vLLM's buckets says. With none of n requests
    above, that bound is ``1 - ((1 - c) / 4) ** (1 / n)``; it falls to the allowed share
    only from ``n = ln((1 - c) / 4) / ln(1 - allowed)`` (437 for p99 at 95 %). The judge
    lives above the API layer; a unit test holds this count to its ``observations_needed``.
    """
    allowed = allowed_share(percentile)
    miss = (1.0 - confidence_percent / 100.0) / 4
    return math.ceil(math.log(miss) / math.log(1.0 - allowed) - 1e-9)


def error_requests(points: float, confidence_percent: int) -> int:
    """Fewest requests that can show an error share within ``points`` percentage points of a
    stable without errors: the tail judge's share interval is two-sided (``judge_share``),
    so with no error the upper bound ``1 - ((1 - c) / 2) ** (1 / n)`` must reach the points.
    0 points can never be shown (any bound is above 0): 1, and the step waits."""
    share = points / 100
    if share <= 0:
        return 1
    if share >= 1:
        return 1
    miss = (1.0 - confidence_percent / 100.0) / 2
    return math.ceil(math.log(miss) / math.log(1.0 - share) - 1e-9)


class CanaryStep(APIModel):
    """One step: a share of the live traffic held for a time, then judged."""

    weight: int = Field(
        ge=1,
        le=99,
        description=(
            "Share of the serving traffic (percent) the candidate gets in this step (below "
            "100: the stable's figures under the same traffic are the comparison; the last "
            "step passed, promotion moves the rest). With traffic.mode replicas the share "
            "follows from whole replicas and is rounded up (status shows the share in effect)."
        ),
    )
    hold_seconds: int = Field(
        default=600,
        ge=10,
        le=86_400,
        description="How long the step holds its share before its figures are judged.",
    )


class LatencyRegression(APIModel):
    """One latency figure of the candidate judged against the stable's under the same traffic."""

    metric: CanaryMetric = Field(
        description=(
            "ttft (vllm:time_to_first_token_seconds), itl (vllm:inter_token_latency_seconds) "
            "or e2e (vllm:e2e_request_latency_seconds)."
        )
    )
    percentile: CanaryPercentile = Field(default="p95", description="p50, p95 or p99.")
    max_regression_percent: float = Field(
        default=100.0,
        ge=0,
        le=1000,
        description=(
            "Largest rise of the candidate's percentile over the stable's, in percent of "
            "the stable's; a rise counts only past floorMs as well. vLLM's histogram buckets "
            "step by up to 4x (TTFT 0.1 -> 0.25 s, 160 -> 640 s), so the limit is applied at "
            "the bucket bound nearest the stable's percentile and rounded to the nearest "
            "bucket bound above it; the step's reasons say which bound is used."
        ),
    )
    floor_ms: float = Field(
        default=25.0,
        ge=0,
        le=3_600_000,
        description=(
            "Smallest rise (ms) that counts as a regression whatever the percent: the "
            "histograms' buckets are coarse, and a few ms are noise."
        ),
    )


def _default_latency() -> list[LatencyRegression]:
    return [
        LatencyRegression(metric="ttft", percentile="p95"),
        LatencyRegression(metric="itl", percentile="p95"),
        LatencyRegression(metric="e2e", percentile="p95"),
    ]


class CanaryAnalysis(APIModel):
    """What each step is judged on: vLLM's own metrics of both revisions, as deltas over
    the step."""

    latency: list[LatencyRegression] = Field(
        default_factory=_default_latency,
        max_length=9,
        description=(
            "Latency percentiles judged against the stable's (default: TTFT, ITL and E2E "
            "p95, 100% and 25 ms)."
        ),
    )
    max_error_percent_points: float = Field(
        default=1.0,
        ge=0,
        le=100,
        description=(
            "Largest error share of the candidate (non-2xx answers and aborted requests, in "
            "percent of its requests) above the stable's error share, in percentage points."
        ),
    )
    max_throughput_drop_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description=(
            "Largest drop of generated tokens per second per replica against the stable's, "
            "in percent (unset: not judged; it follows the share of traffic each gets)."
        ),
    )
    slo: SloLimits | None = Field(
        default=None,
        description=(
            "Absolute limits the candidate's live figures must keep (the same type as "
            "gate.thresholds.slo; ttftMs, itlMs, e2eMs and maxErrorPercent are judged)."
        ),
    )
    use_gate_slo: bool = Field(
        default=False,
        description=(
            "Also hold the candidate to gate.thresholds.slo's common limits (its ttftMs, "
            "itlMs, e2eMs and maxErrorPercent), so the limits are written once."
        ),
    )
    min_requests: int = Field(
        default=400,
        ge=1,
        le=1_000_000,
        description=(
            "Fewest requests each revision must finish in a step before it is judged; a p99 "
            "needs at least 437 at confidence 95, a p95 86 (apply refuses fewer), and an "
            "error share maxErrorPercentPoints above a stable without errors ln(0.025) / "
            "ln(1 - points/100) (368 for 1 point at 95%)."
        ),
    )
    max_extensions: int = Field(
        default=2,
        ge=0,
        le=10,
        description=(
            "Times a step with too few requests is held for another holdSeconds before it "
            "is Inconclusive (then rollout.onInconclusive decides)."
        ),
    )
    confidence_percent: Confidence = Field(
        default=95,
        description="Confidence of each decision: 90, 95 or 99.",
    )
    interval_seconds: int = Field(
        default=30,
        ge=1,
        le=3600,
        description=(
            "How often the pods are read inside a step (the step's counts add up read by read, "
            "so a counter reset loses nothing), and the candidate checked for a clear breach: "
            "a server container restart or OOM kill, or an error share beyond the limit at "
            "99.9% confidence, fails the step at once without waiting for its end."
        ),
    )
    prometheus: PrometheusSource | None = Field(
        default=None,
        description=(
            "Read the step's counts from this Prometheus instead of the pods' /metrics "
            "(unset: the operator reads the pods; the same figures are judged either way)."
        ),
    )

    def highest_percentile(self, gate_slo: SloLimits | None = None) -> Percentile | None:
        """The highest percentile any figure of the analysis judges."""
        judged: set[Percentile] = {one.percentile for one in self.latency}
        for limits in (self.slo, gate_slo if self.use_gate_slo else None):
            if limits is None:
                continue
            for metric in _SLO_METRICS:
                found = getattr(limits, f"{metric}_ms")
                if found is not None:
                    judged |= set(found.limits())
        ordered = [p for p in PERCENTILES if p in judged]
        return ordered[-1] if ordered else None

    @model_validator(mode="after")
    def _enough_requests(self) -> CanaryAnalysis:
        errors = error_requests(self.max_error_percent_points, self.confidence_percent)
        if self.min_requests < errors:
            raise ValueError(
                f"rollout.canary.analysis.minRequests ({self.min_requests}) is too few to show "
                f"an error share within {self.max_error_percent_points:g} point(s) of a stable "
                f"without errors at confidence {self.confidence_percent}%: it needs at least "
                f"{errors}; raise minRequests or maxErrorPercentPoints"
            )
        top = self.highest_percentile()
        if top is None:
            return self
        needed = minimum_requests(top, self.confidence_percent)
        if self.min_requests < needed:
            raise ValueError(
                f"rollout.canary.analysis.minRequests ({self.min_requests}) is too few to judge "
                f"a {top} at confidence {self.confidence_percent}%: it needs at least {needed} "
                "requests per step; raise minRequests (and the steps' holdSeconds) or judge a "
                "lower percentile"
            )
        return self


class HTTPRouteRef(APIModel):
    """The Gateway API HTTPRoute whose backend weights the canary sets."""

    name: ObjectName = Field(description="Name of the HTTPRoute in the resource's namespace.")
    rules: list[Annotated[int, Field(ge=0, le=63)]] | None = Field(
        default=None,
        max_length=16,
        description=(
            "Indices of spec.rules whose serving-Service backend a step splits (unset: every "
            "rule with the serving Service as a backend and no header or query-parameter "
            "match; a header-pinned rule keeps its backends). Only the serving backend's "
            "own weight is split; other backends keep their share, and the rules are "
            "restored exactly as they were afterwards."
        ),
    )


class CanaryTraffic(APIModel):
    """How the candidate's share of the live traffic is made."""

    mode: TrafficMode = Field(
        default="replicas",
        description=(
            "replicas: the serving Service selects both revisions' pods and the share "
            "follows from their Ready replicas (no mesh needed; kube-proxy spreads "
            "connections, so the share holds per connection, on average). gatewayAPI: the "
            "operator sets the backend weights of httpRoute between the serving Service "
            "(stable) and the candidate Service."
        ),
    )
    http_route: HTTPRouteRef | None = Field(
        default=None, description="The HTTPRoute to weight (mode gatewayAPI only)."
    )

    @model_validator(mode="after")
    def _route_with_gateway(self) -> CanaryTraffic:
        if (self.mode == "gatewayAPI") != (self.http_route is not None):
            raise ValueError(
                "rollout.canary.traffic: mode gatewayAPI needs httpRoute.name, and httpRoute "
                "is only read with mode gatewayAPI"
            )
        return self


def _needed_rule(confidence: int, percentile: Percentile) -> str:
    return (
        f"((has(self.confidencePercent) ? self.confidencePercent : 95) != {confidence} || "
        f"(has(self.minRequests) ? self.minRequests : 300) >= "
        f"{minimum_requests(percentile, confidence)})"
    )


def _analysis_rules() -> list[JsonValue]:
    """CEL: minRequests can decide the highest percentile the analysis judges."""
    rules: list[JsonValue] = []
    percentiles: tuple[Percentile, ...] = ("p50", "p95", "p99")
    for percentile in percentiles:
        judged = (
            "(has(self.slo) && ("
            + " || ".join(
                f"(has(self.slo.{m}Ms) && has(self.slo.{m}Ms.{percentile}))"
                for m in ("ttft", "itl", "e2e")
            )
            + f")) || (has(self.latency) ? self.latency.exists(l, has(l.percentile) && "
            f"l.percentile == '{percentile}') : {str(percentile == 'p95').lower()})"
        )
        table = " && ".join(_needed_rule(c, percentile) for c in CONFIDENCES)
        rules.append(
            {
                "rule": f"!({judged}) || ({table})",
                "message": (
                    f"minRequests is too few to judge a {percentile} at this confidence "
                    f"(at 95%: {minimum_requests(percentile, 95)}); raise minRequests or judge "
                    "a lower percentile"
                ),
            }
        )
    return rules


ANALYSIS_RULES: list[JsonValue] = _analysis_rules()
TRAFFIC_RULES: list[JsonValue] = [
    {
        "rule": (
            "((has(self.mode) ? self.mode : 'replicas') == 'gatewayAPI') == has(self.httpRoute)"
        ),
        "message": "mode gatewayAPI needs httpRoute.name; httpRoute is only read with gatewayAPI",
    }
]
STEPS_RULES: list[JsonValue] = [
    {
        # CEL in Kubernetes has no index range: one clause per neighbouring pair.
        "rule": " && ".join(
            f"(size(self) <= {i} || self[{i}].weight > self[{i - 1}].weight)"
            for i in range(1, MAX_STEPS)
        ),
        "message": "each step's weight must be above the previous step's",
    }
]


def gate_slo_problem(canary: CanarySpec, gate_slo: SloLimits | None) -> str | None:
    """With ``useGateSlo``, the gate's limits may ask for a percentile minRequests cannot
    decide; the message says so (None when it can)."""
    analysis = canary.analysis
    if not analysis.use_gate_slo:
        return None
    top = analysis.highest_percentile(gate_slo)
    if top is None:
        return None
    needed = minimum_requests(top, analysis.confidence_percent)
    if analysis.min_requests >= needed:
        return None
    return (
        f"rollout.canary.analysis.useGateSlo takes gate.thresholds.slo's {top} limit, which "
        f"needs at least {needed} requests per step at confidence "
        f"{analysis.confidence_percent}%; raise rollout.canary.analysis.minRequests "
        f"(now {analysis.min_requests})"
    )


class CanarySpec(APIModel):
    """Steps of live traffic after the benchmark gate, each judged on vLLM's metrics."""

    steps: list[CanaryStep] = Field(
        min_length=1,
        max_length=MAX_STEPS,
        description=(
            "Shares of the traffic in rising order (e.g. 10% for 10 min, then 50% for 10 "
            "min); the last step passed, the candidate is promoted as without a canary."
        ),
        json_schema_extra={"x-kubernetes-validations": STEPS_RULES},
    )
    analysis: CanaryAnalysis = Field(
        default_factory=CanaryAnalysis,
        description="The figures judged at the end of each step, and how many requests it needs.",
        json_schema_extra={"x-kubernetes-validations": ANALYSIS_RULES},
    )
    traffic: CanaryTraffic = Field(
        default_factory=CanaryTraffic,
        description="How the share is made: replica counts (default) or Gateway API weights.",
        json_schema_extra={"x-kubernetes-validations": TRAFFIC_RULES},
    )
    progress_deadline_seconds: int = Field(
        default=1200,
        ge=30,
        le=86_400,
        description=(
            "Longest a step may go without progress while the traffic is shared: from the "
            "step's start (its pods asked for) or the last read of every pod, until its pods "
            "are Ready, the route takes its weights and the pods' metrics are read. Past it "
            "the canary fails and the traffic goes back to the stable (pods that never become "
            "Ready, a missing HTTPRoute, metrics that cannot be read). The default, 20 min, "
            "covers a cold start of a large model; raise it for slower starts."
        ),
    )

    @model_validator(mode="after")
    def _rising_steps(self) -> CanarySpec:
        weights = [s.weight for s in self.steps]
        if any(b <= a for a, b in itertools.pairwise(weights)):
            raise ValueError(
                f"rollout.canary.steps: weights must rise from step to step, got {weights}"
            )
        prometheus = self.analysis.prometheus
        gateway = prometheus.gateway_errors if prometheus is not None else None
        if gateway is not None and self.traffic.mode != "gatewayAPI":
            raise ValueError(
                "rollout.canary.analysis.prometheus.gatewayErrors needs traffic.mode "
                "gatewayAPI: with replicas the gateway sends both revisions' requests to "
                "the one serving Service, and its failures cannot be told apart"
            )
        return self


class CanaryFigures(APIModel):
    """One revision's live figures over the last judged canary step (bucket-bound estimates
    of its percentiles: vLLM's histograms know no finer)."""

    revision: str = Field(description="The revision these figures are of.")
    pods: int = Field(default=0, ge=0, description="Pods scraped.")
    restarted_pods: int = Field(
        default=0, ge=0, description="Pods restarted inside the step (counted since restart)."
    )
    requests: int = Field(default=0, ge=0, description="Requests finished in the step.")
    error_percent: float = Field(default=0.0, description="Non-2xx or aborted, in percent.")
    tokens_per_second_per_replica: float = Field(
        default=0.0, description="Generated tokens per second per pod."
    )
    ttft_p95_ms: float | None = Field(default=None, description="TTFT p95 (bucket bound, ms).")
    itl_p95_ms: float | None = Field(default=None, description="ITL p95 (bucket bound, ms).")
    e2e_p95_ms: float | None = Field(
        default=None, alias="e2eP95Ms", description="E2E p95 (bucket bound, ms)."
    )


class CanaryStatus(APIModel):
    """Where the canary stands: its step, the share of traffic, the figures of both sides."""

    step: int = Field(ge=1, description="The current step (from 1).")
    steps: int = Field(ge=1, description="Steps in all.")
    weight: int = Field(ge=0, le=100, description="The share the step asks for (percent).")
    share_percent: float = Field(
        default=0.0,
        ge=0,
        le=100,
        description=(
            "The share in effect: with traffic.mode replicas candidate / (candidate + stable) "
            "Ready pods (rounded up to whole replicas), with gatewayAPI the candidate's share "
            "of the split route rule's traffic (other backends of the rule included)."
        ),
    )
    mode: TrafficMode = Field(default="replicas", description="How the share is made.")
    started_at: str | None = Field(
        default=None, description="When the step's share was in place and first scraped."
    )
    due_at: str | None = Field(default=None, description="When the step is judged.")
    extensions: int = Field(default=0, ge=0, description="Times the step was held longer.")
    candidate: CanaryFigures | None = Field(
        default=None, description="The candidate's figures over the last judged step."
    )
    stable: CanaryFigures | None = Field(
        default=None, description="The stable's figures over the last judged step."
    )
    last_judgement: list[Annotated[str, Field(max_length=1024)]] = Field(
        default_factory=list,
        max_length=16,
        description="The last judged step's figures, failed first.",
    )
