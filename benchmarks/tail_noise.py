"""Tail limits judged as shares (issues 29 and 40): false-fail rates and the stated power
checked on a noise model refitted from H200 and H100 requests, through the gate's own judge.

Data: the per-request samples of every A/A SLO gate recorded with two identical vLLM 0.22
servers at 8 and 24 requests/s in 20 s trials (``REPORT_NAMES``: H100 2026-12-07 aa1, aa2,
the per-floor aa1 and the power aa1; H200 2026-12-02 slo-aa, the slo-bars and slo-tails aa1
and aa2, and the 2026-12-01 warm A/A: 46 paired trials at 8/s, 30 at 24/s). (``report-aa-slo``
ran 12 s levels with a shorter warm-up, and the ``reg``/``r4``/``power142`` reports are
regressions: none is an A/A sample of this spec.) The two cards' runs are pooled: the
difference between them is a part both servers of a pair share.

**TTFT model** (per level, log scale; fitted from every request), and the same fitted to
each request's end-to-end latency for **E2E** (drawn apart from TTFT: the judge takes each
metric apart):

- each run r has a tail start ``l_r`` (log of its q90) and a body spread ``s_r`` (log q90 -
  log q50); a request is ``exp(l_r + s_r * (e - 1))`` with ``e`` standardised by its own
  run's median and ``s_r`` (90% lie below 1, the body; 10% above, the tail);
- between trials, ``l_r`` and ``log s_r`` are normal around the level's means, each split into
  a part both servers of one trial share (the covariance of the paired runs: a time window)
  and each server's own (the rest), correlated with each other as in the data. The own part
  is what the paired runs' variance leaves **less the variance a run's q90 and spread have
  from its finite sample alone** (bootstrapped, ``sampling_noise``): the model draws the
  requests again, and with them that sampling noise, so fitting it into the own part as well
  counted it twice;
- a modelled trial's tail is the standardised excess of **one recorded run**, resampled
  (``TtftModel.tails``; the run picked once per trial, the same for both servers): the data's
  tails are compact, the slowest request of a run 1.05 times its p99 (median; 1.29 at the
  90th percentile, at 8/s), and pooling every run's excess (the model before) mixed their
  shapes, so a modelled trial got requests 1.6-2.6 times its p99, requests above the twin's
  bar that the cards never showed; the body enters at evenly spaced quantiles of its shape
  (only the tail decides a p99; the body is there so the judge searches the same points).
- Goodness (printed, saved): the per-trial p99's mean and sd in logs, model against data.

**ITL model**: each modelled trial is one recorded paired trial, picked at random, its two
runs given to the two servers in random order: each run's gaps follow its own quantile
function through its recorded p50, p90, p95 and p99 (linear in the normal score between
them), and beyond its p99 its own recorded slowest 1% (every request's ``slow_gaps_ms``
keeps its 32 slowest, which holds every gap above the run's p99). The model before drew a
normal p99 and extended the p95-p99 slope past it: it put 0.1-0.2% of the gaps above 100 ms
where the recorded runs have 4 in a million, and left A/A gates undecided on the ITL limit.
(Runs of reports that kept no slow gaps, the two oldest H200 ones, are left out of the ITL
pairs.) A trial's gaps (its requests x 127) are counted into 1 ms buckets from 10 to 250 ms
(``HistogramTally``: the judge's bounds-between-buckets rule, so a bucket can only make it
undecided); gaps are independent given the trial (design effect 1).

Gate (the H100 kit's ``gpu-slo-aa-480.yaml`` with an E2E limit): 8 and 24 requests/s, 20 s
levels, a twin, ``timeoutSeconds: 480`` (bench deadline 450 s), 3 trials then one at a time
up to 10 while a figure of the level is undecided and the budget (``gate.budget``) allows
(the plan cut to the 6 trials the deadline can give, ``plan_for``, as the bench cuts it);
TTFT p99 <= 1000 ms, ITL p99 <= 100 ms and E2E p99 <= 10,000 ms, ``maxRegressionPercent:
10`` with each metric's default floor (TTFT 10%, ITL 25%, E2E 25% of its limit: 100, 25 and
2,500 ms), confidence 95%, each look widened for the plan's looks. Goodput (100% on the
GPUs) and errors (0%) are entered as measured there. The real path from the trials'
tallies on: the bench's counts (``bench.load.tails.level_tails``: per trial, above each
limit, and above the bars of each paired trial, at the look's confidence) in a
``BenchSummary`` with its paired baseline, judged by ``gate.slo.judge_slo`` after each
round (a level gets another round while its figure is undecided, the sweep's budget and
``can_still_decide`` allow; nothing more once a figure failed; stop at the first breach)
and by ``gate.verdict.verdict`` at the end. Duration = each level's warm-up (2 x 10 s) +
its rounds (2 x 20 s each). Each row also counts which figures ended undecided or failed.

Rows: A/A; for TTFT, ITL and E2E p99 at each level, a candidate regressed by exactly the
power ``gate.power`` states for this plan (unrounded; every observation of that metric at
that level shifted by it, as the statement means); the candidate 5% slower everywhere
(TTFT, ITL and E2E). ``--row 0,1`` runs those rows alone, a gate of each in turn (one
process for a few rows), ``--merge`` joins their results. ``Change(tail=2.0)`` (the TTFT
tail doubled) remains for diagnostics.

Speed (the same decisions, checked at start-up): a level's figures are counted once per
look (and reused as its final ones); the clustering estimate (``gate.clustering``) is
computed on the model's 1 ms buckets as (value, count) runs instead of one entry per gap
(``fast_clustering``, compared with ``tail_clustering`` on 240 estimates); the judge's
beta quantile is a safeguarded Newton solve of the same ``incomplete_beta`` (checked against
the bisection to 1e-12) and cached. About 0.2 s a gate on one core.

Run: ``.venv/bin/python benchmarks/tail_noise.py [--gates 2000] [--seed 29]``; saves
``benchmarks/results/tail_noise.json`` every 25 gates. Diagnostics (``--limits ttft``: the
TTFT limit alone; ``--limits-only``: no comparison with the twin; ``--floor-percent``;
``--out``) say which judgement keeps a gate undecided.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import itertools
import json
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from vllm_operator.api.gate_spec import GateSpec, Thresholds
from vllm_operator.api.summary import (
    BenchSummary,
    LoadLevelFigures,
    LoadSweep,
    PairedBaseline,
    TrialPlan,
)
from vllm_operator.bench.load.tails import level_tails
from vllm_operator.gate import binomial as exact
from vllm_operator.gate import clustering, pair_tails, tallies
from vllm_operator.gate.budget import (
    REPORT_RESERVE_FRACTION,
    WARMUP_SECONDS,
    SweepBudget,
    extra_round_fits,
    held_for_later,
    reachable_plan,
)
from vllm_operator.gate.decidable import Observations, short_limits
from vllm_operator.gate.power import plan_power
from vllm_operator.gate.slo import breached, figure, judge_slo
from vllm_operator.gate.tails import Exceedance, stray_cluster
from vllm_operator.gate.verdict import verdict
from vllm_operator.render.job import bench_deadline

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "tail_noise.json"
REPORT_NAMES = (
    "h200-tails-2026-12-02/report-slo-aa.json.gz",
    "h200-slo-2026-12-01/report-aa-warm.json.gz",
    "h100-2026-12-07/report-aa1.json.gz",
    "h100-2026-12-07/report-aa2.json.gz",
    "h100-slo-perfloor-2026-12-07/report-aa1.json.gz",
    "h100-power-2026-12-07/report-aa1.json.gz",
    "h200-slo-bars-2026-12-02/report-aa1.json.gz",
    "h200-slo-bars-2026-12-02/report-aa2.json.gz",
    "h200-slo-tails-2026-12-02/report-aa1.json.gz",
    "h200-slo-tails-2026-12-02/report-aa2.json.gz",
)
"""The fitted reports, looked up in docs/calibration/, then in the workspace's shared
calibration folder (where the 2026-12-02 report lies until it is copied into docs)."""
PLACES = (ROOT / "docs" / "calibration", ROOT.parent / "shared" / "calibration")

LEVELS = (8.0, 24.0)
SECONDS = 20
TRIALS, MAX_TRIALS = 3, 10
TIMEOUT_SECONDS = 480
DEADLINE = TIMEOUT_SECONDS - 30.0
"""The bench's deadline: the Job's ``timeoutSeconds`` less the 30 s it keeps for the summary."""
SERVERS = 2
CONFIDENCE = 0.95
LIMITS = {"ttft": 1000.0, "itl": 100.0, "e2e": 10000.0}
REGRESSION_PERCENT = 10.0
FLOOR_PERCENT: float | None = None
OUTPUT_TOKENS = 128
BODY_POINTS = 1000
BUCKETS = (*(float(b) for b in range(10, 251)), math.inf)


# -- data and fit ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    source: str
    server: str
    level: float
    trial: int
    ttft: tuple[float, ...]
    """Sorted TTFT (ms) of its completed requests."""
    e2e: tuple[float, ...]
    """Sorted end-to-end latency (ms) of its completed requests."""
    itl: dict[str, float]
    """The run's gap percentiles (ms) as the report has them."""
    itl_above_p99: tuple[float, ...] | None = None
    """log(gap / the run's gap p99) of every gap above its p99, sorted (from each request's
    ``slow_gaps_ms``, which keeps a request's slowest 32, every one of them above the p99;
    None in reports written before the bench kept them)."""


