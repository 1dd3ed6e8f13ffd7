"""One canary step judged: candidate against stable, from what their pods counted. Pure.

The figures are vLLM's own histograms and counters as deltas over the step
(``metrics``), and every decision is made on shares of observations above bounds, each pod
one cluster of observations: a latency percentile against the stable's at two bucket bounds
(``latency``: the limit rounded to a bound, and the reason says which), error shares and SLO
limits by the tail judge (``gate.tails``). Nothing here estimates a percentile to compare two
numbers; the figures shown in status are for people.

A step is
- **Failed** when any figure is beyond its limit with confidence (the reasons name each);
- **Passed** when both revisions finished ``minRequests`` and every figure is within;
- **Waiting** otherwise (too few requests, or a figure still undecided): the planner holds
  the step longer, up to ``maxExtensions`` times, then calls it Inconclusive.

Inside a step, at every read, ``early_breach`` looks for a clear breach only: the error
share beyond its limit at ``EARLY_CONFIDENCE`` (stricter than the step's own, since it is
looked at many times) with at least ``EARLY_MIN_REQUESTS`` candidate requests. A
candidate failing every request is stopped at the first read that has them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from vllm_operator.api.canary import CANARY_METRICS, CanaryAnalysis
from vllm_operator.api.workload import SloLimits
from vllm_operator.gate.tails import Exceedance, allowed_share, judge_share
from vllm_operator.gate.tallies import histogram_exceedance
from vllm_operator.rollout.canary.latency import (
    PodHistogram,
    describe,
    gap_design_effect,
    judge_latency,
)
from vllm_operator.rollout.canary.metrics import PodDelta

StepDecision = Literal["Passed", "Failed", "Waiting"]
FigureDecision = Literal["beyond", "within", "undecided"]
_EDGE = 1e-9  # judge_share needs an allowed share strictly inside (0, 1)
EARLY_CONFIDENCE = 0.999
EARLY_MIN_REQUESTS = 20
_LABELS = {"ttft": "TTFT", "itl": "ITL", "e2e": "E2E"}


@dataclass(frozen=True)
class Figure:
    """One judged figure of the step."""

    name: str  # "TTFT p95", "error share", "tokens/s per replica", "TTFT p99 SLO"
    decision: FigureDecision
    text: str  # what people read: both sides and the limit


@dataclass(frozen=True)
class LiveFigures:
    """One revision's figures over the step, for status (estimates at bucket bounds)."""

    requests: int
    error_percent: float
    tokens_per_second_per_replica: float
    pods: int
    restarted_pods: int
    ttft_p95_ms: float | None
    itl_p95_ms: float | None
    e2e_p95_ms: float | None


@dataclass(frozen=True)
class StepJudgement:
    """The step's decision, why, and both revisions' figures."""

    decision: StepDecision
    figures: tuple[Figure, ...]
    candidate: LiveFigures
    stable: LiveFigures
    enough_requests: bool

    @property
    def failed_figures(self) -> list[Figure]:
        return [f for f in self.figures if f.decision == "beyond"]

    def reasons(self) -> list[str]:
        """Failed figures first, then undecided, then within (severity order)."""
        order = {"beyond": 0, "undecided": 1, "within": 2}
        return [f.text for f in sorted(self.figures, key=lambda f: order[f.decision])]


def _pooled(deltas: Mapping[str, PodDelta], metric: str) -> tuple[tuple[float, float], ...]:
    pooled: dict[float, float] = {}
    for one in deltas.values():
        for le, count in one.counts.histograms.get(metric, ()):
            pooled[le] = pooled.get(le, 0.0) + count
    return tuple(sorted(pooled.items()))


def bucket_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """The smallest bucket bound holding a ``q`` share of the observations (an estimate
    never below the true quantile); None without observations or when only +Inf does."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    for le, count in buckets:
        if count >= q * total:
            return le if math.isfinite(le) else None
    return None


def live_figures(deltas: Mapping[str, PodDelta], seconds: float) -> LiveFigures:
    """A revision's figures over a step of ``seconds``."""
    requests = sum(d.counts.requests for d in deltas.values())
    errors = sum(d.counts.errors for d in deltas.values())
    tokens = sum(d.counts.generation_tokens for d in deltas.values())
    pods = len(deltas)

    def ms(metric: str) -> float | None:
        value = bucket_quantile(_pooled(deltas, metric), 0.95)
        return None if value is None else round(value * 1000, 3)

    return LiveFigures(
        requests=int(requests),
        error_percent=round(100 * errors / requests, 3) if requests > 0 else 0.0,
        tokens_per_second_per_replica=(
            round(tokens / seconds / pods, 3) if seconds > 0 and pods > 0 else 0.0
        ),
        pods=pods,
        restarted_pods=sum(1 for d in deltas.values() if d.restarted),
        ttft_p95_ms=ms("ttft"),
        itl_p95_ms=ms("itl"),
        e2e_p95_ms=ms("e2e"),
    )


