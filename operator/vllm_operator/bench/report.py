"""The report: a versioned JSON document, the study-style tables, and the exit code.

One ``BenchReport`` is built from the run state; everything shown to people (the tables) and
to machines (the JSON, the summary) comes from it, so they cannot disagree. The tables
follow the published study's layout (latency and tok/s by prompt size, aggregate tok/s by
streams, quality with pass/fail marks) so a reader can put them side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary, PairedBaseline, Placement, Verdict, Warmup
from vllm_operator.bench import summary as summary_mod
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.http.request import RequestRecord
from vllm_operator.bench.load.report import counted, judged_errors, load_json, sweep_of
from vllm_operator.bench.quality.run import differential
from vllm_operator.bench.run_state import RunState, ServerRun
from vllm_operator.bench.stats import MIN_DECODE_GAPS, Stats, decode_rate, level_figures
from vllm_operator.gate.classes import describe
from vllm_operator.gate.finding import FigureKey, Finding
from vllm_operator.gate.slo import breached, capacity
from vllm_operator.gate.verdict import HEADLINE_CHARS, judge, openness

REPORT_SCHEMA = "vllm-operator.dev/bench-report/v1"

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNMEASURED = 3


@dataclass(frozen=True)
class BenchReport:
    """The outcome of one run."""

    config: BenchConfig
    state: RunState
    summary: BenchSummary
    verdict: Verdict  # the gate's, with the run's own notes (deadline, early stop) first
    capacity: float | None = None
    """A load sweep's highest level that met every SLO (``gate.slo.capacity``)."""
    figures: tuple[Finding, ...] = ()
    """The gate's findings about judged figures, deciding first (the page's table and chart)."""

    @property
    def exit_code(self) -> int:
        """0 passed (or no gate and no errors), 1 failed/inconclusive, 3 could not measure.

        A run cut by its deadline is always 3; a run stopped early because the server kept
        failing follows the verdict (Failed: the server is broken, 1; Error: 3).
        """
        if self.state.deadline_hit:
            return EXIT_UNMEASURED
        if self.state.aborted and not self.config.gated:
            return EXIT_UNMEASURED
        if not self.config.gated:
            # Without a gate, a python-tests check refused on purpose (no sandbox asked
            # for) is reported as skipped, not as a failed measurement.
            unmeasured = any(k != "code_refused" for k in self.summary.errors)
            return EXIT_UNMEASURED if unmeasured else EXIT_PASSED
        return {"Passed": EXIT_PASSED, "Error": EXIT_UNMEASURED}.get(
            self.verdict.outcome, EXIT_FAILED
        )

    def to_json(self) -> dict[str, Any]:
        state = self.state
        duration = (state.finished or state.started) - state.started
        data: dict[str, Any] = {
            "schema": REPORT_SCHEMA,
            "config": self.config.public(),
            "server_version": state.server_version,
            "placement": _placement(self.config.candidate_placement, state.candidate).to_wire(),
            "trials": self.config.trials,
            "rounds": [
                {
                    "trial": r.number,
                    "classes": list(r.classes),
                    "levels": list(r.levels),
                    "seconds": round(r.seconds, 3),
                    "started_unix": round(r.started_unix, 3),
                }
                for r in state.rounds
            ],
            "settled": state.settled,
            "started_unix": round(state.wall_started, 3),
            "duration_seconds": round(duration, 3),
            "deadline_hit": state.deadline_hit,
            "aborted": state.aborted,
            **_server_json(state.candidate),
            "errors": _errors_json(state.candidate, state.errors()),
            "baseline": None,
            "load": load_json(self.config, state, self.capacity),
            "summary": self.summary.to_wire(),
            "verdict": (
                {**self.verdict.to_wire(), "figures": [figure_json(f) for f in self.figures]}
                if self.config.gated
                else None
            ),
            "exit_code": self.exit_code,
        }
        base = state.baseline
        if data["quality"] is not None:
            data["quality"]["differential"] = _differential_json(state)
        if base is not None:
            data["baseline"] = {
                "url": data["config"]["baseline_url"],
                "server_version": base.server_version,
                "placement": _placement(self.config.baseline_placement, base).to_wire(),
                **_server_json(base),
                "errors": _errors_json(base, base.errors()),
            }
        return data


