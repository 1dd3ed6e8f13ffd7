"""`vllm-operator judge`: the gate's verdict on a stored benchmark summary, offline.

Pipelines keep the summaries the benchmark Job writes (its termination message, or
``bench --summary-path``); replaying one through the gate's own code answers "what would the
operator decide with these limits?" without a cluster, and lets anyone re-judge real runs
(the H200 summaries under ``docs/calibration/`` replay through it in the tests). Nothing here
decides anything itself: it reads the files, calls ``gate.verdict`` and prints its reasons.

``--report`` takes a full report instead (``bench --report-path``, gzip or not): its
summary's SLO tail counts are taken again from its samples at the limits given
(``bench.load.recount``), so a run can be re-judged with limits other than the ones it was
measured with; a summary's counts only answer for the limits it was counted at.

Exit codes follow ``bench``: 0 Passed, 1 Failed or Inconclusive, 2 usage error (a file that
cannot be read or is not a summary, limits that do not validate), 3 Error (also for a
summary whose figures contradict each other or are not finite, ``api.summary_checks``: the
reason names the contradiction).
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from typing import NoReturn

from pydantic import ValidationError

from vllm_operator.api.fixes import first_error
from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import MAX_TRIALS, BenchSummary, TrialPlan, Verdict
from vllm_operator.api.summary_checks import contradiction_in
from vllm_operator.bench.http import bounded
from vllm_operator.bench.load.recount import ReportError, recounted
from vllm_operator.bench.report import REPORT_SCHEMA
from vllm_operator.commands.bench import model_arg
from vllm_operator.commands.inputs import read_capped
from vllm_operator.errors import SpecError
from vllm_operator.gate import verdict

MAX_SUMMARY_BYTES = 16 << 20
"""A summary is under 4 KiB and a full report a few MiB; anything larger is refused."""

MAX_REPORT_BYTES = 256 << 20
"""A full report with every run's samples (decompressed); anything larger is refused."""

EXIT = {"Passed": 0, "Failed": 1, "Inconclusive": 1, "Error": 3}

EPILOG = """\
exit codes: 0 Passed, 1 Failed or Inconclusive, 2 usage error, 3 Error.

--summary FILE is a summary (bench --summary-path, a Job's termination message) or a full
report (its summary is judged as it is). --report FILE is a full report (bench
--report-path, plain or gzipped): its SLO tail limits are counted again from its samples at
the limits given, what a summary cannot do when its counts were taken at other limits (its
reasons say "re-judge with --report"). '-' reads standard input. JSON options take the JSON
itself or @FILE.

examples:
  vllm-operator judge --summary summary.json --thresholds-json '{"maxRegressionPercent": 10}'
  vllm-operator judge --summary cand.json --baseline stable.json \\
      --thresholds-json @thresholds.json --trials 3 --max-trials 10 --output json
  vllm-operator judge --report report.json.gz \\
      --thresholds-json '{"slo": {"ttftMs": {"p99": 800}}, "maxRegressionPercent": 10}'
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise SpecError("arguments", message)


def parser(prog: str) -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
        description=(
            "Judge a stored benchmark summary with the operator's own gate (the same code "
            "and rules as the benchmark Job and the operator), against limits and an "
            "optional stored baseline."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--summary", metavar="FILE", help="the candidate's summary")
    source.add_argument(
        "--report",
        metavar="FILE",
        help="a full report (plain or .gz): its SLO tails counted again from its samples",
    )
    p.add_argument(
        "--baseline",
        metavar="FILE",
        help=(
            "the stable revision's stored summary (ignored when the candidate's summary "
            "carries a paired baseline measured in the same run)"
        ),
    )
    p.add_argument(
        "--thresholds-json",
        required=True,
        metavar="JSON",
        help="the gate's limits (spec.gate.thresholds, camelCase), e.g. "
        "'{\"maxRegressionPercent\": 10}'",
    )
    p.add_argument(
        "--trials",
        type=int,
        help="the sequential plan's first look (spec.gate.trials); with --max-trials it "
        "replaces the plan the summary records",
    )
    p.add_argument(
        "--max-trials",
        type=int,
        help="the sequential plan's most trials (spec.gate.maxTrials); see --trials",
    )
    p.add_argument(
        "--require-paired",
        action="store_true",
        help="Error unless the summary has a paired baseline (what twin mode requires)",
    )
    p.add_argument(
        "--output",
        choices=("human", "json"),
        default="human",
        help="human: the verdict and its reasons; json: the verdict as JSON (default: human)",
    )
    return p


def main(argv: list[str], prog: str) -> int:
    try:
        args = parser(prog).parse_args(argv)
        baseline = read_summary(args.baseline, "--baseline") if args.baseline else None
        thresholds = thresholds_arg(args.thresholds_json)
        plan = plan_from(args.trials, args.max_trials)
        if args.report is not None:
            summary = read_report(args.report, thresholds, plan)
        else:
            summary = read_summary(args.summary, "--summary")
    except ContradictorySummary as exc:  # figures, but not one reading of them: Error
        judged = Verdict(outcome="Error", reasons=[str(exc)])
        sys.stdout.write(render(judged, args.output))
        return EXIT[judged.outcome]
    except SpecError as exc:
        sys.stderr.write(f"{prog}: {exc}\n")
        return 2
    judged = verdict(summary, thresholds, baseline, require_paired=args.require_paired, plan=plan)
    sys.stdout.write(render(judged, args.output))
    return EXIT[judged.outcome]


def thresholds_arg(text: str) -> Thresholds:
    """``--thresholds-json`` validated; ``SpecError`` names the option and the field."""
    thresholds = model_arg(Thresholds, text, "--thresholds-json")
    assert thresholds is not None  # the option is required
    return thresholds


def plan_from(trials: int | None, max_trials: int | None) -> TrialPlan | None:
    """The plan given on the command line, or None to use the one the summary records."""
    if trials is None and max_trials is None:
        return None
    first = trials if trials is not None else max_trials
    most = max_trials if max_trials is not None else trials
    assert first is not None
    assert most is not None
    try:
        return TrialPlan(min_trials=first, max_trials=most)
    except ValidationError as exc:
        hint = f"(each 1..{MAX_TRIALS}, trials <= max)"
        raise first_error(exc, "--trials/--max-trials", dotted=False, fix="", hint=hint) from exc


def read_report(path: str, thresholds: Thresholds, plan: TrialPlan | None) -> BenchSummary:
    """A full report's summary with its SLO tails counted again from its samples."""
    data = _read_json(path, "--report", MAX_REPORT_BYTES)
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        raise SpecError("--report", f"{path} is not a full report (schema {REPORT_SCHEMA})")
    summary = _summary_of(data.get("summary"), path, "--report")
    try:
        return recounted(summary, data, thresholds, plan)
    except (ReportError, ValidationError, TypeError, ValueError) as exc:
        raise SpecError("--report", f"{path}: {exc}") from exc


