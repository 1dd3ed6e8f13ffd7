"""What ``vllm-operator calibrate`` reads from A/A reports, and its replays through the judge.

A report (``bench --report-path``, gzip or not, or bench's report event) is read by the bounded
reader ``judge`` and ``report`` use (``bench.report_input``). From its load runs come, per level
and trial, the candidate's and the twin's percentiles (``gate.calibration.PairedTrial``), the
limits they were counted at, and the requests and gaps each level brought. A report without
twin runs is no A/A report: refused, naming the file.

The replay (``replay``) is the judge's own code (``bench.load.recount`` + ``gate.verdict``) at
the proposed thresholds: the fitted floors are a model's; the replays say whether the runs
the model was fitted on pass with them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from vllm_operator.api.fixes import first_error
from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary
from vllm_operator.api.workload import LATENCY_METRICS, PERCENTILES, LatencyMetric
from vllm_operator.bench.load.recount import Recount, ReportError
from vllm_operator.bench.report import REPORT_SCHEMA
from vllm_operator.bench.report_input import GIVE, MAX_REPORT_BYTES, InputError, read_json
from vllm_operator.commands.inputs import read_capped
from vllm_operator.errors import SpecError
from vllm_operator.gate import verdict
from vllm_operator.gate.calibration import FigureKey, PairedTrial

AA_ONLY = "give reports of bench --baseline-url on identical revisions (A/A runs)"


@dataclass
class AAReport:
    """One A/A report as calibrate uses it."""

    path: str
    data: dict[str, Any]
    summary: BenchSummary
    seconds: float
    runs: list[dict[str, Any]]
    _recount: Recount | None = field(default=None, repr=False)

    def recount(self) -> Recount:
        if self._recount is None:
            self._recount = Recount(self.summary, self.data)
        return self._recount


def read_report(path: str) -> AAReport:
    """The A/A report at ``path``; ``SpecError`` naming the file when it is not one."""
    try:
        raw = read_capped(path, MAX_REPORT_BYTES)
    except OSError as exc:
        raise SpecError("REPORT", f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = read_json(raw, path, "REPORT")
    except InputError as exc:
        raise SpecError("REPORT", f"{path}: {exc.message}", exc.fix) from exc
    if isinstance(data, dict) and data.get("event") == "report":
        data = data.get("report")
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        raise SpecError("REPORT", f"{path} is not a full report (schema {REPORT_SCHEMA})", GIVE)
    try:
        summary = BenchSummary.model_validate(data.get("summary"))
    except ValidationError as exc:
        raise first_error(exc, "REPORT", fix=GIVE, hint=f"(in {path})") from exc
    load = data.get("load")
    runs = load.get("runs") if isinstance(load, dict) else None
    seconds = load.get("seconds_per_level") if isinstance(load, dict) else None
    if not isinstance(runs, list) or not _positive(seconds):
        raise SpecError("REPORT", f"{path} has no load sweep (a workload's load levels)", AA_ONLY)
    runs = [r for r in runs if isinstance(r, dict)]
    if not any(r.get("server") == "baseline" for r in runs):
        raise SpecError("REPORT", f"{path} has no twin runs: not an A/A report", AA_ONLY)
    assert isinstance(seconds, int | float)
    return AAReport(path, data, summary, float(seconds), runs)


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _percentile(run: dict[str, Any], metric: LatencyMetric, p: str) -> float | None:
    figures = run.get("percentiles")
    by_p = figures.get(f"{metric}_ms") if isinstance(figures, dict) else None
    value = by_p.get(p) if isinstance(by_p, dict) else None
    if isinstance(value, int | float) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def paired_trials(
    report: AAReport, limits: Mapping[FigureKey, float], name: str
) -> list[PairedTrial]:
    """Every trial of ``report`` that measured a limited figure on both servers."""
    by_trial: dict[tuple[float, int], dict[str, dict[str, Any]]] = {}
    for run in report.runs:
        level, trial = run.get("level"), run.get("trial")
        if _positive(level) and isinstance(trial, int) and not isinstance(trial, bool):
            assert isinstance(level, int | float)
            by_trial.setdefault((float(level), trial), {})[str(run.get("server"))] = run
    out = []
    for (level, _), servers in sorted(by_trial.items()):
        cand, twin = servers.get("candidate"), servers.get("baseline")
        if cand is None or twin is None:
            continue
        for key in limits:
            if key.level != level:
                continue
            c, b = (
                _percentile(cand, key.metric, key.percentile),
                _percentile(twin, key.metric, key.percentile),
            )
            if c is not None and b is not None:
                out.append(PairedTrial(name, key, c, b))
    return out


def counted_limits(report: AAReport) -> dict[FigureKey, float]:
    """The limits a report's candidate runs were counted at (``counts``: ``"itl.p99"``)."""
    out: dict[FigureKey, float] = {}
    for run in report.runs:
        counts, level = run.get("counts"), run.get("level")
        if run.get("server") != "candidate" or not isinstance(counts, dict):
            continue
        if not _positive(level):
            continue
        for name, count in counts.items():
            metric, _, p = str(name).partition(".")
            limit = count.get("limit") if isinstance(count, dict) else None
            if metric in LATENCY_METRICS and p in PERCENTILES and _positive(limit):
                key = FigureKey(metric, p, float(level))  # type: ignore[arg-type]
                out[key] = float(limit)  # type: ignore[arg-type]
    return out


