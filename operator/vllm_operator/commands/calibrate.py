"""`vllm-operator calibrate`: per-metric floors and a plan fitted from your own A/A runs.

The default floors (``regressionFloorPercent``: TTFT 10, ITL 25, TPOT 10, E2E 25) were fitted
on an H100 and an H200 with one model and workload; another GPU, model or load has its own
noise. Given two or more A/A reports (``bench --baseline-url`` with the candidate and its twin
on the same revision), this command fits each limited figure's noise (``gate.calibration``),
searches the plan (trials, ``secondsPerLevel``) with the smallest floors that lets an A/A gate
pass 95% of the time within ``timeoutSeconds`` (``gate.calibration_plan``), states what the
plan detects, replays every report through the judge at the proposed floors (raising a floor
by 5 points while a report stays undecided on it) and prints a merge patch for ``spec.gate``.

This module only parses arguments, reads files and prints; the fit and the search are pure.
Exit codes: 0 every report Passed at the proposal, 1 one did not (the proposal is printed with
why), 2 usage error (unreadable file, not an A/A report, a figure too few runs reached).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, NoReturn

import yaml
from pydantic import ValidationError

from vllm_operator.api.fixes import first_error
from vllm_operator.api.gate_spec import GateSpec, Thresholds
from vllm_operator.api.resource import parse_vllm_deployment
from vllm_operator.api.text import printable
from vllm_operator.api.workload import LatencyMetric
from vllm_operator.api.yaml_input import MAX_INPUT_BYTES, YAMLInputError, load_documents
from vllm_operator.commands import calibrate_reports as reports_mod
from vllm_operator.commands.calibrate_text import human
from vllm_operator.commands.inputs import read_capped
from vllm_operator.commands.parsing import Parser
from vllm_operator.errors import SpecError, SpecErrors
from vllm_operator.gate.calibration import (
    CalibrationError,
    FigureKey,
    fit_noise,
    limits_of,
    tail_model,
)
from vllm_operator.gate.calibration_plan import Proposal, Shape, patch_of, patched, propose
from vllm_operator.gate.power import plan_power
from vllm_operator.gate.power_noise import DEFAULT_NOISE
from vllm_operator.render.job import bench_deadline

DEFAULT_TIMEOUT = 480
MAX_REPORTS = 50
RAISE_STEP = 5
"""Points a floor is raised by while a replayed A/A report stays undecided on its metric."""

NO_CR_REGRESSION = 10.0
"""maxRegressionPercent of the replays without --cr (the reports do not record it)."""

EPILOG = """\
exit codes: 0 every report Passed at the proposal, 1 one did not, 2 usage error.

