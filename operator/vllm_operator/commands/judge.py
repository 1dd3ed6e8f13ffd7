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

``--summary`` and ``--report`` both read with the bounded reader ``report`` uses
(``bench.report_input``: the same caps, objects counted before any parse), and both take
what bench writes: a summary, a full report (gzip or not), or bench's report event (its
last output line with ``--output jsonl``, a Job's log). A ``mustPass`` name the judged
suite lacks (known for the built-in suite and from a report's test list) is an Error, never
a limit silently not enforced.

Exit codes follow ``bench``: 0 Passed, 1 Failed or Inconclusive, 2 usage error (a file that
cannot be read or is not a summary, limits that do not validate), 3 Error (also for a
summary whose figures contradict each other or are not finite, ``api.summary_checks``: the
reason names the contradiction).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import NamedTuple, NoReturn

from pydantic import ValidationError

from vllm_operator.api.fixes import first_error
from vllm_operator.api.gate_spec import (
    BUILTIN_SUITE,
    BUILTIN_TEST_IDS,
    Thresholds,
    unknown_must_pass,
)
from vllm_operator.api.summary import MAX_TRIALS, BenchSummary, TrialPlan, Verdict
from vllm_operator.api.summary_checks import contradiction_in
from vllm_operator.api.text import printable
from vllm_operator.bench.load.recount import ReportError, recounted
from vllm_operator.bench.report import REPORT_SCHEMA
from vllm_operator.bench.report_input import GIVE, MAX_REPORT_BYTES, InputError, read_json
from vllm_operator.commands.bench import model_arg
from vllm_operator.commands.inputs import read_capped
from vllm_operator.commands.parsing import Parser
from vllm_operator.errors import SpecError
from vllm_operator.gate import verdict

EXIT = {"Passed": 0, "Failed": 1, "Inconclusive": 1, "Error": 3}

EPILOG = """\
exit codes: 0 Passed, 1 Failed or Inconclusive, 2 usage error, 3 Error.

--summary FILE is a summary (bench --summary-path, a Job's termination message), a full
report, or bench's last output line with --output jsonl or a Job's log (the report's summary
is judged as it is); not bench's printed tables: write the file with --summary-path.
--report FILE is a full report (bench --report-path, plain or gzipped, or a Job's log):
its SLO tail limits are counted again from its samples at the limits given, what a summary
cannot do when its counts were taken at other limits (its reasons say "re-judge with
--report"). '-' reads standard input. JSON options take the JSON
itself or @FILE.

examples:
  vllm-operator judge --summary summary.json --thresholds-json '{"maxRegressionPercent": 10}'
  vllm-operator judge --summary cand.json --baseline stable.json \\
      --thresholds-json @thresholds.json --trials 3 --max-trials 10 --output json
  vllm-operator judge --report report.json.gz \\
      --thresholds-json '{"slo": {"ttftMs": {"p99": 800}}, "maxRegressionPercent": 10}'
"""


class _Parser(Parser):
    def error(self, message: str) -> NoReturn:
        raise SpecError("arguments", self.explained(message), f"see `{self.prog} --help`")


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
        baseline = read_summary(args.baseline, "--baseline").summary if args.baseline else None
        thresholds = thresholds_arg(args.thresholds_json)
        plan = plan_from(args.trials, args.max_trials)
        if args.report is not None:
            judged = read_report(args.report, thresholds, plan)
        else:
            judged = read_summary(args.summary, "--summary")
    except ContradictorySummary as exc:  # figures, but not one reading of them: Error
        outcome = Verdict(outcome="Error", reasons=[str(exc)])
        sys.stdout.write(render(outcome, args.output))
        return EXIT[outcome.outcome]
    except SpecError as exc:
        sys.stderr.write(printable(f"{prog}: {exc}") + "\n")
        return 2
    if (unknown := unknown_tests(judged, thresholds)) is not None:  # never enforced: Error
        outcome = Verdict(outcome="Error", reasons=[f"thresholds quality.{unknown}"])
    else:
        outcome = verdict(
            judged.summary, thresholds, baseline, require_paired=args.require_paired, plan=plan
        )
    sys.stdout.write(render(outcome, args.output))
    return EXIT[outcome.outcome]


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


def read_report(path: str, thresholds: Thresholds, plan: TrialPlan | None) -> Judged:
    """A full report's summary with its SLO tails counted again from its samples."""
    data = _read_json(path, "--report")
    if isinstance(data, dict) and data.get("event") == "report":
        data = data.get("report")  # bench's last output line (--output jsonl), a Job's log
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        raise SpecError("--report", f"{path} is not a full report (schema {REPORT_SCHEMA})", GIVE)
    summary = _summary_of(data.get("summary"), path, "--report")
    try:
        return Judged(recounted(summary, data, thresholds, plan), _test_ids(data))
    except (ReportError, ValidationError, TypeError, ValueError) as exc:
        raise SpecError("--report", f"{path}: {exc}") from exc


def _read_json(path: str, option: str) -> object:
    """The JSON in ``path`` ('-': stdin) by the bounded reader ``report`` uses too."""
    try:
        raw = read_capped(path, MAX_REPORT_BYTES)
    except OSError as exc:
        raise SpecError(option, f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return read_json(raw, path, option)
    except InputError as exc:
        raise SpecError(option, f"{path}: {exc.message}", exc.fix) from exc


def read_summary(path: str, option: str) -> Judged:
    """A summary from ``path`` ('-': stdin): a summary, a full report or bench's report
    event (its last output line with --output jsonl, a Job's log): its summary is judged."""
    data = _read_json(path, option)
    ids: tuple[str, ...] | None = None
    if isinstance(data, dict) and data.get("event") == "report":
        data = data.get("report")
    if isinstance(data, dict) and data.get("schema") == REPORT_SCHEMA:
        ids = _test_ids(data)
        data = data.get("summary")
    return Judged(_summary_of(data, path, option), ids)


MAX_SUITE_IDS = 10_000
"""Most test ids taken from a report to check mustPass names against (the built-in suite has
13); a longer list is not checked, so "did you mean" stays fast on a forged report."""


def _test_ids(report: dict[str, object]) -> tuple[str, ...] | None:
    """The quality test ids a full report ran (None: no quality section, or too many)."""
    quality = report.get("quality")
    tests = quality.get("tests") if isinstance(quality, dict) else None
    if not isinstance(tests, list) or len(tests) > MAX_SUITE_IDS:
        return None
    return tuple(str(t.get("id")) for t in tests if isinstance(t, dict))


def unknown_tests(judged: Judged, thresholds: Thresholds) -> str | None:
    """Why ``mustPass`` names a test the judged run's suite does not have, or None.

    The suite's ids are known from a full report, or for the built-in suite (its name and
    size); a summary of a custom suite does not list them, so its names cannot be checked
    here (``bench`` refuses them before it runs)."""
    must_pass = thresholds.quality.must_pass
    quality = judged.summary.quality
    if not must_pass or quality is None:
        return None
    ids = judged.test_ids
    if ids is None and quality.suite == BUILTIN_SUITE and quality.total == len(BUILTIN_TEST_IDS):
        ids = BUILTIN_TEST_IDS
    if ids is None:
        return None
    return unknown_must_pass(must_pass, ids, quality.suite)


def _summary_of(data: object, path: str, option: str) -> BenchSummary:
    try:
        return BenchSummary.model_validate(data)
    except ValidationError as exc:
        if (contradiction := contradiction_in(exc)) is not None:
            raise ContradictorySummary(option, f"{path}: {contradiction}") from exc
        hint = f"(is {path} a bench summary?)"
        raise first_error(exc, option, fix=GIVE, hint=hint) from exc


class Judged(NamedTuple):
    """What judge read: the summary, and the suite's test ids when the input lists them."""

    summary: BenchSummary
    test_ids: tuple[str, ...] | None = None


class ContradictorySummary(SpecError):
    """A summary whose figures contradict each other (``api.summary_checks``) or are not
    finite: judged Error, naming the contradiction, never Passed and never a usage error."""


def render(judged: Verdict, output: str) -> str:
    """The verdict for people (its headline, the reasons that decided it, then the others,
    one a line, control characters escaped: a reason may quote a test id or a server's
    answer) or as JSON."""
    if output == "json":
        return json.dumps(judged.to_wire(), indent=2) + "\n"
    deciding = judged.deciding or 0
    lines = [f"verdict: {judged.outcome}"]
    if judged.headline:
        lines.append(f"  {_line(judged.headline)}")
    if not deciding:
        return "\n".join([*lines, *(f"  - {_line(r)}" for r in judged.reasons)]) + "\n"
    lines += ["decided by:", *(f"  - {_line(r)}" for r in judged.reasons[:deciding])]
    rest = judged.reasons[deciding:]
    if rest:
        lines += ["other figures and notes:", *(f"  - {_line(r)}" for r in rest)]
    return "\n".join(lines) + "\n"


def _line(text: str) -> str:
    return printable(text, newlines=False)
