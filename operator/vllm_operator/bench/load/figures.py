"""Figures of one load run (server, level, trial): latency percentiles, throughput, goodput.

Pure functions over ``bench.load.send.LoadRun``, so the arithmetic the SLO gate judges is
unit-tested without a server.

Definitions (docs/bench.md, "Load levels and SLOs"):
- TTFT and end-to-end are measured from the request's *intended* arrival (open loop: the
  Poisson schedule; closed loop: when its stream was ready), so a client that fell behind
  cannot hide the server's slowness (``bench.load.send``: coordinated omission);
- ITL: every gap between two streamed chunks, of every completed request (its percentiles
  are over gaps; a sample's ``itl_ms`` is its own mean gap);
- TPOT: per request, (last chunk - first chunk) / (output tokens - 1);
- a request *met the SLO* when it completed and each limited metric (TTFT, ITL as its mean
  gap, TPOT, E2E) is within that metric's limit of its highest limited percentile (with
  ``p50: 200, p99: 500`` on TTFT, a request within 500 ms met it: the tail limit is the
  per-request promise, the p50 limit a statement about the whole run); goodput is the share
  (and rate) of requests that met it, failed requests never do;
- error share: failed requests / requests sent; throughput: completed requests and output
  tokens per second of the run's elapsed time (its start to its last answer).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import LoadLevelFigures
from vllm_operator.api.workload import (
    LATENCY_METRICS,
    PERCENTILES,
    LatencyMetric,
    Percentile,
    SloLimits,
)
from vllm_operator.bench.load.send import LoadRecord, LoadRun
from vllm_operator.bench.load.tails import level_tails
from vllm_operator.bench.stats import percentile
from vllm_operator.gate.tallies import ClusteredTally, SampleTally, Tally

MAX_SAMPLES = 2000
"""Per-request samples of one run in the report (evenly thinned beyond)."""

MAX_SLOW_GAPS = 32
"""Gaps above the run's p90 gap listed per sample (the largest; the count says how many)."""

QUANTILE: dict[Percentile, float] = {"p50": 50, "p90": 90, "p95": 95, "p99": 99}


def ttft_ms(r: LoadRecord) -> float | None:
    if not r.ok or r.first_token_at is None:
        return None
    return (r.first_token_at - r.scheduled_at) * 1000


def e2e_ms(r: LoadRecord) -> float | None:
    if not r.ok or r.last_event_at is None:
        return None
    return (r.last_event_at - r.scheduled_at) * 1000


def tpot_ms(r: LoadRecord) -> float | None:
    if not r.ok or r.mean_gap is None or r.output_tokens < 2 or r.chunks < 2:
        return None
    # (last - first) / (tokens - 1): chunks may carry several tokens each
    return r.mean_gap * (r.chunks - 1) / (r.output_tokens - 1) * 1000


def itl_ms(r: LoadRecord) -> float | None:
    return None if not r.ok or r.mean_gap is None else r.mean_gap * 1000


VALUE = {"ttft": ttft_ms, "itl": itl_ms, "tpot": tpot_ms, "e2e": e2e_ms}


def per_request_limits(limits: SloLimits | None) -> dict[LatencyMetric, float]:
    """Metric -> the limit one request is held to: its highest limited percentile's."""
    if limits is None:
        return {}
    return {
        m: by_p[max(by_p, key=QUANTILE.__getitem__)] for m, by_p in limits.metric_limits().items()
    }


def met_slo(r: LoadRecord, held_to: dict[LatencyMetric, float]) -> bool:
    """Did ``r`` complete within every per-request limit (``per_request_limits``)?"""
    if not r.ok:
        return False
    for metric, limit in held_to.items():
        value = VALUE[metric](r)
        if value is not None and value > limit:
            return False
    return True


@dataclass(frozen=True)
class RunFigures:
    """What one run measured."""

    requests: int
    completed: int
    errors: dict[str, int]
    error_percent: float
    goodput_percent: float
    goodput_rps: float
    request_throughput: float
    output_tokens_per_second: float
    achieved_rate: float
    percentiles: dict[LatencyMetric, dict[Percentile, float | None]]
    send_lag_ms: dict[str, float | None]


def metric_values(run: LoadRun, metric: LatencyMetric) -> list[float]:
    """Every value of ``metric`` in ``run`` (ms): ITL is every gap, the others per request."""
    if metric == "itl":
        return [g * 1000 for g in run.gaps]
    return [v for r in run.records if (v := VALUE[metric](r)) is not None]