Each REPORT is a full report of an A/A gate (bench --report-path with --baseline-url on
identical revisions; plain or gzipped, or a Job's log). Give two or more: the spread between
identical servers is fitted across runs. With --cr the limits, plan bounds (maxTrials,
confidencePercent, a quality suite) and timeoutSeconds come from your VLLMDeployment;
without it the limits are those the reports were counted at, the replays compare with
the twin at maxRegressionPercent 10, and no power is stated (it needs the CR's workload).

examples:
  vllm-operator calibrate aa1.json.gz aa2.json.gz --cr my-model.yaml
  vllm-operator calibrate aa*.json.gz --cr my-model.yaml --output patch > patch.yaml
  kubectl patch vllmdeployment my-model --type merge --patch-file patch.yaml
"""


class _Parser(Parser):
    def error(self, message: str) -> NoReturn:
        raise SpecError("arguments", self.explained(message), f"see `{self.prog} --help`")


def parser(prog: str) -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
        description=(
            "Fit the noise of identical servers from two or more A/A reports and propose "
            "the per-metric floors (regressionFloorPercent) and plan (trials, "
            "secondsPerLevel) that let an A/A gate pass within timeoutSeconds, the "
            "regressions that plan detects, and a spec patch to apply."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("reports", nargs="+", metavar="REPORT", help="A/A reports (two or more)")
    p.add_argument(
        "--cr", metavar="FILE", help="the VLLMDeployment (YAML) whose gate is calibrated"
    )
    p.add_argument(
        "--timeout-seconds",
        type=int,
        metavar="N",
        help=f"the gate's timeoutSeconds to fit in (default: the CR's, else {DEFAULT_TIMEOUT})",
    )
    p.add_argument(
        "--output",
        choices=("human", "patch"),
        default="human",
        help="human: the fit, plan, power, replays and patch; patch: only the patch (YAML)",
    )
    return p


def main(argv: list[str], prog: str) -> int:
    try:
        args = parser(prog).parse_args(argv)
        outcome = calibrate(args)
    except (SpecError, CalibrationError) as exc:
        sys.stderr.write(printable(f"{prog}: {exc}") + "\n")
        return 2
    sys.stdout.write(outcome.patch if args.output == "patch" else outcome.human)
    return 0 if outcome.passed else 1


class Outcome:
    """What calibrate prints."""

    def __init__(self, human: str, patch: str, passed: bool) -> None:
        self.human, self.patch, self.passed = human, patch, passed


def calibrate(args: argparse.Namespace) -> Outcome:
    if len(args.reports) < 2 or len(args.reports) > MAX_REPORTS:
        raise SpecError(
            "REPORT",
            f"{len(args.reports)} report(s) given",
            f"give 2 to {MAX_REPORTS} A/A reports: the spread between identical servers is "
            "fitted across runs",
        )
    gate = _gate_of(args.cr) if args.cr else None
    timeout = args.timeout_seconds or (gate.timeout_seconds if gate else DEFAULT_TIMEOUT)
    if not 60 <= timeout <= 86_400:
        raise SpecError("--timeout-seconds", f"{timeout} is outside 60..86400")
    reports = [reports_mod.read_report(path) for path in args.reports]
    seconds = {r.seconds for r in reports}
    if len(seconds) > 1:
        raise SpecError(
            "REPORT",
            f"the reports' levels lasted {sorted(seconds)} s",
            "give A/A reports of one secondsPerLevel (the within-run noise depends on it)",
        )
    limits, thresholds = _limits(reports, gate)
    if not limits:
        raise SpecError("REPORT", "no latency limit to calibrate", "set gate.thresholds.slo")
    trials = [
        t
        for i, r in enumerate(reports)
        for t in reports_mod.paired_trials(r, limits, f"{i}:{r.path}")
    ]
    measured = seconds.pop()
    noise = fit_noise(trials, limits, measured)
    levels = tuple(sorted({k.level for k in limits}))
    shape = Shape(
        levels=levels,
        requests_per_second=reports_mod.requests_per_second(reports),
        gaps_per_request=reports_mod.gaps_per_request(reports),
        max_trials=gate.max_trials if gate else 10,
        confidence=thresholds.confidence_percent / 100,
        deadline_seconds=bench_deadline(timeout),
        quality_suite=gate.suite.runs_tests if gate else False,
        shortest_seconds=measured,
    )
    fitted = propose(noise, shape)
    proposal, replays = _confirmed(fitted, reports, thresholds)
    wire = patch_of(proposal, timeout if args.timeout_seconds else None)
    patch = yaml.safe_dump(wire, sort_keys=False)
    power: list[str] | None = None
    if gate is not None:
        noise_model = tail_model(reports_mod.twin_tails(reports, limits), DEFAULT_NOISE)
        stated = plan_power(
            patched(gate, proposal, timeout), bench_deadline(timeout), servers=2, noise=noise_model
        )
        power = [p.message for p in stated]
    unit = "req/s" if gate is None or gate.workload.load.mode == "rate" else "streams"
    passed = all(outcome == "Passed" for _, outcome, _ in replays)
    text = human(fitted, proposal, replays, patch, (timeout, shape.max_trials), unit, power)
    return Outcome(text, patch, passed)


def _gate_of(path: str) -> GateSpec:
    try:
        raw = read_capped(path, MAX_INPUT_BYTES)
    except OSError as exc:
        raise SpecError("--cr", f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        docs = [d for d in load_documents(raw) if d is not None]
    except (YAMLInputError, yaml.YAMLError) as exc:
        raise SpecError("--cr", f"{path}: {exc}") from exc
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise SpecError("--cr", f"{path} holds {len(docs)} documents", "give one VLLMDeployment")
    try:
        return parse_vllm_deployment(docs[0]).spec.gate
    except SpecErrors as exc:
        raise SpecError("--cr", f"{path}: {exc}") from exc


def _limits(
    reports: list[reports_mod.AAReport], gate: GateSpec | None
) -> tuple[dict[FigureKey, float], Thresholds]:
    """The figures to fit with their limits, and the thresholds the replays judge at."""
    if gate is not None:
        slo = gate.thresholds.slo
        if slo is None or gate.workload.is_study:
            raise SpecError("--cr", "its gate has no gate.thresholds.slo to calibrate")
        return limits_of(slo, gate.workload.load.levels), gate.thresholds
    counted = [reports_mod.counted_limits(r) for r in reports]
    if any(c != counted[0] for c in counted[1:]):
        raise SpecError(
            "REPORT", "the reports were counted at different limits", "give --cr with yours"
        )
    limits = counted[0]
    levels: dict[float, dict[str, dict[str, float]]] = {}
    for key, limit in limits.items():
        levels.setdefault(key.level, {}).setdefault(f"{key.metric}Ms", {})[key.percentile] = limit
    each = list(levels.values())
    wire: dict[str, Any] = (
        dict(each[0])  # one set of limits at every level: the common ones
        if each and all(by == each[0] for by in each)
        else {"levels": [{"at": level, **by} for level, by in sorted(levels.items())]}
    )
    try:
        thresholds = Thresholds.model_validate(
            {"maxRegressionPercent": NO_CR_REGRESSION, "slo": wire}
        )
    except ValidationError as exc:
        raise first_error(exc, "REPORT", fix="give --cr") from exc
    return limits, thresholds


def _confirmed(
    proposal: Proposal, reports: list[reports_mod.AAReport], base: Thresholds
) -> tuple[Proposal, list[tuple[str, str, list[str]]]]:
    """The proposal after replaying every report at it: a floor a report stays undecided
    on is raised by ``RAISE_STEP`` (at most to 100) until each Passes or none can."""
    floors = dict(proposal.floors)
    while True:
        thresholds = with_floors(base, floors)
        replays = [(r.path, *reports_mod.replay(r, thresholds)) for r in reports]
        raise_ = {
            m
            for _, outcome, reasons in replays
            if outcome != "Passed"
            for m in floors
            if any(f"{m}Ms.regressionFloorPercent" in why for why in reasons) and floors[m] < 100
        }
        if not raise_:
            return proposal.with_floors(floors), replays
        for m in raise_:
            floors[m] = min(floors[m] + RAISE_STEP, 100)


def with_floors(base: Thresholds, floors: Mapping[LatencyMetric, int]) -> Thresholds:
    """``base`` with each metric's own ``regressionFloorPercent`` set, at every level."""
    wire: dict[str, Any] = base.model_dump(by_alias=True, exclude_none=True)
    slo = wire.setdefault("slo", {})
    for where in (slo, *slo.get("levels", [])):
        for metric, floor in floors.items():
            if f"{metric}Ms" in where or where is slo:
                where.setdefault(f"{metric}Ms", {})["regressionFloorPercent"] = floor
    return Thresholds.model_validate(wire)