def load_runs() -> list[Run]:
    runs: list[Run] = []
    for name in REPORT_NAMES:
        path = next((p / name for p in PLACES if (p / name).exists()), PLACES[0] / name)
        with gzip.open(path) as fh:
            report = json.loads(fh.read())
        for r in report["load"]["runs"]:
            ttft = tuple(sorted(s["ttft_ms"] for s in r["samples"] if s["ok"]))
            e2e = tuple(sorted(s["e2e_ms"] for s in r["samples"] if s["ok"]))
            itl = r["percentiles"]["itl_ms"]
            source = f"{path.parent.name}/{path.name}"
            above = None
            if all("slow_gaps_ms" in s for s in r["samples"] if s["ok"]):
                p99 = itl["p99"]
                slow = (g for s in r["samples"] if s["ok"] for g in s["slow_gaps_ms"])
                above = tuple(sorted(math.log(g / p99) for g in slow if g > p99))
            runs.append(
                Run(source, r["server"], r["level"], r["trial"], ttft, e2e, itl, above or None)
            )
    return runs


def quantile(values: Sequence[float], p: float) -> float:
    """The nearest-rank quantile of sorted ``values`` (the bench's rule)."""
    n = len(values)
    return values[min(n - 1, max(0, math.ceil(p * n) - 1))]


@dataclass(frozen=True)
class Effect:
    """A per-trial normal effect: mean, the sd both servers of a trial share, each one's own."""

    mean: float
    shared: float
    own: float

    def draw(self, rng: random.Random, common: float) -> float:
        """``common`` is the trial's standard normal both servers share."""
        return self.mean + self.shared * common + self.own * rng.gauss(0, 1)


def fit_effect(values: dict[tuple[str, int], dict[str, float]], noise: float = 0.0) -> Effect:
    """Mean and shared/own sds from (source, trial) -> {server: value} of paired runs;
    ``noise``, the variance the value has from its run's finite sample alone, is taken off
    the own part (the model draws the requests again, and with them that noise)."""
    pairs = [(v["candidate"], v["baseline"]) for v in values.values() if len(v) == 2]
    every = [x for pair in pairs for x in pair]
    mean = statistics.fmean(every)
    var = statistics.variance(every)
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    cov = sum((x - mean) * (y - mean) for x, y in zip(a, b, strict=True)) / (len(pairs) - 1)
    shared = min(max(cov, 0.0), var)
    return Effect(mean, math.sqrt(shared), math.sqrt(max(var - shared - noise, 0.0)))


BOOTSTRAPS = 40


def sampling_noise(values: Sequence[float], rng: random.Random) -> tuple[float, float]:
    """The variance of a run's (log q90, log spread) from its finite sample alone: the run's
    requests resampled with replacement ``BOOTSTRAPS`` times."""
    n = len(values)
    locations, spreads = [], []
    for _ in range(BOOTSTRAPS):
        again = sorted(values[int(rng.random() * n)] for _ in range(n))
        m = math.log(quantile(again, 0.5))
        q90 = math.log(quantile(again, 0.9))
        locations.append(q90)
        spreads.append(math.log(max(q90 - m, 1e-6)))
    return statistics.variance(locations), statistics.variance(spreads)


@dataclass(frozen=True)
class TtftModel:
    location: Effect
    """log q90 of a trial (where its tail starts: the q90 rather than the median, so that a
    trial's tail is placed by one effect, not by two that the data show offsetting)."""
    spread: Effect
    """log (log q90 - log q50) of a trial."""
    rho: float
    """Correlation of a trial's location and spread (over every run of the level: +0.97 at
    8/s, where a slow trial is slow in its tail; -0.26 at 24/s); both their shared and their
    own parts are drawn with it."""
    excess: tuple[float, ...]
    """Pooled standardised excess over 1 of the tail requests, sorted."""
    tails: tuple[tuple[float, ...], ...]
    """Each recorded run's own standardised excess over 1 (its tail requests): a modelled
    trial draws its tail from one run's, so a tail keeps the shape one server had in one
    trial (pooled, the runs' shapes mix, and a trial gets requests 1.5-2.6 times its p99
    where the data's slowest request is at most 1.5 times it)."""
    q99: float
    """The shape's standardised q99 (the tail's top tenth), where a tail factor is whole."""
    body: tuple[float, ...]
    """The pooled standardised body (below 1) at evenly spaced quantiles, ``BODY_POINTS``."""

    def tail_of(self, pick: float) -> tuple[float, ...]:
        """The standardised excess of one recorded run (``pick`` uniform in [0, 1)), the tail
        shape of one modelled trial."""
        return self.tails[int(pick * len(self.tails))]


