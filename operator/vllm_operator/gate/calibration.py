"""Calibration: the noise of identical servers, fitted from A/A runs, and the floors it asks for.

An A/A run (``bench --baseline-url`` with the candidate and its twin on one revision) measures,
for each limited figure (metric, percentile, load level), the candidate's and the twin's
percentile in every trial. Their difference, as a share of the figure's limit, has two parts
that a gate must allow for differently (docs/bench.md, "Calibration"):

- the **instance offset**: identical servers differ persistently (the H200's ITL p99 at 24 req/s
  6-10 ms apart in every trial of one run). It does not shrink with trials; only the floor
  (``regressionFloorPercent``) can absorb it. Its spread is fitted across runs: a run's mean
  difference ``m`` has ``E[m^2] = instance^2 + within^2 / n`` (an offset is as likely either
  way: which server is the candidate is an accident), so ``instance^2`` is the mean of
  ``m^2 - within^2 / n`` over the runs, never below 0;
- the **within-run noise**: trial to trial around the run's mean, pooled over runs. It shrinks
  with trials (1/sqrt(trials)) and with longer levels (1/sqrt(seconds), more requests per
  percentile).

A figure's floor at a plan of ``T`` trials of ``S`` seconds is the smallest that an A/A gate
clears on every figure with 95% probability at its first look (``floor_percent``):
``z_all * sqrt(instance^2 + w^2 / T) + z_look * w / sqrt(T)`` with ``w`` the within-run noise at
``S`` seconds, ``z_all`` the normal quantile that leaves 5% over all the compared figures
(Bonferroni) and ``z_look`` the gate's one-sided quantile at that look (``gate.sequential``).
That is a normal model's answer, not the judge's: ``vllm-operator calibrate`` replays every
given report through the judge at the proposed floors and says when one does not pass. The
power at the proposal is ``gate.power``'s (the one statement ``render`` and the operator make
too), on a tail model fitted from the same runs' twins (``tail_model``).

Pure: values in, values out; the command (``commands.calibrate``) reads the reports.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist, median

from vllm_operator.api.workload import LatencyMetric, Percentile, SloThresholds
from vllm_operator.errors import VLLMOperatorError
from vllm_operator.gate.power_noise import NORMAL_SCORE, NoiseModel, TailNoise

AA_PASS = 0.95
"""Chance an A/A gate should pass: every compared figure within its floor at once."""

_Z = NormalDist()


class CalibrationError(VLLMOperatorError, ValueError):
    """The A/A data cannot be fitted (too few runs or trials); the message says what to add."""


@dataclass(frozen=True)
class FigureKey:
    """One compared figure: a metric's limited percentile at one load level."""

    metric: LatencyMetric
    percentile: Percentile
    level: float

    def name(self, unit: str) -> str:
        """``"itl p99 at 24 req/s"``."""
        return f"{self.metric} {self.percentile} at {self.level:g} {unit}"


@dataclass(frozen=True)
class PairedTrial:
    """One trial of one figure in one A/A run: the candidate's and the twin's percentile."""

    run: str
    key: FigureKey
    candidate_ms: float
    twin_ms: float


@dataclass(frozen=True)
class FigureNoise:
    """One figure's fitted noise, in percent of its limit."""

    key: FigureKey
    limit_ms: float
    offsets: tuple[float, ...]
    """Each run's mean candidate-minus-twin difference (percent of the limit)."""
    instance: float
    """Spread of the instance offset between identical servers (SD, percent of the limit)."""
    within: float
    """Trial-to-trial noise of the difference within a run (SD, percent of the limit)."""
    seconds: float
    """The level length the within-run noise was measured at."""
    trials: int

    def within_at(self, seconds: float) -> float:
        """The within-run noise at levels of ``seconds`` (more requests, a steadier tail)."""
        return self.within * math.sqrt(self.seconds / seconds)


def fit_noise(
    trials: Iterable[PairedTrial], limits: Mapping[FigureKey, float], seconds: float
) -> list[FigureNoise]:
    """Each limited figure's noise from the paired trials of two or more A/A runs.

    ``limits`` holds every figure to fit (ms); ``seconds`` is the runs' level length.
    Raises ``CalibrationError`` naming the figure when fewer than two runs measured it or no
    run measured it twice.
    """
    by_key: dict[FigureKey, dict[str, list[float]]] = {key: {} for key in limits}
    for t in trials:
        if t.key in by_key:
            diff = 100 * (t.candidate_ms - t.twin_ms) / limits[t.key]
            by_key[t.key].setdefault(t.run, []).append(diff)
    return [_fit_one(key, limits[key], runs, seconds) for key, runs in sorted(
        by_key.items(), key=lambda kv: (kv[0].metric, kv[0].percentile, kv[0].level)
    )]  # fmt: skip