def _server_json(server: ServerRun) -> dict[str, Any]:
    return {
        "warmup_passes": [
            {
                "pass": p.number,
                "latency_ms": {k: round(v, 2) for k, v in p.latency_ms.items()},
                "tokens_per_second": {str(k): round(v, 2) for k, v in p.tokens_per_second.items()},
                "seconds": round(p.seconds, 3),
                "started_unix": round(p.started_unix, 3),
                "agreed_with_previous": p.agreed,
            }
            for p in server.settle
        ],
        "latency": [_latency_json(n, t) for n, t in server.latency.items()],
        "concurrency": _concurrency_json(server),
        "quality": _quality_json(server),
    }


def _errors_json(server: ServerRun, errors: dict[str, int]) -> dict[str, Any]:
    return {
        name: {"count": count, "meaning": describe(name), "examples": _examples(server, name)}
        for name, count in sorted(errors.items())
    }


def _placement(told: Placement, server: ServerRun) -> Placement:
    """Where a server ran: node and GPU as told (flags), vLLM version as it answered."""
    return told.model_copy(update={"vllm_version": server.server_version})


def _paired_baseline(
    config: BenchConfig, base: ServerRun, must_pass: tuple[str, ...]
) -> PairedBaseline:
    quality = None
    if base.quality is not None:
        full = summary_mod.quality_figures(base.quality, must_pass)
        # the gate needs the baseline's counts, not its failed ids: keep the summary bounded
        quality = full.model_copy(update={"failed": [], "failed_omitted": len(full.failed)})
    return PairedBaseline(
        placement=_placement(config.baseline_placement, base),
        latency=[summary_mod.latency_figures(n, t) for n, t in base.latency.items()],
        concurrency=[summary_mod.concurrency_figures(c, t) for c, t in base.concurrency.items()],
        quality=quality,
        errors=counted(base.errors(), judged_errors(config, base)),
        load=sweep_of(config, base, None),
    )


def open_figures(config: BenchConfig, state: RunState) -> set[FigureKey]:
    """The figures the gate cannot decide yet on what ``state`` measured so far
    (``gate.open_figures``, on the same summary the final verdict is computed from); the
    runner measures these once more."""
    if config.thresholds is None:
        return set()
    still = openness(raw_summary(config, state), config.thresholds, config.baseline, config.plan)
    state.closed_by_failure = still.failed
    return set(still.figures)


def slo_breached(config: BenchConfig, state: RunState, level: float) -> bool:
    """Did the candidate break an SLO limit at ``level`` on what was measured so far?"""
    if config.thresholds is None:
        return False
    return breached(raw_summary(config, state), config.thresholds, level, config.plan)


def figure_json(found: Finding) -> dict[str, object]:
    """One judged figure as the report (and its page) carries it: outcome, why it stopped,
    and, where the judge gave them, the numbers (changes and limits as fractions)."""
    row: dict[str, object] = {
        "figure": found.figure,
        "outcome": found.outcome,
        "deciding": found.deciding,
        "stop": found.stop,
        "severity": found.severity,
        "reason": found.short,
    }
    numbers = found.comparison
    if numbers is not None:
        row |= {
            "candidate": round(numbers.candidate, 6),
            "baseline": round(numbers.baseline, 6),
            "unit": numbers.unit,
            "change": round(numbers.change, 6),
            "low": round(numbers.low, 6),
            "high": round(numbers.high, 6),
            "limit": round(numbers.limit, 6),
            "higher_is_worse": numbers.higher_is_worse,
            "trials": numbers.trials,
            "against": numbers.against,
        }
    return row