def fit_ttft(runs: Sequence[Run], level: float, metric: str = "ttft") -> TtftModel:
    """The per-request model of ``metric`` (TTFT, or E2E: the same shape fitted to it)."""
    at = [r for r in runs if r.level == level]
    locations: dict[tuple[str, int], dict[str, float]] = {}
    spreads: dict[tuple[str, int], dict[str, float]] = {}
    excess: list[float] = []
    tails: list[tuple[float, ...]] = []
    body: list[float] = []
    noise: list[tuple[float, float]] = []
    rng = random.Random(f"{metric}:{level}")
    for r in at:
        values = r.ttft if metric == "ttft" else r.e2e
        noise.append(sampling_noise(values, rng))
        m = math.log(quantile(values, 0.5))
        s = math.log(quantile(values, 0.9)) - m
        locations.setdefault((r.source, r.trial), {})[r.server] = m + s
        spreads.setdefault((r.source, r.trial), {})[r.server] = math.log(s)
        standard = [(math.log(x) - m) / s for x in values]
        own = [e - 1 for e in standard if e > 1]
        excess += own
        if own:
            tails.append(tuple(own))
        body += [e for e in standard if e <= 1]
    excess.sort()
    body.sort()
    flat_l = [v for pair in locations.values() for v in pair.values()]
    flat_s = [v for pair in spreads.values() for v in pair.values()]
    return TtftModel(
        fit_effect(locations, statistics.fmean(v for v, _ in noise)),
        fit_effect(spreads, statistics.fmean(v for _, v in noise)),
        statistics.correlation(flat_l, flat_s),
        tuple(excess),
        tuple(tails),
        1 + quantile(excess, 0.9),
        tuple(quantile(body, (i + 0.5) / BODY_POINTS) for i in range(BODY_POINTS)),
    )


@dataclass(frozen=True)
class RunGaps:
    """One recorded run's gaps: log p50, p90, p95, p99, and log(gap / p99) of every gap
    above its p99, sorted."""

    logs: tuple[float, float, float, float]
    above: tuple[float, ...]


@dataclass(frozen=True)
class ItlModel:
    knots: tuple[float, float, float]
    """Mean log p50, p90, p95 of the level's runs."""
    p99: Effect
    """log p99 of a trial."""
    pairs: tuple[tuple[RunGaps, RunGaps], ...] = ()
    """The recorded paired trials whose runs kept their slow gaps: (candidate's, twin's)."""

    def above_p99(self, tail: tuple[float, ...], excess: float) -> float:
        """The share of a trial's gaps above its p99 times exp(``excess``), on ``tail``."""
        if not tail:
            return 0.0
        return 0.01 * (len(tail) - bisect.bisect_right(tail, excess)) / len(tail)


def fit_itl(runs: Sequence[Run], level: float) -> ItlModel:
    at = [r for r in runs if r.level == level]
    knots = tuple(statistics.fmean(math.log(r.itl[p]) for r in at) for p in ("p50", "p90", "p95"))
    p99: dict[tuple[str, int], dict[str, float]] = {}
    for r in at:
        p99.setdefault((r.source, r.trial), {})[r.server] = math.log(r.itl["p99"])
    by_trial: dict[tuple[str, int], dict[str, RunGaps]] = {}
    for r in at:
        if r.itl_above_p99:
            logs = tuple(math.log(r.itl[p]) for p in ("p50", "p90", "p95", "p99"))
            by_trial.setdefault((r.source, r.trial), {})[r.server] = RunGaps(
                (logs[0], logs[1], logs[2], logs[3]), r.itl_above_p99
            )
    pairs = tuple((v["candidate"], v["baseline"]) for v in by_trial.values() if len(v) == 2)
    return ItlModel((knots[0], knots[1], knots[2]), fit_effect(p99), pairs)