def _fit_one(
    key: FigureKey, limit: float, runs: Mapping[str, Sequence[float]], seconds: float
) -> FigureNoise:
    name = key.name("")
    if len(runs) < 2:
        raise CalibrationError(
            f"{name.strip()}: measured against the twin in {len(runs)} run(s); "
            "calibration needs two or more A/A runs that reach it"
        )
    means = {run: sum(d) / len(d) for run, d in runs.items()}
    squares = sum((x - means[run]) ** 2 for run, d in runs.items() for x in d)
    df = sum(len(d) - 1 for d in runs.values())
    if df < 1:
        raise CalibrationError(
            f"{name.strip()}: no run measured it in two trials; the within-run noise needs "
            "runs of two or more trials (gate.trials >= 2)"
        )
    within = math.sqrt(squares / df)
    excess = [means[run] ** 2 - within**2 / len(d) for run, d in runs.items()]
    instance = math.sqrt(max(sum(excess) / len(excess), 0.0))
    return FigureNoise(
        key=key,
        limit_ms=limit,
        offsets=tuple(means[run] for run in sorted(runs)),
        instance=instance,
        within=within,
        seconds=seconds,
        trials=sum(len(d) for d in runs.values()),
    )


def limits_of(slo: SloThresholds, levels: Iterable[float]) -> dict[FigureKey, float]:
    """The figures a gate's ``slo`` limits at each of ``levels``, with their limits (ms)."""
    out: dict[FigureKey, float] = {}
    for level in levels:
        for metric, by_p in slo.at(level).metric_limits().items():
            for p, limit in by_p.items():
                out[FigureKey(metric, p, float(level))] = limit
    return out


def one_sided(confidence: float) -> float:
    """The normal quantile of a two-sided ``confidence`` interval's one side."""
    return _Z.inv_cdf((1 + confidence) / 2)


def floor_percent(
    noise: FigureNoise, trials: int, seconds: float, look_confidence: float, figures: int
) -> float:
    """The floor (percent of the limit) an A/A gate of ``trials`` trials of ``seconds`` clears
    on this figure, with every one of ``figures`` compared figures cleared 95% of the time."""
    w = noise.within_at(seconds)
    z_all = _Z.inv_cdf(1 - (1 - AA_PASS) / max(figures, 1))
    spread = math.sqrt(noise.instance**2 + w**2 / trials)
    return z_all * spread + one_sided(look_confidence) * w / math.sqrt(trials)


def tail_model(twin: Mapping[tuple[LatencyMetric, float], Sequence[tuple[float, float]]],
               default: NoiseModel) -> NoiseModel:  # fmt: skip
    """The noise model ``gate.power`` states power with, from the twins of A/A runs: per
    (metric, level), the twin's median p99 and the median log scale of its tail
    ((ln p99 - ln p95) / 0.68, per normal score, as ``benchmarks/power_fit.py`` fits it) from
    ``twin``'s (p95, p99) pairs of each trial; the design effects (``across``, ``within``)
    stay ``default``'s at the nearest rate (as every other field of its ``TailNoise``): they
    come from the requests' structure, which a trial's percentiles do not carry. A figure
    ``default`` lacks keeps no model."""
    figures: dict[tuple[str, float], TailNoise] = {}
    gap = NORMAL_SCORE["p99"] - NORMAL_SCORE["p95"]
    for (metric, level), pairs in twin.items():
        base = default.at(metric, level)
        usable = [(p95, p99) for p95, p99 in pairs if 0 < p95 <= p99]
        if base is None or not usable:
            continue
        sigma = median(math.log(p99 / p95) / gap for p95, p99 in usable)
        p99 = median(p99 for _, p99 in usable)
        # the default's other fields (design effects, ...) kept by name, whatever they are
        figures[(metric, level)] = replace(base, p99_ms=p99, tail_sigma=max(sigma, 1e-3))
    return NoiseModel(figures, source="the given A/A reports' twins")
