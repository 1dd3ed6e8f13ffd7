"""The operator's own Prometheus metrics, on a registry passed in (never the global one).

What a platform team graphs and alerts on: how often the operator reconciles and fails,
how long a pass takes, the gate's verdicts, the benchmark figures of every revision it
judged (so a dashboard shows 0.16 eager next to 0.17 throughput), each resource's phase,
and, while a canary runs, its step, the share of the serving traffic each revision gets and
the live figures of both revisions that the last judged step compared (so an alert can fire
on a canary that stays at one step). A resource's series are removed when it is deleted, so
old revisions do not linger; a canary's series are removed when its canary ends.
"""

from __future__ import annotations

import contextlib
from typing import get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from vllm_operator.api.canary import CanaryFigures
from vllm_operator.api.status import GateRecord, Phase, VLLMDeploymentStatus

# The phases come from the API's Literal, so a new phase cannot be missing here.
PHASES: tuple[Phase, ...] = get_args(Phase)
# The live figures a canary step compares (CanaryFigures' fields), as metric label values.
CANARY_FIGURES: tuple[str, ...] = (
    "requests",
    "error_percent",
    "tokens_per_second_per_replica",
    "ttft_p95_ms",
    "itl_p95_ms",
    "e2e_p95_ms",
)


class OperatorMetrics:
    """Every metric of the operator, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.reconciliations = Counter(
            "vllm_operator_reconciliations",
            "Reconcile passes of VLLMDeployments.",
            registry=registry,
        )
        self.errors = Counter(
            "vllm_operator_reconcile_errors",
            "Reconcile passes that failed, by error kind.",
            ["kind"],
            registry=registry,
        )
        self.duration = Histogram(
            "vllm_operator_reconcile_duration_seconds",
            "Wall time of one reconcile pass (read, plan, apply).",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=registry,
        )
        self.verdicts = Counter(
            "vllm_operator_gate_verdicts",
            "Gate verdicts, by outcome and by who decided (gate, person, deadline).",
            ["outcome", "decided_by"],
            registry=registry,
        )
        resource = ["namespace", "name", "revision"]
        self.latency = Gauge(
            "vllm_operator_benchmark_latency_median_ms",
            "Median end-to-end latency measured by the gate, per prompt class.",
            [*resource, "prompt_class"],
            registry=registry,
        )
        self.throughput = Gauge(
            "vllm_operator_benchmark_tokens_per_second",
            "Aggregate output tokens/s measured by the gate, per concurrency level.",
            [*resource, "concurrency"],
            registry=registry,
        )
        self.quality = Gauge(
            "vllm_operator_benchmark_quality_passed",
            "Quality-suite tests passed in the gate.",
            resource,
            registry=registry,
        )
        self.quality_total = Gauge(
            "vllm_operator_benchmark_quality_total",
            "Quality-suite tests run in the gate.",
            resource,
            registry=registry,
        )
        self.phase = Gauge(
            "vllm_operator_phase",
            "Current phase of each VLLMDeployment (1 for the current phase, 0 otherwise).",
            ["namespace", "name", "phase"],
            registry=registry,
        )
        self.leader = Gauge(
            "vllm_operator_leader",
            "1 while this replica may reconcile (holds the leader-election Lease, or runs "
            "without leader election), 0 while it stands by.",
            registry=registry,
        )
        self.canary_step = Gauge(
            "vllm_operator_canary_step",
            "The canary step the candidate revision is in (from 1; absent without a canary).",
            [*resource, "steps"],
            registry=registry,
        )
        self.canary_share = Gauge(
            "vllm_operator_canary_traffic_share_percent",
            "Share of the serving traffic per revision during a canary, in percent (role "
            "candidate: the share in effect; role stable: the rest).",
            [*resource, "role"],
            registry=registry,
        )
        self.canary_live = Gauge(
            "vllm_operator_canary_live_figure",
            "The live figures of each revision over the last judged canary step (figure: "
            "requests, error_percent, tokens_per_second_per_replica, ttft_p95_ms, itl_p95_ms, "
            "e2e_p95_ms; percentiles are histogram bucket bounds).",
            [*resource, "role", "figure"],
            registry=registry,
        )
        self._revisions: dict[tuple[str, str], set[str]] = {}

    def reconciled(self, seconds: float) -> None:
        self.reconciliations.inc()
        self.duration.observe(seconds)

    def failed(self, exc: BaseException) -> None:
        self.errors.labels(kind=type(exc).__name__).inc()

    def set_phase(self, namespace: str, name: str, phase: str) -> None:
        for candidate in PHASES:
            self.phase.labels(namespace, name, candidate).set(1.0 if candidate == phase else 0.0)

    def verdict(self, namespace: str, name: str, record: GateRecord) -> None:
        self.verdicts.labels(outcome=record.outcome, decided_by=record.decided_by).inc()
        summary = record.summary
        if summary is None:
            return
        rev = record.revision
        self._revisions.setdefault((namespace, name), set()).add(rev)
        for figure in summary.latency:
            self.latency.labels(namespace, name, rev, figure.prompt_class).set(figure.median_ms)
        for level in summary.concurrency:
            self.throughput.labels(namespace, name, rev, str(level.concurrency)).set(
                level.aggregate_tokens_per_second
            )
        if summary.quality is not None:
            self.quality.labels(namespace, name, rev).set(summary.quality.passed)
            self.quality_total.labels(namespace, name, rev).set(summary.quality.total)

    def canary(self, namespace: str, name: str, status: VLLMDeploymentStatus) -> None:
        """The canary's series from the status a pass wrote: set while a canary runs, removed
        once it has ended (promoted, failed, aborted, replaced)."""
        for gauge in (self.canary_step, self.canary_share, self.canary_live):
            _remove_resource(gauge, namespace, name)
        canary, candidate = status.canary, status.candidate
        if canary is None or candidate is None:
            return
        self.canary_step.labels(namespace, name, candidate.revision, str(canary.steps)).set(
            canary.step
        )
        self.canary_share.labels(namespace, name, candidate.revision, "candidate").set(
            canary.share_percent
        )
        if status.stable is not None:
            self.canary_share.labels(namespace, name, status.stable.revision, "stable").set(
                100.0 - canary.share_percent
            )
        for role, figures in (("candidate", canary.candidate), ("stable", canary.stable)):
            if figures is not None:
                self._live(namespace, name, role, figures)

    def _live(self, namespace: str, name: str, role: str, figures: CanaryFigures) -> None:
        for figure in CANARY_FIGURES:
            value = getattr(figures, figure)
            if value is not None:
                self.canary_live.labels(namespace, name, figures.revision, role, figure).set(
                    float(value)
                )

    def forget(self, namespace: str, name: str) -> None:
        """Drop every series of a deleted resource."""
        for candidate in PHASES:
            with contextlib.suppress(KeyError):
                self.phase.remove(namespace, name, candidate)
        for gauge in (self.canary_step, self.canary_share, self.canary_live):
            _remove_resource(gauge, namespace, name)
        for gauge in (self.latency, self.throughput, self.quality, self.quality_total):
            for labels in list(_label_sets(gauge)):
                if labels[:2] == (namespace, name):
                    gauge.remove(*labels)
        self._revisions.pop((namespace, name), None)


def _remove_resource(gauge: Gauge, namespace: str, name: str) -> None:
    """Remove every series of ``gauge`` whose first labels are (namespace, name)."""
    for labels in _label_sets(gauge):
        if labels[:2] == (namespace, name):
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)


def _label_sets(gauge: Gauge) -> list[tuple[str, ...]]:
    return [
        tuple(sample.labels[n] for n in gauge._labelnames)
        for metric in gauge.collect()
        for sample in metric.samples
    ]