# -- trials drawn from the model -------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """What differs in the candidate: its TTFT tail (x at q99), everything (x), and one
    metric at one level shifted by ``shift_ms`` (every observation of it: the regression
    ``gate.power`` states, its percentile that many ms slower)."""

    tail: float = 1.0
    every: float = 1.0
    metric: str = ""
    level: float = 0.0
    shift_ms: float = 0.0

    def shift(self, metric: str, level: float) -> float:
        return self.shift_ms if (metric, level) == (self.metric, self.level) else 0.0


def ttft_trial(  # noqa: PLR0917 - the model's draw, one call per metric
    rng: random.Random,
    model: TtftModel,
    n: int,
    common: tuple[float, float, float],
    change: Change,
    shift: float = 0.0,
) -> tallies.SampleTally:
    """One trial's TTFT: its tail requests drawn from the shape, its body (the 90% below its
    q90) at evenly spaced quantiles of the body's shape (only the tail decides a p99; the body
    is there so that the judge searches the same kind of points as on real requests)."""
    rho = model.rho
    free = math.sqrt(1 - rho * rho)
    own = rng.gauss(0, 1)
    q90 = model.location.mean + model.location.shared * common[0] + model.location.own * own
    s = math.exp(
        model.spread.mean
        + model.spread.shared * (rho * common[0] + free * common[1])
        + model.spread.own * (rho * own + free * rng.gauss(0, 1))
    )
    m = q90 - s
    k = binomial(rng, n, 0.1)
    top = []
    tail = model.tail_of(common[2])
    for _ in range(k):
        e = 1 + tail[int(rng.random() * len(tail))]
        value = math.exp(m + s * e)
        if change.tail != 1.0:
            rise = min(1.0, (e - 1) / (model.q99 - 1))
            value *= change.tail**rise
        top.append(value * change.every + shift)
    step = BODY_POINTS / max(n - k, 1)
    grid = model.body
    body = [
        math.exp(m + s * grid[int((i + 0.5) * step)]) * change.every + shift for i in range(n - k)
    ]
    return tallies.SampleTally.of(body + top)


class ModelGaps(tallies.HistogramTally):
    """One trial's modelled gaps at 1 ms resolution; its slowest named for the paired tail
    judge (``gate.pair_tails``) at each bucket's upper bound, each gap its own group (the
    model has no requests: gaps are independent here, clustered in the bench)."""

    def spans(self, count: int) -> list[tuple[float, int]]:
        """(value, how many) of the ``count`` slowest gaps, slowest first: past the last
        bound at it + 1 ms, then each bucket at its upper bound."""
        spans = _every_span(self.buckets)
        out: list[tuple[float, int]] = []
        taken = 0
        for value, many in spans:
            take = min(int(many), count - taken)
            if take > 0:
                out.append((value, take))
                taken += take
            if taken >= count:
                break
        return out

    def slowest(self, count: int) -> list[tuple[float, int]]:
        out: list[tuple[float, int]] = []
        for value, take in self.spans(count):
            start = len(out)  # the same list as one append per gap, built in C
            out.extend(zip(itertools.repeat(value, take), range(start, start + take), strict=True))
        return out


@lru_cache(maxsize=4096)
def _every_span(buckets: tuple[tuple[float, float], ...]) -> list[tuple[float, float]]:
    """A histogram's (value, how many) from the top, remembered (one trial's gaps are listed
    at each look of its level): past the last bound at it + 1 ms, then each bucket at its
    upper bound."""
    finite = [(le, c) for le, c in buckets if math.isfinite(le)]
    total = buckets[-1][1]
    spans = [(finite[-1][0] + 1.0, total - finite[-1][1])]
    spans += [
        (le, cum - (finite[i - 1][1] if i > 0 else 0.0))
        for i, (le, cum) in reversed(list(enumerate(finite)))
    ]
    return spans


def itl_trial(  # noqa: PLR0917 - the model's draw
    rng: random.Random,
    model: ItlModel,
    gaps: int,
    common: tuple[float, float],
    change: Change,
    shift: float = 0.0,
) -> tallies.HistogramTally:
    """One trial's gaps counted into ``BUCKETS`` (cumulative counts, +Inf last), each gap
    ``shift`` ms slower for a candidate regressed by that much. ``common``: the trial's
    uniform pick of a recorded paired trial, and which of its two runs this server is (the
    other server takes the other run, ``1 - common[1]``): the run's gap quantile function
    through its p50, p90, p95 and p99, and beyond the p99 its own slowest 1% as recorded.
    (With no run that kept its slow gaps, the parametric model: a normal p99 and the
    p95-p99 slope extended.)"""
    scale = math.log(change.every)
    tail: tuple[float, ...] = ()
    if model.pairs:
        pair = model.pairs[int(common[0] * len(model.pairs))]
        run = pair[0] if common[1] < 0.5 else pair[1]
        logs = tuple(v + scale for v in run.logs)
        tail = run.above
    else:
        lp99 = model.p99.draw(rng, common[0]) + scale
        logs = (*(k + scale for k in model.knots), lp99)
    z = (Z50, Z90, Z95, Z99)
    slope = (z[3] - z[2]) / max(logs[3] - logs[2], 1e-6)

    def above(x: float) -> float:
        if x - shift <= 0:
            return 1.0
        lx = math.log(x - shift)
        if lx <= logs[0]:  # below the p50 (only for a shifted candidate): the first segment
            frac = (lx - logs[0]) / max(logs[1] - logs[0], 1e-9)
            return 1 - normal_cdf(z[0] + frac * (z[1] - z[0]))
        for i in range(3):
            if lx <= logs[i + 1]:
                frac = (lx - logs[i]) / max(logs[i + 1] - logs[i], 1e-9)
                return 1 - normal_cdf(z[i] + frac * (z[i + 1] - z[i]))
        if tail:  # the run's own gaps above its p99
            return 0.01 * (len(tail) - bisect.bisect_right(tail, lx - logs[3])) / len(tail)
        return 1 - normal_cdf(z[3] + (lx - logs[3]) * slope)

    counts: list[tuple[float, float]] = []
    remaining = gaps
    share = 1.0
    for bound in BUCKETS[:-1]:
        p = above(bound)
        remaining = binomial(rng, remaining, min(1.0, p / share)) if share > 0 else 0
        share = p
        counts.append((bound, float(gaps - remaining)))
    counts.append((math.inf, float(gaps)))
    return ModelGaps(tuple(counts))


def normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


Z50, Z90, Z95, Z99 = 0.0, 1.2815515655446004, 1.6448536269514722, 2.3263478740408408


def binomial(rng: random.Random, n: int, p: float) -> int:
    """A Binomial(n, p) draw: inversion for small means, the normal approximation for large."""
    if n <= 0 or p <= 0:
        return 0
    if p >= 1:
        return n
    mean = n * p
    if mean > 50 and n * (1 - p) > 50:
        return min(n, max(0, round(rng.gauss(mean, math.sqrt(mean * (1 - p))))))
    if p > 0.5:
        return n - binomial(rng, n, 1 - p)
    # inversion: walk the pmf from 0
    u = rng.random()
    q = 1 - p
    prob = q**n
    k = 0
    cdf = prob
    while u > cdf and k < n:
        prob *= (n - k) / (k + 1) * p / q
        k += 1
        cdf += prob
    return k


# -- the gate: the summary the bench writes, judged by the gate ------------------------------


def thresholds(
    metrics: Sequence[str], floor_percent: float | None, *, against_baseline: bool = True
) -> Thresholds:
    """The gate's thresholds: p99 limits on ``metrics``, the regression floor's share (None:
    each metric's default, ``SloThresholds.floor_percent``), and (``against_baseline``)
    maxRegressionPercent."""
    slo: dict[str, Any] = {f"{m}Ms": {"p99": LIMITS[m]} for m in metrics}
    slo |= {"minGoodputPercent": 90, "maxErrorPercent": 1}
    if floor_percent is not None:
        slo["regressionFloorPercent"] = floor_percent
    regression = REGRESSION_PERCENT if against_baseline else None
    return Thresholds.model_validate({"maxRegressionPercent": regression, "slo": slo})


LIMITED: tuple[str, ...] = ("ttft", "itl", "e2e")
THRESHOLDS = thresholds(LIMITED, FLOOR_PERCENT)
"""The H200 spec's; ``--limits`` and ``--floor-percent`` replace it for a diagnostic run."""


def plan_for(deadline: float) -> TrialPlan:
    """The plan the bench runs and the gate judges with: 3 to 10 trials, cut to the trials
    the deadline can give a level (``gate.budget.reachable_plan``: 3-6 at 480 s)."""
    return reachable_plan(
        SweepBudget(
            deadline=deadline,
            levels=len(LEVELS),
            seconds_per_level=SECONDS,
            servers=SERVERS,
            trials=TRIALS,
            max_trials=MAX_TRIALS,
            reserve=REPORT_RESERVE_FRACTION,
        )
    )


PLAN = plan_for(DEADLINE)


@dataclass
class Level:
    """One level's trials so far on both servers, and its figures as the bench writes them."""

    level: float
    cand: dict[str, list[Any]]
    base: dict[str, list[Any]]
    requests: list[int]
    memo: tuple[int, tuple[LoadLevelFigures, LoadLevelFigures]] | None = None

    def figures(self) -> tuple[LoadLevelFigures, LoadLevelFigures]:
        """(candidate's, baseline's) ``LoadLevelFigures``: counts by ``bench.load.tails``,
        remembered for the trials so far (the last look's are the level's final figures)."""
        trials = len(self.requests)
        if self.memo is not None and self.memo[0] == trials:
            return self.memo[1]
        self.memo = (trials, self._figures(trials))
        return self.memo[1]

    def _figures(self, trials: int) -> tuple[LoadLevelFigures, LoadLevelFigures]:
        limits = THRESHOLDS.slo.at(self.level) if THRESHOLDS.slo is not None else None

        def side(
            ours: dict[str, list[Any]], theirs: dict[str, list[Any]] | None
        ) -> LoadLevelFigures:
            pooled, counts = level_tails(
                limits,
                lambda metric: ours[metric],
                (lambda metric: theirs[metric]) if theirs is not None else None,
                THRESHOLDS,
                fast_clustering,
            )
            return LoadLevelFigures(
                level=self.level,
                requests=sum(self.requests),
                pooled=pooled,
                tails=counts,
                goodput_percent=[100.0] * trials,
                error_percent=[0.0] * trials,
            )

        return side(self.cand, self.base), side(self.base, None)


def summary_of(levels: Sequence[tuple[LoadLevelFigures, LoadLevelFigures]]) -> BenchSummary:
    """The candidate's summary with its paired baseline, as ``bench.report.raw_summary``."""
    return BenchSummary(
        load=LoadSweep(mode="rate", levels=[c for c, _ in levels]),
        paired_baseline=PairedBaseline(load=LoadSweep(mode="rate", levels=[b for _, b in levels])),
        trial_plan=PLAN,
    )


@dataclass(frozen=True)
class Models:
    ttft: dict[float, TtftModel]
    itl: dict[float, ItlModel]
    e2e: dict[float, TtftModel]


METRICS = ("ttft", "itl", "e2e")
RECORDED: dict[float, list[tuple[Run, Run]]] = {}
"""``--recorded-pairs`` (a diagnostic): per level the recorded paired trials; TTFT and E2E
are then not drawn from the model but resampled from one recorded pair's two runs."""


def resampled(  # noqa: PLR0917 - the model's draw, as ttft_trial
    run: Run, metric: str, n: int, rng: random.Random, change: Change, shift: float
) -> tallies.SampleTally:
    """``n`` requests drawn with replacement from a recorded run's ``metric``."""
    values = run.ttft if metric == "ttft" else run.e2e
    size = len(values)
    drawn = (values[int(rng.random() * size)] for _ in range(n))
    return tallies.SampleTally.of([v * change.every + shift for v in drawn])


def model_gate(
    rng: random.Random, models: Models, change: Change
) -> tuple[str, int, float, list[str]]:
    """One simulated gate: (verdict, most trials of a level, seconds, the figures that were
    not within: "itl p99 at 8 req/s against the baseline: inconclusive")."""
    elapsed = 0.0
    round_seconds = SERVERS * SECONDS
    done: list[tuple[LoadLevelFigures, LoadLevelFigures]] = []
    most = 0
    for index, level in enumerate(LEVELS):
        elapsed += SERVERS * min(SECONDS, WARMUP_SECONDS)
        state = Level(level, {m: [] for m in METRICS}, {m: [] for m in METRICS}, [])
        while True:
            common = [rng.gauss(0, 1) for _ in range(5)]
            picks = (rng.random(), rng.random(), rng.random())  # tail shapes, both servers
            order = rng.random()  # which run of the recorded ITL pair is the candidate's
            n = binomial_poisson(rng, round(level * SECONDS))  # one arrival schedule, both
            for side, what, side_of in (
                (state.cand, change, order),
                (state.base, Change(), 1 - order),
            ):
                shift = what.shift("ttft", level)
                recorded = None
                if RECORDED:
                    pair = RECORDED[level][int(picks[0] * len(RECORDED[level]))]
                    recorded = pair[0] if side_of < 0.5 else pair[1]
                    ttft = resampled(recorded, "ttft", n, rng, what, shift)
                else:
                    ttft = ttft_trial(
                        rng, models.ttft[level], n, (common[0], common[1], picks[0]), what, shift
                    )
                side["ttft"].append(ttft)
                gaps = n * (OUTPUT_TOKENS - 1)
                if "itl" in LIMITED:
                    shift = what.shift("itl", level)
                    itl = itl_trial(rng, models.itl[level], gaps, (picks[2], side_of), what, shift)
                    side["itl"].append(itl)
                if "e2e" in LIMITED:  # drawn on its own: the judge takes each metric apart
                    shift = what.shift("e2e", level)
                    if recorded is not None:
                        e2e = resampled(recorded, "e2e", n, rng, what, shift)
                    else:
                        e2e = ttft_trial(
                            rng, models.e2e[level], n, (common[3], common[4], picks[1]), what, shift
                        )
                    side["e2e"].append(e2e)
            state.requests.append(n)
            elapsed += round_seconds
            trials = len(state.requests)
            if elapsed > DEADLINE or trials >= PLAN.max_trials:
                break
            if trials < TRIALS:
                continue
            judged = judge_slo(summary_of([*done, state.figures()]), THRESHOLDS, None, PLAN)
            if any(j.finding.severity == "fail" for j in judged):
                break  # bench.report.open_figures: nothing is open once Failed
            if figure(level) not in {j.figure for j in judged if j.undecided}:
                break
            later = held_for_later(
                len(LEVELS) - index - 1, round_seconds, SERVERS * WARMUP_SECONDS, TRIALS
            )
            fits = extra_round_fits(
                elapsed + later, round_seconds, DEADLINE, REPORT_RESERVE_FRACTION
            )
            if not fits:
                break
            last = index == len(LEVELS) - 1
            if not last and not can_still_decide(level, n, trials, elapsed + later):
                break
        most = max(most, len(state.requests))
        done.append(state.figures())
        summary = summary_of(done)
        if index < len(LEVELS) - 1 and breached(summary, THRESHOLDS, level, PLAN):
            break  # stopAtFirstBreach: the levels above are not run
    final = summary_of(done)
    outcome = verdict(final, THRESHOLDS, None, require_paired=True, plan=PLAN).outcome
    why = [
        f"{j.finding.text.split(':')[0]}: {j.finding.severity}"
        for j in judge_slo(final, THRESHOLDS, None, PLAN)
        if j.finding.severity != "note"
    ]
    return outcome, most, elapsed, why


def can_still_decide(level: float, requests: int, trials: int, elapsed: float) -> bool:
    """The sweep's rule (``Sweep.can_still_decide``) on the planned durations."""
    longest = SERVERS * SECONDS
    reachable = trials
    while reachable < PLAN.max_trials and extra_round_fits(
        elapsed + (reachable - trials) * longest, longest, DEADLINE, REPORT_RESERVE_FRACTION
    ):
        reachable += 1
    assert THRESHOLDS.slo is not None
    per_trial = Observations(requests, OUTPUT_TOKENS - 1)
    short = short_limits(THRESHOLDS.slo.at(level), per_trial, reachable, CONFIDENCE, PLAN)
    return not short


def binomial_poisson(rng: random.Random, mean: int) -> int:
    """Poisson arrivals in a level: about ``mean`` requests (normal approximation)."""
    return max(1, round(rng.gauss(mean, math.sqrt(mean))))


# -- a faster, equal clustering estimate ------------------------------------------------------


def spans_of(tally: tallies.Tally, count: int) -> list[tuple[float, int]]:
    """(value, how many) of the ``count`` slowest observations of ``tally``, slowest first:
    the same multiset ``pair_tails.slowest`` lists one by one."""
    if isinstance(tally, ModelGaps):
        return tally.spans(count)
    return [(v, 1) for v, _ in reversed(pair_tails.slowest(tally, count))]


def fast_clustering(
    tallies_: Sequence[tallies.Tally],
    allowed: float,
    fewest: int,
    bases: Sequence[float | None] | None = None,
) -> clustering.Clustering:
    """``gate.clustering.tail_clustering`` with its pooled slowest observations held as
    (value, count) runs instead of one entry per gap (the model's gaps are 1 ms buckets, so a
    trial's slowest 2% of 60,000 gaps are a few hundred runs): the same grid bounds, the same
    calls for everything else, so the same ``Clustering``; ``check_clustering`` compares the
    two at start-up."""
    k = len(tallies_)
    scale = [1.0] * k if bases is None else [b if b else 0.0 for b in bases]
    used = [i for i in range(k) if scale[i] > 0]
    totals = [tallies_[i].exceedance(-math.inf).total if i in used else 0.0 for i in range(k)]
    n = sum(totals)
    plain = clustering.Clustering((1.0,) * k, 1.0, None)
    if n <= 0:
        return plain
    top = math.ceil(max(clustering.SHARES) * allowed * n)
    merged: dict[float, int] = {}
    for i in used:
        for v, many in spans_of(tallies_[i], min(top, int(totals[i]))):
            key = v / scale[i]
            merged[key] = merged.get(key, 0) + many
    runs = sorted(merged.items(), reverse=True)
    size = sum(many for _, many in runs)
    grid: list[tuple[float, list[Exceedance]]] = []
    for share in clustering.SHARES:
        rank = math.ceil(share * allowed * n)
        if share * allowed >= 1 or rank >= size:
            continue
        ratio = _below_runs(runs, rank)
        if ratio is None:
            continue
        at = [
            tallies_[i].exceedance(ratio * scale[i]) if i in used else Exceedance(0.0, 0.0)
            for i in range(k)
        ]
        grid.append((share, at))
    if not grid:
        return plain
    reference = min(grid, key=lambda g: abs(g[0] - clustering.REFERENCE))[1]
    stray = clustering._stalled(reference, stray_cluster(reference, fewest))
    effects = tuple(
        max(1.0, statistics.median(at[i].design_effect for _, at in grid)) for i in range(k)
    )
    kept = [i for i in range(k) if i != stray]
    across = statistics.median(
        clustering._across([at[i] for i in kept], [effects[i] for i in kept]) for _, at in grid
    )
    return clustering.Clustering(effects, max(1.0, across), stray)


def _below_runs(runs: Sequence[tuple[float, int]], rank: int) -> float | None:
    """``clustering._below`` on descending (value, count) runs of distinct values: the value
    after the run that holds the ``rank``-th largest, None when that run is the last."""
    seen = 0
    for index, (_, many) in enumerate(runs):
        seen += many
        if seen >= rank:
            return runs[index + 1][0] if index + 1 < len(runs) else None
    return None


def check_clustering(rng: random.Random, models: Models) -> int:
    """Gates' worth of modelled tallies through both estimates: the number that differ (0)."""
    differ = 0
    for _ in range(30):
        level = rng.choice(LEVELS)
        n = binomial_poisson(rng, round(level * SECONDS))
        trials = rng.randint(3, 6)
        commons = [(rng.gauss(0, 1), rng.gauss(0, 1), rng.random()) for _ in range(trials)]
        gaps = [
            itl_trial(rng, models.itl[level], n * (OUTPUT_TOKENS - 1), (c[2], 0.0), Change())
            for c in commons
        ]
        ttft = [ttft_trial(rng, models.ttft[level], n, c, Change()) for c in commons]
        for ts in (gaps, ttft):
            bases = [rng.choice([None, rng.uniform(5, 200)]) for _ in ts]
            for b in (None, bases):
                differ += fast_clustering(ts, 0.01, 3, b) != clustering.tail_clustering(
                    ts, 0.01, 3, b
                )
    return differ


# -- a faster, equal beta quantile -----------------------------------------------------------


_bisect_quantile = exact.beta_quantile


@lru_cache(maxsize=200_000)
def newton_quantile(p: float, a: float, b: float) -> float:
    """x with I_x(a, b) = p, on the same ``exact.incomplete_beta``, to machine precision.

    Closed form when a == 1 (no exceedance: I_x(1, b) = 1 - (1 - x)^b); otherwise Halley
    steps from the Abramowitz-Stegun 26.5.22 start, kept inside a shrinking bracket
    (bisection when a step leaves it).
    """
    if a == 1.0:
        return -math.expm1(math.log1p(-p) / b)
    low, high = 0.0, 1.0
    x = _start(p, a, b)
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    for _ in range(300):
        f = exact.incomplete_beta(x, a, b) - p
        if f == 0:
            return x
        if f < 0:
            low = x
        else:
            high = x
        if high - low < 1e-15:
            return (low + high) / 2
        step = -1.0
        if 0 < x < 1:
            log_density = log_norm + (a - 1) * math.log(x) + (b - 1) * math.log1p(-x)
            density = math.exp(min(log_density, 700.0))
            if density > 0:
                newton = f / density
                curve = (a - 1) / x - (b - 1) / (1 - x)  # f''/f' of the CDF
                halley = abs(newton * curve) < 1  # near the root; else plain Newton
                step = x - (newton / (1 - 0.5 * newton * curve) if halley else newton)
        if not low < step < high or (abs(step - x) <= 1e-16 * x and abs(f) > 1e-13):
            step = (low + high) / 2
        elif abs(step - x) <= 1e-16 * max(x, 1e-300):
            return step
        x = step
    return x


def _start(p: float, a: float, b: float) -> float:
    """A first guess of the beta quantile (Abramowitz and Stegun 26.5.22), in (0, 1)."""
    if a < 1 or b < 1:
        return a / (a + b)
    pp = p if p < 0.5 else 1 - p
    t = math.sqrt(-2 * math.log(pp))
    z = (2.30753 + t * 0.27061) / (1 + t * (0.99229 + t * 0.04481)) - t
    if p < 0.5:
        z = -z
    al = (z * z - 3) / 6
    h = 2 / (1 / (2 * a - 1) + 1 / (2 * b - 1))
    w = z * math.sqrt(al + h) / h - (1 / (2 * b - 1) - 1 / (2 * a - 1)) * (al + 5 / 6 - 2 / (3 * h))
    x = a / (a + b * math.exp(min(2 * w, 700.0)))
    return min(max(x, 1e-300), 1 - 1e-16)


def check_quantile(rng: random.Random) -> float:
    worst = 0.0
    for _ in range(200):
        n = rng.choice([20.0, 480.0, 1440.0, 4800.0, 60_000.0]) * rng.uniform(0.3, 1)
        hits = rng.choice([0.0, 1.0, 3.5, 20.0, 0.03 * n])
        p = rng.choice([0.9875, 0.99821, 0.00125, 0.0125, 0.99375])
        ours = newton_quantile(p, hits + 1, n - hits)
        theirs = _bisect_quantile(p, hits + 1, n - hits)
        worst = max(worst, abs(ours - theirs))
    return worst


# -- goodness of fit -------------------------------------------------------------------------


def goodness(rng: random.Random, runs: Sequence[Run], models: Models) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for level in LEVELS:
        at = [r for r in runs if r.level == level]
        data_p99 = [math.log(quantile(r.ttft, 0.99)) for r in at]
        sims = []
        for _ in range(2000):
            common = (rng.gauss(0, 1), rng.gauss(0, 1), rng.random())
            tally = ttft_trial(rng, models.ttft[level], len(at[0].ttft), common, Change())
            sims.append(math.log(quantile(tally.values, 0.99)))
        pooled = sorted(v for r in at for v in r.ttft)
        out[f"{level:g}"] = {
            "ttft_p99_data_ms": [round(math.exp(v)) for v in data_p99],
            "ttft_p99_log_mean_sd_data": [
                round(statistics.fmean(data_p99), 3),
                round(statistics.stdev(data_p99), 3),
            ],
            "ttft_p99_log_mean_sd_model": [
                round(statistics.fmean(sims), 3),
                round(statistics.stdev(sims), 3),
            ],
            "ttft_p99_range_model_ms": [
                round(math.exp(quantile(sorted(sims), q))) for q in (0.05, 0.5, 0.95)
            ],
            "ttft_pooled_p99_data_ms": round(quantile(pooled, 0.99)),
            "ttft_largest_data_ms": round(pooled[-1]),
            "itl_p99_data_ms": [round(r.itl["p99"], 1) for r in at],
        }
    return out


def pair_check(rng: random.Random, runs: Sequence[Run], models: Models) -> dict[str, Any]:
    """What the twin comparison sees, recorded pairs against modelled ones: per level, for
    TTFT and E2E, the root mean square of ln(candidate p99 / twin p99) over paired trials and
    the share of (trial, server) in which the one server has a request above the other's
    bar ``max(1.1 b, b + floor)`` (``b`` its p99, the floor the metric's default); for ITL,
    the share of gaps above the 100 ms limit (runs that kept their slow gaps)."""
    assert THRESHOLDS.slo is not None
    out: dict[str, Any] = {}

    def seen(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], floor: float) -> Any:
        logs, hit = [], 0
        for c, b in pairs:
            logs.append(math.log(quantile(c, 0.99) / quantile(b, 0.99)))
            for one, other in ((c, b), (b, c)):
                bar = max(1.1 * quantile(other, 0.99), quantile(other, 0.99) + floor)
                hit += one[-1] > bar
        return {
            "pairs": len(pairs),
            "rms_log_p99_ratio": round(math.sqrt(statistics.fmean(x * x for x in logs)), 3),
            "share_with_a_request_above_the_bar": round(hit / (2 * len(pairs)), 4),
        }

    for level in LEVELS:
        at = [r for r in runs if r.level == level]
        here: dict[str, Any] = {}
        for metric in ("ttft", "e2e"):
            floor = THRESHOLDS.slo.floor_percent(metric, THRESHOLDS.slo)[0] / 100 * LIMITS[metric]
            by: dict[tuple[str, int], dict[str, tuple[float, ...]]] = {}
            for r in at:
                by.setdefault((r.source, r.trial), {})[r.server] = getattr(r, metric)
            data = [(v["candidate"], v["baseline"]) for v in by.values() if len(v) == 2]
            model = models.ttft[level] if metric == "ttft" else models.e2e[level]
            drawn = []
            for _ in range(2000):
                common = (rng.gauss(0, 1), rng.gauss(0, 1), rng.random())
                one, two = (
                    ttft_trial(rng, model, len(at[0].ttft), common, Change()).values
                    for _ in range(2)
                )
                drawn.append((one, two))
            here[metric] = {"data": seen(data, floor), "model": seen(drawn, floor)}
        kept = [r for r in at if r.itl_above_p99]
        gaps = sum(len(r.ttft) * (OUTPUT_TOKENS - 1) for r in kept)
        above = sum(
            sum(1 for x in r.itl_above_p99 or () if x > math.log(100 / r.itl["p99"])) for r in kept
        )
        modelled = [
            itl_trial(
                rng,
                models.itl[level],
                len(at[0].ttft) * (OUTPUT_TOKENS - 1),
                (rng.random(), rng.random()),
                Change(),
            ).exceedance(100.0)
            for _ in range(500)
        ]
        here["itl_share_above_100_ms"] = {
            "data": above / max(gaps, 1),
            "model": sum(e.above for e in modelled) / sum(e.total for e in modelled),
        }
        out[f"{level:g}"] = here
    return out