def _histograms(deltas: Mapping[str, PodDelta], metric: str) -> list[PodHistogram]:
    """Each pod's histogram of ``metric``; ITL gaps carry their gaps-per-request design effect."""
    out: list[PodHistogram] = []
    for one in deltas.values():
        buckets = one.counts.histograms.get(metric)
        if not buckets or buckets[-1][1] <= 0:
            continue
        effect = 1.0
        if metric == "itl":
            effect = gap_design_effect(buckets, one.counts.histograms.get("e2e", ()))
        out.append(PodHistogram(tuple(buckets), effect))
    return out


def _latency(
    analysis: CanaryAnalysis,
    candidate: Mapping[str, PodDelta],
    stable: Mapping[str, PodDelta],
) -> list[Figure]:
    confidence = analysis.confidence_percent / 100
    out: list[Figure] = []
    for limit in analysis.latency:
        name = f"{_LABELS[limit.metric]} {limit.percentile}"
        ratio, floor = 1 + limit.max_regression_percent / 100, limit.floor_ms / 1000

        def threshold(value: float, ratio: float = ratio, floor: float = floor) -> float:
            return max(value * ratio, value + floor)

        judged = judge_latency(
            _histograms(candidate, limit.metric),
            _histograms(stable, limit.metric),
            allowed_share(limit.percentile),
            threshold,
            confidence,
        )
        rule = f"+{limit.max_regression_percent:g}% and +{limit.floor_ms:g} ms"
        if judged.pair is None:
            out.append(
                Figure(name, "undecided", f"{name} undecided against {rule}: {judged.reason}")
            )
            continue
        pair, shown = judged.pair, _shown(candidate, stable, limit.metric, limit.percentile)
        verdict = {
            "beyond": f"regressed beyond {rule} of stable",
            "within": f"within {rule} of stable",
            "undecided": f"undecided against {rule} of stable (more requests decide it)",
        }[judged.decision]
        text = (
            f"{name} {verdict}: {100 * judged.candidate_share:.2f}% of the candidate's "
            f"observations above {pair.candidate * 1000:g} ms, {100 * judged.stable_share:.2f}% "
            f"of the stable's above {pair.stable * 1000:g} ms (difference "
            f"{100 * judged.low:+.2f} to {100 * judged.high:+.2f} points; {describe(pair)}); "
            f"{shown}"
        )
        out.append(Figure(name, judged.decision, text))
    return out


def _shown(
    candidate: Mapping[str, PodDelta], stable: Mapping[str, PodDelta], metric: str, p: str
) -> str:
    q = 1 - allowed_share(p)

    def one(deltas: Mapping[str, PodDelta]) -> str:
        value = bucket_quantile(_pooled(deltas, metric), q)
        return "over the largest bucket" if value is None else f"<= {value * 1000:g} ms"

    return f"candidate {one(candidate)}, stable {one(stable)} (bucket bounds)"


def _slo(
    limits: SloLimits, candidate: Mapping[str, PodDelta], confidence: float, source: str
) -> list[Figure]:
    out: list[Figure] = []
    for metric in CANARY_METRICS:
        found = getattr(limits, f"{metric}_ms")
        if found is None:
            continue
        for percentile, limit_ms in found.limits().items():
            name = f"{_LABELS[metric]} {percentile} {source}"
            # ITL gaps carry their gaps-per-request design effect: they share their request's fate
            clusters = [
                replace(
                    histogram_exceedance(h.buckets, limit_ms / 1000),
                    design_effect=h.design_effect,
                )
                for h in _histograms(candidate, metric)
            ]
            if not clusters:
                out.append(Figure(name, "undecided", f"{name}: no candidate observations"))
                continue
            judged = judge_share(clusters, allowed_share(percentile), confidence)
            verb = {"beyond": "beyond", "within": "within", "undecided": "undecided at"}
            out.append(
                Figure(
                    name,
                    judged.decision,
                    f"{name} {verb[judged.decision]} {limit_ms:g} ms: "
                    f"{100 * judged.share:.2f}% of the candidate's observations above "
                    f"(interval {100 * judged.low:.2f}-{100 * judged.high:.2f}%, allowed "
                    f"{100 * judged.allowed:g}%)",
                )
            )
    if limits.max_error_percent is not None:
        out.append(
            _error_share(
                candidate,
                limits.max_error_percent / 100,
                confidence,
                f"error share {source}",
                f"limit {limits.max_error_percent:g}%",
            )
        )
    return out