def run_figures(run: LoadRun, limits: SloLimits | None) -> RunFigures:
    """The figures of ``run``; goodput against ``limits`` (the SLO at its level)."""
    records = run.records
    done = [r for r in records if r.ok]
    held_to = per_request_limits(limits)
    met = sum(1 for r in records if met_slo(r, held_to))
    elapsed = run.elapsed if run.elapsed > 0 else 1.0
    sent = len(records)
    percentiles: dict[LatencyMetric, dict[Percentile, float | None]] = {}
    for metric in LATENCY_METRICS:
        values = metric_values(run, metric)
        percentiles[metric] = {
            p: (round(percentile(values, QUANTILE[p]), 3) if values else None) for p in PERCENTILES
        }
    lags = [
        (r.dispatched_at - r.scheduled_at) * 1000 for r in records if r.dispatched_at is not None
    ]
    return RunFigures(
        requests=sent,
        completed=len(done),
        errors=dict(sorted(Counter(r.error for r in records if r.error).items())),
        error_percent=_share(sent - len(done), sent),
        goodput_percent=_share(met, sent),
        goodput_rps=met / elapsed,
        request_throughput=len(done) / elapsed,
        output_tokens_per_second=sum(r.output_tokens for r in done) / elapsed,
        achieved_rate=run.achieved_rate,
        percentiles=percentiles,
        send_lag_ms={
            "p50": round(percentile(lags, 50), 3) if lags else None,
            "p99": round(percentile(lags, 99), 3) if lags else None,
            "max": round(max(lags), 3) if lags else None,
        },
    )


def _share(part: int, whole: int) -> float:
    return part / whole * 100 if whole else 0.0


def tally(run: LoadRun, metric: LatencyMetric) -> Tally:
    """One run's observations of ``metric`` (ms) for the tail judge: ITL as its gaps grouped
    by the request that streamed them (``ClusteredTally``), the others one per request."""
    # built again only when the run changed: a request added, finished or failed since
    done = sum(1 for r in run.records if r.ok)
    stamp = (metric, len(run.records), done, len(run.gaps))
    known = run.counted.get(stamp)
    if isinstance(known, SampleTally | ClusteredTally):
        return known
    built = _tally(run, metric)
    run.counted = {k: v for k, v in run.counted.items() if k[1:] == stamp[1:]}
    run.counted[stamp] = built
    return built


def _tally(run: LoadRun, metric: LatencyMetric) -> SampleTally | ClusteredTally:
    if metric == "itl":
        gaps = run.gaps
        return ClusteredTally.of(
            [
                [g * 1000 for g in gaps[r.gap_start : r.gap_start + r.gap_count]]
                for r in run.records
                if r.gap_count > 0
            ]
        )
    return SampleTally.of([v for r in run.records if (v := VALUE[metric](r)) is not None])


def level_figures(
    level: float,
    runs: list[LoadRun],
    limits: SloLimits | None,
    *,
    baseline_runs: list[LoadRun] | None = None,
    thresholds: Thresholds | None = None,
    confidence: float = 0.95,
) -> LoadLevelFigures:
    """The summary's figures of one level: only what ``limits`` names, one value per trial.

    ``runs``: one server's runs at ``level`` in trial order. A percentile a trial could not
    measure (no completed request) is left out of that trial's list. Each limited percentile
    is also counted above its limit (``bench.load.tails``), and with ``baseline_runs`` (the
    paired baseline's) and ``thresholds`` setting maxRegressionPercent, against the
    baseline at ``confidence`` (the look's).
    """
    figures = [run_figures(run, limits) for run in runs]
    percentiles: dict[str, list[float]] = {}
    for metric, by_p in (limits.metric_limits() if limits else {}).items():
        for p in by_p:
            values = [f.percentiles[metric][p] for f in figures]
            percentiles[f"{metric}.{p}"] = [round(v, 1) for v in values if v is not None]

    def ours(metric: LatencyMetric) -> list[Tally]:
        return [tally(run, metric) for run in runs]

    def theirs(metric: LatencyMetric) -> list[Tally]:
        return [tally(run, metric) for run in baseline_runs or []]

    pooled, tails = level_tails(limits, ours, theirs if baseline_runs else None, thresholds)
    return LoadLevelFigures(
        level=level,
        requests=sum(f.requests for f in figures),
        percentiles=percentiles,
        pooled=pooled,
        tails=tails,
        goodput_percent=[round(f.goodput_percent, 2) for f in figures if f.requests],
        error_percent=[round(f.error_percent, 2) for f in figures if f.requests],
    )