def build_report(config: BenchConfig, state: RunState) -> BenchReport:
    """Figures, summary and verdict from a finished (or cut-short) run."""
    thresholds = config.thresholds or Thresholds()
    raw = raw_summary(config, state)
    judgement = judge(raw, thresholds, config.baseline)
    judged = judgement.as_verdict()
    first = [f"run stopped early: {state.aborted}"] if state.aborted else []
    if state.deadline_hit:
        first.insert(0, f"deadline of {config.deadline_seconds:g} s reached")
    headline = "; ".join([*first, judged.headline or ""]).strip("; ")
    verdict = Verdict(
        outcome=judged.outcome,
        reasons=[*first, *judged.reasons],
        deciding=(judged.deciding or 0) + len(first) or None,
        headline=headline[:HEADLINE_CHARS] or None,
    )
    summary = raw.model_copy(
        update={"verdict": verdict.outcome if config.gated else None, "reasons": verdict.reasons}
    )
    most = capacity(raw, thresholds, config.plan)
    figures = tuple(f for f in judgement.findings if f.outcome is not None)
    return BenchReport(config, state, summary_mod.fit(summary), verdict, most, figures)


def raw_summary(config: BenchConfig, state: RunState) -> BenchSummary:
    """The figures of ``state`` as a summary, before any verdict (and before fitting)."""
    thresholds = config.thresholds or Thresholds()
    must_pass = tuple(thresholds.quality.must_pass)
    cand = state.candidate
    return BenchSummary(
        model=config.model,
        latency=[summary_mod.latency_figures(n, t) for n, t in cand.latency.items()],
        concurrency=[summary_mod.concurrency_figures(c, t) for c, t in cand.concurrency.items()],
        quality=(
            summary_mod.quality_figures(
                cand.quality, must_pass, state.baseline.quality if state.baseline else None
            )
            if cand.quality is not None
            else None
        ),
        errors=counted(state.errors(), judged_errors(config, cand)),
        placement=_placement(config.candidate_placement, cand),
        paired_baseline=(
            None if state.baseline is None else _paired_baseline(config, state.baseline, must_pass)
        ),
        trial_plan=config.plan,
        warmup=_warmup(state),
        load=sweep_of(config, cand, state.load_stopped_at, state.baseline),
    )


def _warmup(state: RunState) -> Warmup | None:
    if state.settled is None:
        return None
    return Warmup(
        candidate_passes=len(state.candidate.settle),
        baseline_passes=None if state.baseline is None else len(state.baseline.settle),
        settled=state.settled,
    )


def _stats_json(values: list[float], digits: int = 2) -> dict[str, float] | None:
    stats = Stats.of(values)
    if stats is None:
        return None
    return {
        "median": round(stats.median, digits),
        "min": round(stats.min, digits),
        "max": round(stats.max, digits),
        "mean": round(stats.mean, digits),
        "std": round(stats.std, digits),
    }


def _latency_json(name: str, trials: list[list[RequestRecord]]) -> dict[str, Any]:
    records = [r for recs in trials for r in recs]
    done = [r for r in records if r.ok]
    decode = [t for r in done if (t := decode_rate(r)) is not None]
    return {
        "class": name,
        "requests": len(records),
        "ok": len(done),
        "e2e_ms": _stats_json([r.e2e * 1000 for r in done]),
        "ttft_ms": _stats_json([r.ttft * 1000 for r in done]),
        "queue_ms": _stats_json([r.queue * 1000 for r in done], 3),
        "output_tokens": _stats_json([float(r.output_tokens) for r in done]),
        "prompt_tokens": _stats_json([float(r.prompt_tokens) for r in done if r.prompt_tokens]),
        "e2e_tokens_per_second": _stats_json([t for r in done if (t := r.e2e_tps) is not None]),
        "decode_tokens_per_second": _stats_json(decode),
        "decode_note": (
            None
            if decode or not done
            else f"fewer than {MIN_DECODE_GAPS} inter-token gaps per request: no decode rate"
        ),
        "tokens_estimated": any(r.tokens_estimated for r in records),
        "trials_median_e2e_ms": [
            round(_median_of(ms), 3) if (ms := [r.e2e * 1000 for r in t if r.ok]) else None
            for t in trials
        ],
        "per_request": [
            {"trial": n + 1, **_request_json(r)} for n, recs in enumerate(trials) for r in recs
        ],
    }