# -- main ------------------------------------------------------------------------------------


def stated_powers(timeout_seconds: float) -> dict[tuple[str, float], float | None]:
    """``gate.power``'s statement for this spec: the smallest shift (ms) of each limited p99
    at each level that the plan detects with 95% probability (unrounded: the printed figure
    is rounded up, so checking this one is the stricter test)."""
    spec = GateSpec.model_validate(
        {
            "trials": TRIALS,
            "maxTrials": MAX_TRIALS,
            "timeoutSeconds": int(timeout_seconds),
            "suite": {"builtin": "none"},
            "baseline": {"mode": "twin"},
            "workload": {
                "synthetic": {
                    "inputTokens": {"mean": 512},
                    "outputTokens": {"mean": OUTPUT_TOKENS},
                },
                "load": {"mode": "rate", "rates": list(LEVELS), "secondsPerLevel": SECONDS},
            },
            "thresholds": THRESHOLDS.model_dump(by_alias=True, exclude_none=True),
        }
    )
    found = plan_power(spec, bench_deadline(spec.timeout_seconds), servers=SERVERS)
    return {(p.metric, p.rate): p.detects_ms for p in found}


def rows_for(powers: dict[tuple[str, float], float | None]) -> dict[str, Change]:
    """A/A, each stated power as a regression of exactly that size at its level alone, and
    the candidate 5% slower everywhere."""
    rows = {"A/A": Change()}
    for (metric, level), ms in sorted(powers.items()):
        if ms is not None:
            name = f"{metric.upper()} p99 +{ms:.1f} ms at {level:g}/s (stated)"
            rows[name] = Change(metric=metric, level=level, shift_ms=ms)
    rows["+5% everywhere"] = Change(every=1.05)
    return rows