def _read_json(path: str, option: str, limit: int) -> object:
    try:
        raw = read_capped(path, limit)
    except OSError as exc:
        raise SpecError(option, f"cannot read {path}: {exc.strerror or exc}") from exc
    if raw[:2] == b"\x1f\x8b":
        try:
            inflate = zlib.decompressobj(wbits=31)
            raw = inflate.decompress(raw, limit + 1)
        except zlib.error as exc:
            raise SpecError(option, f"{path}: not valid gzip ({exc})") from exc
    if len(raw) > limit:
        raise SpecError(option, f"{path} is larger than {limit >> 20} MiB")
    try:
        return bounded.loads(raw, max_bytes=limit)
    except ValueError as exc:
        raise SpecError(option, f"{path}: {exc}") from exc


def read_summary(path: str, option: str) -> BenchSummary:
    """A summary from ``path`` ('-': stdin); a full report's summary is taken from it."""
    data = _read_json(path, option, MAX_SUMMARY_BYTES)
    if isinstance(data, dict) and data.get("schema") == REPORT_SCHEMA:
        data = data.get("summary")
    return _summary_of(data, path, option)


def _summary_of(data: object, path: str, option: str) -> BenchSummary:
    try:
        return BenchSummary.model_validate(data)
    except ValidationError as exc:
        if (contradiction := contradiction_in(exc)) is not None:
            raise ContradictorySummary(option, f"{path}: {contradiction}") from exc
        hint = f"(is {path} a bench summary?)"
        raise first_error(exc, option, fix="", hint=hint) from exc


class ContradictorySummary(SpecError):
    """A summary whose figures contradict each other (``api.summary_checks``) or are not
    finite: judged Error, naming the contradiction, never Passed and never a usage error."""


def render(judged: Verdict, output: str) -> str:
    """The verdict for people (its headline, the reasons that decided it, then the others,
    one a line) or as JSON."""
    if output == "json":
        return json.dumps(judged.to_wire(), indent=2) + "\n"
    deciding = judged.deciding or 0
    lines = [f"verdict: {judged.outcome}"]
    if judged.headline:
        lines.append(f"  {judged.headline}")
    if not deciding:
        return "\n".join([*lines, *(f"  - {r}" for r in judged.reasons)]) + "\n"
    lines += ["decided by:", *(f"  - {r}" for r in judged.reasons[:deciding])]
    rest = judged.reasons[deciding:]
    if rest:
        lines += ["other figures and notes:", *(f"  - {r}" for r in rest)]
    return "\n".join(lines) + "\n"