def requests_per_second(reports: list[AAReport]) -> dict[float, float]:
    """Each level's requests per second in the candidates' runs (their mean)."""
    seen: dict[float, list[float]] = {}
    for report in reports:
        for run in report.runs:
            level, n, s = run.get("level"), run.get("requests"), run.get("seconds")
            ok = run.get("server") == "candidate" and _positive(level) and _positive(s)
            if ok and isinstance(n, int) and n >= 0:
                assert isinstance(level, int | float)
                assert isinstance(s, int | float)
                seen.setdefault(float(level), []).append(n / s)
    return {level: sum(v) / len(v) for level, v in seen.items()}


def gaps_per_request(reports: list[AAReport]) -> float | None:
    """Mean inter-token gaps per completed request of the samples (None: none kept)."""
    total = count = 0
    for report in reports:
        for run in report.runs:
            for s in run.get("samples") or ():
                gaps = s.get("gaps") if isinstance(s, dict) else None
                if isinstance(gaps, int) and gaps >= 0:
                    total, count = total + gaps, count + 1
    return total / count if count else None


def replay(report: AAReport, thresholds: Thresholds) -> tuple[str, list[str]]:
    """(verdict, its deciding reasons) of ``report`` judged again at ``thresholds``."""
    try:
        summary = report.recount().at(thresholds, None)
    except (ReportError, ValidationError, TypeError, ValueError) as exc:
        raise SpecError("REPORT", f"{report.path}: {exc}") from exc
    judged = verdict(summary, thresholds, None)
    return judged.outcome, judged.reasons[: judged.deciding or len(judged.reasons)]


def twin_tails(
    reports: list[AAReport], limits: Mapping[FigureKey, float]
) -> dict[tuple[LatencyMetric, float], list[tuple[float, float]]]:
    """(p95, p99) of each twin run, per limited (metric, level): the tail ``gate.power``
    states power on (``gate.calibration.tail_model``)."""
    wanted = {(k.metric, k.level) for k in limits}
    out: dict[tuple[LatencyMetric, float], list[tuple[float, float]]] = {}
    for report in reports:
        for run in report.runs:
            level = run.get("level")
            if run.get("server") != "baseline" or not _positive(level):
                continue
            assert isinstance(level, int | float)
            for metric, at in wanted:
                if at != level:
                    continue
                p95, p99 = _percentile(run, metric, "p95"), _percentile(run, metric, "p99")
                if p95 is not None and p99 is not None:
                    out.setdefault((metric, at), []).append((p95, p99))
    return out