def _request_json(r: RequestRecord) -> dict[str, Any]:
    if not r.ok:
        return {"error": r.error, "detail": r.detail}
    return {
        "ttft_ms": round(r.ttft * 1000, 3),
        "e2e_ms": round(r.e2e * 1000, 3),
        "queue_ms": round(r.queue * 1000, 3),
        "output_tokens": r.output_tokens,
        "prompt_tokens": r.prompt_tokens,
    }


def _concurrency_json(server: ServerRun) -> list[dict[str, Any]]:
    one = server.concurrency.get(1)
    base = _median_of([level_figures(1, t).aggregate_tps for t in one]) if one else 0.0
    rows = []
    for level, trials in server.concurrency.items():
        figures = [level_figures(level, streams) for streams in trials]
        agg = _median_of([f.aggregate_tps for f in figures])
        per_stream = [m for f in figures if (m := f.median_stream_tps) is not None]
        rps = _median_of([f.requests_per_second for f in figures])
        rows.append(
            {
                "concurrency": level,
                "aggregate_tokens_per_second": round(agg, 3),
                "requests_per_second": round(rps, 4),
                "median_stream_tokens_per_second": (
                    round(_median_of(per_stream), 3) if per_stream else None
                ),
                "scaling_efficiency": round(agg / (level * base), 4) if base > 0 else None,
                "window_seconds": round(sum(f.window_end - f.window_start for f in figures), 4),
                "tokens_in_window": round(sum(f.tokens_in_window for f in figures), 2),
                "completed": sum(f.completed for f in figures),
                "failed": sum(1 for t in trials for s in t for r in s if not r.ok),
                "trials": [
                    {
                        "trial": n + 1,
                        "aggregate_tokens_per_second": round(f.aggregate_tps, 3),
                        "window_seconds": round(f.window_end - f.window_start, 4),
                        "completed": f.completed,
                    }
                    for n, f in enumerate(figures)
                ],
                "per_request": [
                    {"trial": n + 1, "stream": k + 1, **_request_json(r)}
                    for n, t in enumerate(trials)
                    for k, stream in enumerate(t)
                    for r in stream
                ],
            }
        )
    return rows


def _median_of(values: list[float]) -> float:
    stats = Stats.of(values)
    return 0.0 if stats is None else stats.median


def _quality_json(server: ServerRun) -> dict[str, Any] | None:
    quality = server.quality
    if quality is None:
        return None
    return {
        "suite": quality.suite.name,
        "passed": quality.passed,
        "total": len(quality.suite.tests),
        "tests": [
            {
                "id": o.test.id,
                "category": o.test.category,
                "passed": o.passed,
                "reason": o.reason,
                "checks": [{"passed": c.passed, "detail": c.detail} for c in o.checks],
                "answer": o.record.text[:2000],
            }
            for o in quality.outcomes
        ],
    }


def _differential_json(state: RunState) -> dict[str, Any] | None:
    """The candidate's answers against the paired baseline's, per test (None: no baseline)."""
    cand = state.candidate.quality
    base = state.baseline.quality if state.baseline is not None else None
    compared = differential(cand, base) if cand is not None and base is not None else None
    if compared is None:
        return None
    return {
        "compared": compared.compared,
        "identical": compared.identical,
        "identical_percent": round(100 * compared.identical / compared.compared, 2)
        if compared.compared
        else None,
        "baseline_passed": compared.baseline_passed,
        "still_passing": compared.still_passing,
        "still_passing_percent": round(100 * compared.still_passing / compared.baseline_passed, 2)
        if compared.baseline_passed
        else None,
        "tests": [
            {
                "id": t.id,
                "identical": t.identical,
                "baseline_passed": t.baseline_passed,
                "candidate_passed": t.candidate_passed,
            }
            for t in compared.tests
        ],
    }


def _examples(server: ServerRun, name: str) -> list[str]:
    seen: list[str] = []
    for r in server.records():
        if r.error == name and r.detail not in seen:
            seen.append(r.detail)
            if len(seen) == 3:
                break
    return seen