def gap_floor_ms(run: LoadRun) -> float | None:
    """The run's p90 gap (ms): the report lists each request's gaps above it."""
    if not run.gaps:
        return None
    return round(percentile([g * 1000 for g in run.gaps], 90), 3)


def slow_gaps(run: LoadRun, r: LoadRecord, floor: float) -> dict[str, Any]:
    """A request's gap count and its gaps above ``floor`` (ms, largest first, at most
    ``MAX_SLOW_GAPS``; ``slow_gaps`` says how many there were when more): enough to count its
    gaps above any bound at or above the floor (``bench.load.recount``)."""
    gaps = run.gaps[r.gap_start : r.gap_start + r.gap_count]
    # compared as stored (0.001 ms), so a replay sees the same gaps above the floor
    slow = sorted((ms for g in gaps if (ms := round(g * 1000, 3)) > floor), reverse=True)
    out: dict[str, Any] = {"gaps": r.gap_count, "slow_gaps_ms": slow[:MAX_SLOW_GAPS]}
    if len(slow) > MAX_SLOW_GAPS:
        out["slow_gaps"] = len(slow)
    return out


def samples(run: LoadRun, limits: SloLimits | None) -> list[dict[str, Any]]:
    """Per-request samples for the report, at most ``MAX_SAMPLES`` (evenly thinned)."""
    held_to = per_request_limits(limits)
    floor = gap_floor_ms(run)
    records = run.records
    if len(records) > MAX_SAMPLES:
        step = len(records) / MAX_SAMPLES
        records = [records[int(i * step)] for i in range(MAX_SAMPLES)]
    out = []
    for r in records:
        sample: dict[str, Any] = {"t": round(r.offset, 4)}
        for metric in LATENCY_METRICS:
            value = VALUE[metric](r)
            sample[f"{metric}_ms"] = None if value is None else round(value, 3)
        sample["input_tokens"] = r.prompt_tokens
        sample["output_tokens"] = r.output_tokens if r.ok else None
        sample["ok"] = r.ok
        sample["met_slo"] = met_slo(r, held_to)
        if r.gap_count > 0 and floor is not None:
            sample.update(slow_gaps(run, r, floor))
        if not r.ok:
            sample["error"] = r.error
        out.append(sample)
    return out


def run_counts(run: LoadRun, limits: SloLimits | None) -> dict[str, dict[str, Any]]:
    """The run's own counts above each limit at its level (what one trial adds to a level's
    ``tails`` in the summary)."""
    out: dict[str, dict[str, Any]] = {}
    for metric, by_p in (limits.metric_limits() if limits else {}).items():
        counted = tally(run, metric)
        for p, limit in by_p.items():
            e = counted.exceedance(limit)
            out[f"{metric}.{p}"] = {
                "limit": limit,
                "above": int(e.above),
                "total": int(e.total),
                "design_effect": round(e.design_effect, 3),
            }
    return out


def run_json(run: LoadRun, limits: SloLimits | None) -> dict[str, Any]:
    """One entry of the report's ``load.runs`` (the contract's shape)."""
    f = run_figures(run, limits)
    return {
        "server": run.server,
        "level": run.level,
        "trial": run.trial,
        "seconds": run.seconds,
        "asked_rate": run.asked_rate,
        "achieved_rate": round(f.achieved_rate, 4),
        "requests": f.requests,
        "completed": f.completed,
        "errors": f.errors,
        "error_percent": round(f.error_percent, 3),
        "goodput_percent": round(f.goodput_percent, 3),
        "goodput_rps": round(f.goodput_rps, 4),
        "request_throughput": round(f.request_throughput, 4),
        "output_tokens_per_second": round(f.output_tokens_per_second, 3),
        "percentiles": {f"{m}_ms": dict(v) for m, v in f.percentiles.items()},
        "counts": run_counts(run, limits),
        "gap_floor_ms": gap_floor_ms(run),
        "send_lag_ms": f.send_lag_ms,
        "waited_for_slot": run.waited_for_slot,
        "cut_at_max_requests": run.cut_at_max,
        "started_unix": round(run.started_unix, 3),
        "samples": samples(run, limits),
    }
