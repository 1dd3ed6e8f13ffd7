"""Day-2 fields of the spec: ``autoscaling`` (replicas follow load) and ``disruption``.

Kept apart from ``spec.py`` because neither changes what the pods run (no new revision):
they decide how many pods of the serving revision there are and how many may be taken away
at once. The metric targets are vLLM's own gauges and histogram, by the names vLLM exports
(``vllm/v1/metrics/loggers.py``, ``PrometheusStatLogger``, read in a 0.10-era and a
0.12.x-era copy of vLLM's source; listed for 0.17-0.33 in shared/docs/vllm-facts.md):
``vllm:num_requests_waiting``,
``vllm:kv_cache_usage_perc`` (a fraction, 1 = 100 %) and
``vllm:time_to_first_token_seconds``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue, model_validator

from vllm_operator.api.base import APIModel

AutoscalingEngine = Literal["hpa", "keda"]

# The waiting-queue target used when a spec names no target at all.
DEFAULT_WAITING_PER_POD = 5.0

AUTOSCALING_RULES: list[JsonValue] = [
    {
        "rule": "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
        "message": "minReplicas must not exceed maxReplicas",
    },
    {
        "rule": "!has(self.engine) || self.engine != 'keda' || has(self.prometheus)",
        "message": "engine keda needs prometheus.serverAddress (KEDA queries Prometheus)",
    },
]
DISRUPTION_RULES: list[JsonValue] = [
    {
        "rule": "!(has(self.maxUnavailable) && has(self.minAvailable))",
        "message": "set maxUnavailable or minAvailable, not both",
    }
]


class TTFTTarget(APIModel):
    """A time-to-first-token percentile per pod to keep under a limit."""

    percentile: Literal[50, 90, 95, 99] = Field(
        default=95, description="Percentile of vllm:time_to_first_token_seconds (50-99)."
    )
    seconds: float = Field(
        gt=0, le=3600, description="Scale out when the percentile per pod exceeds this."
    )


class AutoscalingTargets(APIModel):
    """What the autoscaler keeps each pod of the serving revision at (any of them)."""

    waiting_requests_per_pod: float | None = Field(
        default=None,
        gt=0,
        le=100_000,
        description=(
            "Average vllm:num_requests_waiting per pod (requests queued, not yet scheduled). "
            "The default target (5) when no target is set."
        ),
    )
    kv_cache_usage_percent: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description=(
            "Average vllm:kv_cache_usage_perc per pod, in percent (vLLM exports a fraction: "
            "80 here is 0.8 there)."
        ),
    )
    ttft: TTFTTarget | None = Field(
        default=None,
        description="A TTFT percentile per pod (needs the histogram rule of docs/autoscaling.md).",
    )


class PrometheusSpec(APIModel):
    """Where KEDA's prometheus trigger reads vLLM's metrics."""

    server_address: str = Field(
        min_length=1,
        max_length=1024,
        pattern=r"^https?://[^\s]+$",
        description="Prometheus URL, e.g. http://prometheus-operated.monitoring:9090.",
    )


class AutoscalingSpec(APIModel):
    """Scale the serving (stable) revision with load; the gate's candidate stays outside."""

    min_replicas: int = Field(default=1, ge=1, le=1024, description="Fewest serving replicas.")
    max_replicas: int = Field(ge=1, le=1024, description="Most serving replicas.")
    engine: AutoscalingEngine = Field(
        default="hpa",
        description=(
            "hpa: an autoscaling/v2 HorizontalPodAutoscaler on Pods metrics (the custom "
            "metrics API, e.g. Prometheus Adapter). keda: a KEDA ScaledObject with "
            "prometheus triggers (needs KEDA and prometheus.serverAddress)."
        ),
    )
    targets: AutoscalingTargets = Field(
        default_factory=AutoscalingTargets,
        description="Per-pod targets; none set means waitingRequestsPerPod 5.",
    )
    prometheus: PrometheusSpec | None = Field(
        default=None, description="Prometheus for engine keda (ignored by hpa)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> AutoscalingSpec:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"minReplicas ({self.min_replicas}) must not exceed maxReplicas "
                f"({self.max_replicas}): raise maxReplicas or lower minReplicas"
            )
        if self.engine == "keda" and self.prometheus is None:
            raise ValueError(
                "engine keda needs prometheus.serverAddress (the Prometheus KEDA queries); "
                "add it or use engine hpa"
            )
        return self

    def clamp(self, replicas: int) -> int:
        """``replicas`` within [minReplicas, maxReplicas]."""
        return max(self.min_replicas, min(self.max_replicas, replicas))

    @property
    def effective_targets(self) -> AutoscalingTargets:
        """The targets, with the default waiting-queue target when none is set."""
        t = self.targets
        if t.waiting_requests_per_pod is None and t.kv_cache_usage_percent is None and not t.ttft:
            return t.model_copy(update={"waiting_requests_per_pod": DEFAULT_WAITING_PER_POD})
        return t


def _int_or_string(schema: dict[str, JsonValue]) -> None:
    """A Kubernetes IntOrString in the CRD: no type, ``x-kubernetes-int-or-string``."""
    schema.pop("anyOf", None)
    schema["x-kubernetes-int-or-string"] = True


class DisruptionSpec(APIModel):
    """The PodDisruptionBudget of the serving revision (drains, node upgrades)."""

    max_unavailable: int | str | None = Field(
        default=None,
        description=(
            "Serving pods a voluntary disruption may take at once (a number or a percentage "
            "such as 25%). Default 1 when minAvailable is not set."
        ),
        json_schema_extra=_int_or_string,
    )
    min_available: int | str | None = Field(
        default=None,
        description="Serving pods that must stay up (a number or a percentage); instead of "
        "maxUnavailable.",
        json_schema_extra=_int_or_string,
    )

    @model_validator(mode="after")
    def _one_of(self) -> DisruptionSpec:
        if self.max_unavailable is not None and self.min_available is not None:
            raise ValueError("set maxUnavailable or minAvailable, not both")
        for name, value in (
            ("maxUnavailable", self.max_unavailable),
            ("minAvailable", self.min_available),
        ):
            if isinstance(value, int) and not 0 <= value <= 100_000:
                raise ValueError(f"{name} must be between 0 and 100000, got {value}")
            if isinstance(value, str) and not _percent(value):
                raise ValueError(f"{name} must be a number or a percentage such as 25%")
        return self

    def budget(self) -> dict[str, int | str]:
        """The policy/v1 field this spec sets: maxUnavailable 1 unless told otherwise."""
        if self.min_available is not None:
            return {"minAvailable": self.min_available}
        return {"maxUnavailable": 1 if self.max_unavailable is None else self.max_unavailable}


def _percent(text: str) -> bool:
    digits = text.removesuffix("%")
    return text.endswith("%") and digits.isdigit() and 0 <= int(digits) <= 100 and len(text) <= 4
