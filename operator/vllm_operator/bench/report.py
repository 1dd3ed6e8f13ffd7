"""The report: a versioned JSON document, the study-style tables, and the exit code.

One ``BenchReport`` is built from the run state; everything shown to people (the tables) and
to machines (the JSON, the summary) comes from it, so they cannot disagree. The tables
follow the published study's layout (latency and tok/s by prompt size, aggregate tok/s by
streams, quality with pass/fail marks) so a reader can put them side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm_operator.api.spec import Thresholds
from vllm_operator.api.summary import BenchSummary, GateVerdict
from vllm_operator.bench import summary as summary_mod
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.request import RequestRecord
from vllm_operator.bench.runner import RunState
from vllm_operator.bench.stats import Stats, level_figures
from vllm_operator.gate import verdict as gate_verdict
from vllm_operator.gate.classes import describe

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
    verdict: GateVerdict

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
        errors = state.errors()
        return {
            "schema": REPORT_SCHEMA,
            "config": self.config.public(),
            "server_version": state.server_version,
            "started_unix": round(state.wall_started, 3),
            "duration_seconds": round(duration, 3),
            "deadline_hit": state.deadline_hit,
            "aborted": state.aborted,
            "latency": [_latency_json(n, r) for n, r in state.latency.items()],
            "concurrency": _concurrency_json(state),
            "quality": _quality_json(state),
            "errors": {
                name: {
                    "count": count,
                    "meaning": describe(name),
                    "examples": _examples(state, name),
                }
                for name, count in sorted(errors.items())
            },
            "summary": self.summary.to_wire(),
            "verdict": self.verdict.to_wire() if self.config.gated else None,
            "exit_code": self.exit_code,
        }


def build_report(config: BenchConfig, state: RunState) -> BenchReport:
    """Figures, summary and verdict from a finished (or cut-short) run."""
    thresholds = config.thresholds or Thresholds()
    must_pass = tuple(thresholds.quality.must_pass)
    quality = state.quality
    raw = BenchSummary(
        model=config.model,
        latency=[summary_mod.latency_figures(n, r) for n, r in state.latency.items()],
        concurrency=[summary_mod.concurrency_figures(c, s) for c, s in state.concurrency.items()],
        quality=summary_mod.quality_figures(quality, must_pass) if quality is not None else None,
        errors=dict(sorted(state.errors().items())),
    )
    verdict = gate_verdict(raw, thresholds, config.baseline)
    reasons = list(verdict.reasons)
    if state.aborted:
        reasons.insert(0, f"run stopped early: {state.aborted}")
    if state.deadline_hit:
        reasons.insert(0, f"deadline of {config.deadline_seconds:g} s reached")
    summary = raw.model_copy(
        update={"verdict": verdict.outcome if config.gated else None, "reasons": reasons}
    )
    return BenchReport(config, state, summary_mod.fit(summary), verdict)


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


def _latency_json(name: str, records: list[RequestRecord]) -> dict[str, Any]:
    done = [r for r in records if r.ok]
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
        "decode_tokens_per_second": _stats_json(
            [t for r in done if (t := r.decode_tps) is not None]
        ),
        "tokens_estimated": any(r.tokens_estimated for r in records),
        "per_request": [_request_json(r) for r in records],
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


def _concurrency_json(state: RunState) -> list[dict[str, Any]]:
    one = state.concurrency.get(1)
    base = level_figures(1, one).aggregate_tps if one else 0.0
    rows = []
    for level, streams in state.concurrency.items():
        f = level_figures(level, streams)
        failed = sum(1 for s in streams for r in s if not r.ok)
        rows.append(
            {
                "concurrency": level,
                "aggregate_tokens_per_second": round(f.aggregate_tps, 3),
                "requests_per_second": round(f.requests_per_second, 4),
                "median_stream_tokens_per_second": (
                    round(f.median_stream_tps, 3) if f.median_stream_tps is not None else None
                ),
                "scaling_efficiency": (
                    round(f.aggregate_tps / (level * base), 4) if base > 0 else None
                ),
                "window_seconds": round(f.window_end - f.window_start, 4),
                "tokens_in_window": round(f.tokens_in_window, 2),
                "completed": f.completed,
                "failed": failed,
            }
        )
    return rows


def _quality_json(state: RunState) -> dict[str, Any] | None:
    quality = state.quality
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


def _examples(state: RunState, name: str) -> list[str]:
    seen: list[str] = []
    for r in state.records():
        if r.error == name and r.detail not in seen:
            seen.append(r.detail)
            if len(seen) == 3:
                break
    return seen