def main() -> None:
    global THRESHOLDS, LIMITED, DEADLINE, PLAN  # noqa: PLW0603 - set once from the arguments, before any gate
    parser = argparse.ArgumentParser()
    parser.add_argument("--gates", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument(
        "--limits", default="ttft,itl,e2e", help="diagnostic: the metrics with a p99 limit"
    )
    parser.add_argument(
        "--only", default="", help="run only the rows whose name contains this (e.g. A/A)"
    )
    parser.add_argument(
        "--row",
        type=lambda text: [int(i) for i in text.split(",")],
        default=[],
        help="run only these rows (0-based, comma-separated; a process for a few rows)",
    )
    parser.add_argument(
        "--floor-percent", type=float, default=FLOOR_PERCENT, help="diagnostic: the floor"
    )
    parser.add_argument(
        "--limits-only",
        action="store_true",
        help="diagnostic: no maxRegressionPercent (the absolute limits alone)",
    )
    parser.add_argument(
        "--timeout-seconds",
        type=float,
        default=TIMEOUT_SECONDS,
        help="the gate's timeoutSeconds (default: the H100 kit's 480)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    parser.add_argument(
        "--recorded-pairs",
        action="store_true",
        help="diagnostic: TTFT and E2E resampled from the recorded paired trials, not modelled",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        help="write --out from the results of one process a row (--row) and print the table",
    )
    args = parser.parse_args()
    if args.merge:
        merge(args.merge, args.out)
        return
    DEADLINE = args.timeout_seconds - 30.0
    PLAN = plan_for(DEADLINE)
    LIMITED = tuple(args.limits.split(","))
    THRESHOLDS = thresholds(LIMITED, args.floor_percent, against_baseline=not args.limits_only)
    rng = random.Random(args.seed)
    worst = check_quantile(rng)
    print(f"Newton quantile against the bisection: largest difference {worst:.1e}")
    assert worst < 1e-12
    exact.beta_quantile = newton_quantile  # the same quantile, found in fewer steps

    runs = load_runs()
    if args.recorded_pairs:
        for level in LEVELS:
            by: dict[tuple[str, int], dict[str, Run]] = {}
            for r in runs:
                if r.level == level:
                    by.setdefault((r.source, r.trial), {})[r.server] = r
            RECORDED[level] = [(v["candidate"], v["baseline"]) for v in by.values() if len(v) == 2]
    models = Models(
        {level: fit_ttft(runs, level) for level in LEVELS},
        {level: fit_itl(runs, level) for level in LEVELS},
        {level: fit_ttft(runs, level, "e2e") for level in LEVELS},
    )
    fitted = {
        f"{level:g}": {
            "ttft_location": vars(models.ttft[level].location),
            "ttft_spread": vars(models.ttft[level].spread),
            "ttft_location_spread_correlation": models.ttft[level].rho,
            "ttft_tail_runs": len(models.ttft[level].tails),
            "ttft_tail_q99": models.ttft[level].q99,
            "itl_knots_ms": [round(math.exp(k), 2) for k in models.itl[level].knots],
            "itl_log_p99": vars(models.itl[level].p99),
            "e2e_location": vars(models.e2e[level].location),
            "e2e_spread": vars(models.e2e[level].spread),
            "e2e_tail_q99": models.e2e[level].q99,
        }
        for level in LEVELS
    }
    print(json.dumps(fitted, indent=1))
    differ = check_clustering(rng, models)
    print(f"run-length clustering against gate.clustering: {differ} of 240 estimates differ")
    assert differ == 0
    fit = goodness(rng, runs, models)
    print(json.dumps(fit, indent=1))

    powers = stated_powers(args.timeout_seconds)
    print("stated:", {f"{m} p99 at {r:g}/s": ms for (m, r), ms in powers.items()})
    rows: dict[str, Any] = {}
    chosen = [
        RowRun(name, change, random.Random(f"{args.seed}:{name}"))  # --only repeats a row
        for index, (name, change) in enumerate(rows_for(powers).items())
        if args.only in name and (not args.row or index in args.row)
    ]
    for gate in range(1, args.gates + 1):  # the rows in turn: a run cut short keeps them even
        for row in chosen:
            row.gate(models)
            if gate % SAVE_EVERY == 0 or gate == args.gates:
                rows[row.name] = row.figures()
        if gate % SAVE_EVERY == 0 or gate == args.gates:
            save(args, fitted, fit, rows, powers)
    for name, r in rows.items():
        print(
            f"{name:16} Failed {r['failed']:.1%}  Inconclusive {r['inconclusive']:.1%}  "
            f"Passed {r['passed']:.1%}  median trials {r['median_trials']}  "
            f"median {r['median_seconds']:.0f} s (p95 {r['p95_seconds']:.0f})  "
            f"[{r['runtime_seconds']} s]"
        )
        for what, share in r["not_within"].items():
            print(f"    {share:6.1%} of gates: {what}")


@dataclass
class RowRun:
    """One row's gates so far: its own random stream, verdicts and durations."""

    name: str
    change: Change
    rng: random.Random
    verdicts: Counter[str] = field(default_factory=Counter)
    not_within: Counter[str] = field(default_factory=Counter)
    trials: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    busy: float = 0.0

    def gate(self, models: Models) -> None:
        started = time.perf_counter()
        outcome, most, took, why = model_gate(self.rng, models, self.change)
        self.busy += time.perf_counter() - started
        self.verdicts[outcome] += 1
        self.not_within.update(why)
        self.trials.append(most)
        self.seconds.append(took)

    def figures(self) -> dict[str, Any]:
        return row_of(self.verdicts, self.not_within, self.trials, self.seconds, self.busy)


SAVE_EVERY = 25


def row_of(
    verdicts: Counter[str],
    figures: Counter[str],
    trials: list[int],
    seconds: list[float],
    busy: float,
) -> dict[str, Any]:
    """One row's rates over the gates run so far (``busy``: the seconds its gates took)."""
    gates = len(trials)
    return {
        "gates": gates,
        "passed": verdicts["Passed"] / gates,
        "failed": verdicts["Failed"] / gates,
        "inconclusive": verdicts["Inconclusive"] / gates,
        "median_trials": statistics.median(trials),
        "median_seconds": statistics.median(seconds),
        "p95_seconds": quantile(sorted(seconds), 0.95),
        "runtime_seconds": round(busy, 1),
        "not_within": {k: v / gates for k, v in figures.most_common()},
    }


def targets_of(rows: dict[str, Any]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for name, r in rows.items():
        if name == "A/A":
            out["A/A Passed >= 95%"] = r["passed"] >= 0.95
            out["A/A Failed <= 1%"] = r["failed"] <= 0.01
        elif name.endswith("(stated)"):
            out[f"{name} Failed >= 95%"] = r["failed"] >= 0.95
        else:
            out[f"{name} Failed <= 5%"] = r["failed"] <= 0.05
    return out


def save(
    args: argparse.Namespace,
    fitted: dict[str, Any],
    fit: dict[str, Any],
    rows: dict[str, Any],
    powers: dict[tuple[str, float], float | None],
) -> None:
    """Everything so far (after each row: a run cut short keeps its finished rows)."""
    targets = targets_of(rows)
    partial = args.out.with_suffix(".partial")  # then renamed: a reader never sees half
    partial.write_text(
        json.dumps(
            {
                "fitted": fitted,
                "goodness": fit,
                "stated_power_ms": {f"{m} p99 at {r:g}/s": ms for (m, r), ms in powers.items()},
                "timeout_seconds": args.timeout_seconds,
                "rows": rows,
                "targets": targets,
                "seed": args.seed,
                "limits": list(LIMITED),
                "floor_percent": args.floor_percent,
                "recorded_pairs": args.recorded_pairs,
                "against_baseline": not args.limits_only,
            },
            indent=1,
        )
        + "\n"
    )
    partial.replace(args.out)
    print(json.dumps(targets, indent=1))


def merge(parts: Sequence[Path], out: Path) -> None:
    """One results file from one process a row: the rows together (each named with the shift
    it was checked at), the fit from the first, and the powers the code states now
    (``stated_power_ms``; a row checked at a smaller shift than stated is the stricter test:
    the judge fails a larger regression at least as often)."""
    loaded = [json.loads(p.read_text()) for p in parts]
    first = loaded[0]
    timeout = float(first["timeout_seconds"])
    first["stated_power_ms"] = {
        f"{m} p99 at {r:g}/s": ms for (m, r), ms in stated_powers(timeout).items()
    }
    rows: dict[str, Any] = {}
    for d in loaded:
        rows |= d["rows"]
    first["rows"] = rows
    first["targets"] = targets_of(rows)
    runs = load_runs()
    models = Models(
        {level: fit_ttft(runs, level) for level in LEVELS},
        {level: fit_itl(runs, level) for level in LEVELS},
        {level: fit_ttft(runs, level, "e2e") for level in LEVELS},
    )
    first["pair_check"] = pair_check(random.Random(first["seed"]), runs, models)
    out.write_text(json.dumps(first, indent=1) + "\n")
    print("| row | gates | Failed | Inconclusive | Passed | median trials / duration |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['gates']:,} | {r['failed']:.1%} | {r['inconclusive']:.1%} | "
            f"{r['passed']:.1%} | {r['median_trials']:g} / {r['median_seconds']:.0f} s |"
        )
    print(json.dumps(first["targets"], indent=1))


if __name__ == "__main__":
    main()
