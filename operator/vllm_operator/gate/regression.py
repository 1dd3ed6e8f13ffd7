"""Regressions against the baseline, decided on intervals rather than on single numbers.

Each compared figure (median latency per prompt class, aggregate tokens/s per concurrency
level) carries one value per trial on both sides. The gate recomputes the interval of the
relative difference candidate / baseline - 1 from those values (``gate.interval``) instead
of trusting anything the measured side concluded, and decides:

- **Failed** only when the whole interval is beyond the limit (the regression is larger
  than the limit with the stated confidence);
- **Passed** (a note with the interval) only when the whole interval is within it;
- **undecided** when the interval straddles the limit: while the trial plan allows, the
  benchmark measures that figure once more (``gate.verdict.open_figures``) and the gate
  looks again; what is
  still undecided at the end is **Inconclusive**, with how many trials ran and about how many
  would decide it.

Which baseline, the limit and the judge of one figure are ``gate.comparison``'s (shared with
the load sweep's ``gate.slo``). The limit of a figure is the larger of
``maxRegressionPercent`` of the baseline and an absolute floor (``regressionFloorMs``,
``regressionFloorTokensPerSecond``): a 20 ms median moves 1-5 ms between trials on an H200,
so 10% of it is below what a trial resolves. The reason names the floor when it set the
limit. Each look's interval is widened for the
number of looks the plan allows (``gate.sequential``), and one outlier trial is left out of
it (``gate.robust``), so one JIT-compile stall cannot decide a figure alone.

A baseline measured in the same run (``pairedBaseline``) is compared trial by trial; a
stored one, unpaired. With one trial on each side there is no spread to estimate: the
figures are compared as points, and the reason says so. Candidate and baseline on different
GPU products are not compared at all (Inconclusive, saying so): the difference would be the
hardware's. Quality is a count of deterministic answers, compared as before.
"""

from __future__ import annotations

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    BenchSummary,
    ConcurrencyFigures,
    Figures,
    LatencyFigures,
    Placement,
    TrialPlan,
)
from vllm_operator.gate.comparison import Judge, baseline_for, regression_limit_set
from vllm_operator.gate.finding import FigureKey, Finding, Judged

MIN_LATENCY_SAMPLES = 3
"""Fewer measured requests per prompt class than this and a median is not a figure."""


def regressions(
    summary: BenchSummary,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    plan: TrialPlan | None = None,
) -> list[Finding]:
    """Findings of the comparison with the baseline (paired one first, else ``baseline``)."""
    return [j.finding for j in judge_all(summary, thresholds, baseline, plan)]


def judge_all(
    summary: BenchSummary,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    plan: TrialPlan | None,
) -> list[Judged]:
    """Every comparison with the baseline, each with its figure and whether it is open."""
    if not regression_limit_set(thresholds):
        return []
    allowed = thresholds.max_regression_percent
    assert allowed is not None
    paired = summary.paired_baseline is not None
    base, problem = baseline_for(summary, baseline)
    if base is None:
        assert problem is not None
        return [Judged(problem)]
    quality = [Judged(f) for f in _quality_regression(summary, base, allowed)]
    if problem is not None:
        return [Judged(problem), *quality]
    judge = Judge(thresholds, paired, plan)
    return [
        *(Judged(f) for f in _placement_note(summary.placement, base.placement, paired)),
        *_latency(summary, base, judge),
        *_throughput(summary, base, judge),
        *quality,
    ]


def _placement_note(
    candidate: Placement | None, baseline: Placement | None, paired: bool
) -> list[Finding]:
    a = candidate.node if candidate else None
    b = baseline.node if baseline else None
    if paired or not a or not b or a == b:
        return []
    return [
        Finding(
            "note",
            f"stored baseline measured on node {b}, candidate on {a}: differences between "
            "nodes are not in the interval",
        )
    ]


def _latency_trials(figure: LatencyFigures) -> list[float]:
    return list(figure.trials) or [figure.median_ms]