def _error_share(
    candidate: Mapping[str, PodDelta], allowed: float, confidence: float, name: str, rule: str
) -> Figure:
    clusters = [
        Exceedance(above=d.counts.errors, total=d.counts.requests)
        for d in candidate.values()
        if d.counts.requests > 0
    ]
    allowed = min(max(allowed, _EDGE), 1 - _EDGE)
    if not clusters:
        return Figure(name, "undecided", f"{name}: the candidate answered no requests")
    judged = judge_share(clusters, allowed, confidence)
    return Figure(
        name,
        judged.decision,
        f"{name} {judged.decision}: candidate {100 * judged.share:.2f}% of "
        f"{judged.observations:.0f} requests failed (interval {100 * judged.low:.2f}-"
        f"{100 * judged.high:.2f}%; {rule})",
    )


def _throughput(
    limit_percent: float, candidate: LiveFigures, stable: LiveFigures, pod_load: float
) -> Figure:
    """Tokens/s per replica against the stable's, scaled by the requests a candidate pod gets
    over a stable pod's by the routing (``pod_load``): with fewer requests a healthy pod
    generates fewer tokens, so an unscaled comparison would fail it for its share."""
    name = "tokens/s per replica"
    ours, theirs = candidate.tokens_per_second_per_replica, stable.tokens_per_second_per_replica
    expected = theirs * pod_load
    scaled = "" if _even(pod_load) else f" x {pod_load:.2f} per-pod load = {expected:g}"
    text = (
        f"{name}: candidate {ours:g}, stable {theirs:g}{scaled} (allowed drop {limit_percent:g}%)"
    )
    if expected <= 0:
        return Figure(name, "undecided", text)
    drop = 100 * (1 - ours / expected)
    return Figure(name, "beyond" if drop > limit_percent else "within", text)


def _even(pod_load: float) -> bool:
    return abs(pod_load - 1) <= 0.05


def _load_note(pod_load: float) -> Figure:
    """The per-pod load ratio, said in the step's reasons when the routing makes it uneven."""
    return Figure(
        "per-pod load",
        "within",
        f"per-pod load: a candidate pod gets {pod_load:.2f}x a stable pod's requests (route "
        "weights over whole pods); tokens/s per replica is judged scaled by it, and latency "
        "under less load can favour the candidate",
    )


def judge_step(
    analysis: CanaryAnalysis,
    candidate: Mapping[str, PodDelta],
    stable: Mapping[str, PodDelta],
    seconds: float,
    *,
    gate_slo: SloLimits | None = None,
    pod_load: float = 1.0,
) -> StepJudgement:
    """Judge one step from both revisions' per-pod deltas over ``seconds``; ``pod_load`` is
    a candidate pod's share of the requests over a stable pod's, as the routing makes them."""
    confidence = analysis.confidence_percent / 100
    ours, theirs = live_figures(candidate, seconds), live_figures(stable, seconds)
    figures = _latency(analysis, candidate, stable)
    stable_share = theirs.error_percent / 100
    points = analysis.max_error_percent_points
    figures.append(
        _error_share(
            candidate,
            stable_share + points / 100,
            confidence,
            "error share",
            f"stable {theirs.error_percent:g}% + {points:g} points",
        )
    )
    if analysis.slo is not None:
        figures += _slo(analysis.slo, candidate, confidence, "SLO")
    if analysis.use_gate_slo and gate_slo is not None:
        figures += _slo(gate_slo, candidate, confidence, "gate SLO")
    enough = ours.requests >= analysis.min_requests and theirs.requests >= analysis.min_requests
    if analysis.max_throughput_drop_percent is not None:
        # A point comparison of rates: only on a step with enough requests on both sides.
        throughput = _throughput(analysis.max_throughput_drop_percent, ours, theirs, pod_load)
        figures.append(
            throughput if enough else Figure(throughput.name, "undecided", throughput.text)
        )
    if not _even(pod_load):
        figures.append(_load_note(pod_load))
    decision: StepDecision
    if any(f.decision == "beyond" for f in figures):
        decision = "Failed"
    elif enough and all(f.decision == "within" for f in figures):
        decision = "Passed"
    else:
        decision = "Waiting"
    return StepJudgement(decision, tuple(figures), ours, theirs, enough)


def early_breach(
    analysis: CanaryAnalysis,
    candidate: Mapping[str, PodDelta],
    stable: Mapping[str, PodDelta],
    seconds: float,
) -> StepJudgement | None:
    """A Failed judgement when the step's counts so far already show a clear breach of the
    error share (see the module's docstring); None otherwise."""
    ours, theirs = live_figures(candidate, seconds), live_figures(stable, seconds)
    if ours.requests < EARLY_MIN_REQUESTS:
        return None
    points = analysis.max_error_percent_points
    figure = _error_share(
        candidate,
        theirs.error_percent / 100 + points / 100,
        EARLY_CONFIDENCE,
        "error share",
        f"stable {theirs.error_percent:g}% + {points:g} points; "
        f"early stop at {100 * EARLY_CONFIDENCE:g}% confidence",
    )
    if figure.decision != "beyond":
        return None
    return StepJudgement("Failed", (figure,), ours, theirs, enough_requests=False)