def _level_trials(figure: ConcurrencyFigures) -> list[float]:
    return list(figure.trials) or [figure.aggregate_tokens_per_second]


def _latency(summary: Figures, baseline: Figures, judge: Judge) -> list[Judged]:
    base_by_class = {f.prompt_class: f for f in baseline.latency}
    found: list[Judged] = []
    for figure in summary.latency:
        base = base_by_class.pop(figure.prompt_class, None)
        name = figure.prompt_class
        if figure.requests < MIN_LATENCY_SAMPLES:
            found.append(Judged(Finding("inconclusive", thin_latency(figure))))
        elif base is None:
            found.append(Judged(Finding("inconclusive", f"baseline has no {name}-prompt latency")))
        elif base.requests < MIN_LATENCY_SAMPLES or base.median_ms <= 0:
            found.append(Judged(Finding("inconclusive", f"baseline {thin_latency(base)}")))
        else:
            found.append(
                judge.compare(
                    FigureKey.latency(name),
                    f"{name} prompts, median latency",
                    "ms",
                    _latency_trials(figure),
                    _latency_trials(base),
                    higher_is_worse=True,
                    digits=0,
                )
            )
    for name in sorted(base_by_class):
        found.append(
            Judged(Finding("inconclusive", f"baseline has {name}-prompt latency, candidate not"))
        )
    return found


def _throughput(summary: Figures, baseline: Figures, judge: Judge) -> list[Judged]:
    base_by_level = {f.concurrency: f for f in baseline.concurrency}
    found: list[Judged] = []
    for figure in summary.concurrency:
        base = base_by_level.pop(figure.concurrency, None)
        level = figure.concurrency
        if figure.requests < figure.concurrency:
            found.append(Judged(Finding("inconclusive", thin_level(figure))))
        elif base is None:
            found.append(
                Judged(Finding("inconclusive", f"baseline has no figure at {level} streams"))
            )
        elif base.requests < base.concurrency:
            found.append(Judged(Finding("inconclusive", f"baseline {thin_level(base)}")))
        elif base.aggregate_tokens_per_second <= 0:
            found.append(
                Judged(
                    Finding(
                        "inconclusive", f"baseline at {level} streams: no steady window (0 tok/s)"
                    )
                )
            )
        else:
            found.append(
                judge.compare(
                    FigureKey.concurrency(level),
                    f"{level} stream" if level == 1 else f"{level} streams",
                    "tok/s",
                    _level_trials(figure),
                    _level_trials(base),
                    higher_is_worse=False,
                    digits=1,
                )
            )
    for level in sorted(base_by_level):
        found.append(
            Judged(
                Finding("inconclusive", f"baseline has a figure at {level} streams, candidate not")
            )
        )
    return found


def _quality_regression(summary: Figures, baseline: Figures, allowed: float) -> list[Finding]:
    quality, base = summary.quality, baseline.quality
    if quality is None:
        return []
    if base is None:
        return [Finding("inconclusive", "baseline has no quality result")]
    if (quality.suite, quality.total) != (base.suite, base.total):
        return [
            Finding(
                "inconclusive",
                f"quality suites differ ({quality.suite} {quality.total} tests vs baseline "
                f"{base.suite} {base.total})",
            )
        ]
    if base.passed == 0:
        return []
    drop = (base.passed - quality.passed) / base.passed * 100
    if drop > allowed:
        return [
            Finding(
                "fail",
                f"quality {quality.passed}/{quality.total} is {drop:.1f}% below baseline "
                f"{base.passed}/{base.total} (max {allowed:g}%)",
            )
        ]
    return []


def thin_latency(figure: LatencyFigures) -> str:
    return (
        f"{figure.prompt_class} prompts: {figure.requests} request(s) measured, "
        f"fewer than {MIN_LATENCY_SAMPLES}: too few to compare"
    )


def thin_level(figure: ConcurrencyFigures) -> str:
    return (
        f"{figure.concurrency} streams: {figure.requests} request(s) completed, fewer than "
        "one per stream: too few to compare"
    )
