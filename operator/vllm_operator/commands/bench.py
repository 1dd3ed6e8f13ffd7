"""`vllm-operator bench`: benchmark and quality-gate an OpenAI-compatible vLLM server.

The command the benchmark Job runs. Exit codes are part of the contract with the operator:
0 gate passed (or no gate and no failed request), 1 gate failed or inconclusive, 2 usage
error, 3 could not measure (endpoint down, deadline, aborted run). The compact summary goes
to ``--summary-path`` (the Job uses ``/dev/termination-log``) in every case, usage errors
included, so the operator always learns why.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import signal
import sys
import traceback
from types import FrameType
from typing import Any, TextIO, TypeVar
from urllib.parse import urlsplit

import yaml
from pydantic import ValidationError

from vllm_operator.api.fixes import first_error
from vllm_operator.api.gate_spec import Thresholds, unknown_must_pass
from vllm_operator.api.summary import MAX_TRIALS, BenchSummary, Placement, RunIdentity
from vllm_operator.api.text import printable
from vllm_operator.api.workload import WorkloadSpec
from vllm_operator.api.yaml_input import MAX_INPUT_BYTES, YAMLInputError, load_documents
from vllm_operator.bench import human
from vllm_operator.bench import summary as summary_mod
from vllm_operator.bench.config import (
    MAX_ITERATIONS,
    MAX_LEVELS,
    MAX_REQUESTS_PER_STREAM,
    MAX_SETTLE_PASSES,
    MAX_WARMUP,
    BenchConfig,
)
from vllm_operator.bench.dataset import read_dataset_file
from vllm_operator.bench.http import bounded
from vllm_operator.bench.load.traffic import Traffic
from vllm_operator.bench.progress import JsonLinesProgress, TerminalProgress
from vllm_operator.bench.prompts import parse_classes
from vllm_operator.bench.quality.run import MAX_CONCURRENCY as MAX_QUALITY_CONCURRENCY
from vllm_operator.bench.quality.suite import load_suite
from vllm_operator.bench.report import (
    EXIT_UNMEASURED,
    EXIT_USAGE,
    BenchReport,
    build_report,
    open_figures,
    slo_breached,
)
from vllm_operator.bench.run_state import NoProgress, Progress
from vllm_operator.bench.runner import run
from vllm_operator.bench.workload import build_traffic
from vllm_operator.commands import bench_checks
from vllm_operator.commands.bench_options import HELP, UsageError, parser
from vllm_operator.commands.inputs import read_capped, read_option_file
from vllm_operator.commands.report import page_from_data, plotly_missing, write_page
from vllm_operator.errors import SpecError

ModelT = TypeVar("ModelT", Thresholds, BenchSummary, WorkloadSpec)


def main(argv: list[str], prog: str) -> int:
    p = parser(prog)
    try:
        args = p.parse_args(argv)
    except UsageError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n(`{prog} --help` lists every option)\n")
        _usage_summary(_summary_path_in(argv), _model_in(argv), str(exc))
        return EXIT_USAGE
    try:
        identity = identity_from_args(args)
        config = config_from_args(args)
    except SpecError as exc:
        sys.stderr.write(printable(f"{prog}: error: {exc}") + "\n")
        _usage_summary(args.summary_path, args.model, str(exc), _identity_or_none(args))
        return EXIT_USAGE
    try:
        return _measure(config, identity, args)
    except KeyboardInterrupt:
        return _abnormal_end(args, "interrupted (SIGINT) before the run finished")
    except _Terminated:
        return _abnormal_end(args, "terminated (SIGTERM) before the run finished")
    except Exception as exc:  # an internal error still ends in a summary saying so
        traceback.print_exc(file=sys.stderr)
        return _abnormal_end(args, f"internal error: {type(exc).__name__}: {exc}")


class _Terminated(BaseException):
    """SIGTERM (the Job's deadline, a deleted pod) arrived during the run."""


def _on_sigterm(_sig: int, _frame: FrameType | None) -> None:
    raise _Terminated


def _measure(config: BenchConfig, identity: RunIdentity | None, args: argparse.Namespace) -> int:
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _measure_and_publish(config, identity, args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _abnormal_end(args: argparse.Namespace, reason: str) -> int:
    sys.stderr.write(printable(f"bench: {reason}") + "\n")
    if args.summary_path:
        summary = BenchSummary(
            model=args.model,
            errors={"client_error": 1},
            verdict="Error",
            reasons=[reason],
            identity=_identity_or_none(args),
        )
        with contextlib.suppress(OSError):
            _write(args.summary_path, summary_mod.wire(summary_mod.fit(summary)))
    return EXIT_UNMEASURED


def _option_in(argv: list[str], name: str) -> str | None:
    """The value of ``name`` in a command line argparse refused (to still write a summary)."""
    for i, item in enumerate(argv):
        if item == name and i + 1 < len(argv):
            return argv[i + 1]
        if item.startswith(name + "="):
            return item.split("=", 1)[1]
    return None


def _summary_path_in(argv: list[str]) -> str | None:
    return _option_in(argv, "--summary-path")


def _model_in(argv: list[str]) -> str:
    return _option_in(argv, "--model") or "unknown"


def _measure_and_publish(
    config: BenchConfig, identity: RunIdentity | None, args: argparse.Namespace
) -> int:
    jsonl = args.output == "jsonl"  # asked for: people reading a pipe or a CI log get tables
    progress: Progress = NoProgress()
    terminal: TerminalProgress | None = None
    if jsonl:
        progress = JsonLinesProgress(sys.stdout)
    elif sys.stderr.isatty():
        terminal = TerminalProgress(sys.stderr)
        progress = terminal
    state = asyncio.run(
        run(
            config,
            progress=progress,
            open_figures=lambda so_far: open_figures(config, so_far),
            breached=lambda so_far, level: slo_breached(config, so_far, level),
        )
    )
    if terminal is not None:
        terminal.close()
    report = build_report(config, state)
    if identity is not None:
        stamped = report.summary.model_copy(update={"identity": identity})
        report = dataclasses.replace(report, summary=summary_mod.fit(stamped))
    _publish(report, args, jsonl, sys.stdout, sys.stderr)
    return report.exit_code


def identity_from_args(args: argparse.Namespace) -> RunIdentity | None:
    """The run's identity from --job-name/--revision/--attempt (all three, or none)."""
    given = [args.job_name, args.revision, args.attempt]
    if all(x is None for x in given):
        return None
    if any(x is None for x in given):
        raise SpecError(
            "--job-name/--revision/--attempt",
            "give all three or none",
            "the operator's Job passes all three",
        )
    try:
        return RunIdentity(job=args.job_name, revision=args.revision, attempt=args.attempt)
    except ValidationError as exc:
        option = {"job": "--job-name", "revision": "--revision", "attempt": "--attempt"}
        flag = option.get(str(exc.errors()[0]["loc"][0]), "--job-name")
        raise first_error(exc, flag, dotted=False, docs=HELP) from exc


def _identity_or_none(args: argparse.Namespace) -> RunIdentity | None:
    try:
        return identity_from_args(args)
    except SpecError:
        return None


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """Validate every option into a ``BenchConfig``; ``SpecError`` names the bad option."""
    if args.html is not None and (missing := plotly_missing()) is not None:
        raise SpecError("--html", "plotly is not installed", missing)  # before any load is sent
    suite = load_suite(args.suite)
    thresholds = model_arg(Thresholds, args.thresholds_json, "--thresholds-json")
    baseline = model_arg(BenchSummary, args.baseline_json, "--baseline-json")
    if thresholds is not None:
        ids = tuple(suite.ids)
        problem = unknown_must_pass(thresholds.quality.must_pass, ids, suite.name)
        if problem is not None:
            raise SpecError(
                "--thresholds-json: quality.mustPass",
                problem.removeprefix("mustPass "),
                "name tests of the suite (a name it lacks would never be enforced)",
            )
    workload, traffic = workload_from_args(args)
    _check_url(args.url)
    levels = _levels(args.concurrency)
    for name, value in (
        ("--iterations", args.iterations),
        ("--requests-per-stream", args.requests_per_stream),
        ("--quality-concurrency", args.quality_concurrency),
    ):
        if value < 1:
            raise SpecError(name, "must be >= 1", f"{name} 1 or more")
    if args.warmup < 0:
        raise SpecError("--warmup", "must be >= 0", "--warmup 0 or more")
    if not 1 <= args.trials <= MAX_TRIALS:
        raise SpecError("--trials", f"must be 1..{MAX_TRIALS}", f"--trials 1 to {MAX_TRIALS}")
    max_trials = args.trials if args.max_trials is None else args.max_trials
    if not args.trials <= max_trials <= MAX_TRIALS:
        raise SpecError(
            "--max-trials",
            f"must be --trials ({args.trials})..{MAX_TRIALS}",
            f"--max-trials {max(args.trials, 10)}" if args.trials <= MAX_TRIALS else "",
        )
    for name, value, most in (
        ("--iterations", args.iterations, MAX_ITERATIONS),
        ("--warmup", args.warmup, MAX_WARMUP),
        ("--requests-per-stream", args.requests_per_stream, MAX_REQUESTS_PER_STREAM),
        ("--settle-max-passes", args.settle_max_passes, MAX_SETTLE_PASSES),
        ("--quality-concurrency", args.quality_concurrency, MAX_QUALITY_CONCURRENCY),
    ):
        if value > most:
            raise SpecError(name, f"must be at most {most}", f"{name} {most}")
    if args.settle_max_passes < 0:
        raise SpecError("--settle-max-passes", "must be >= 0", "--settle-max-passes 0 to 20")
    tolerance = args.settle_tolerance_percent
    if not (math.isfinite(tolerance) and 0 < tolerance < 100):
        raise SpecError(
            "--settle-tolerance-percent",
            f"must be in (0, 100), not {tolerance!r}",
            "--settle-tolerance-percent 15",
        )
    if args.baseline_url is not None:
        _check_url(args.baseline_url, "--baseline-url")
    for name, value in (
        ("--deadline-seconds", args.deadline_seconds),
        ("--request-timeout", args.request_timeout),
        ("--stall-seconds", args.stall_seconds),
        ("--connect-timeout", args.connect_timeout),
        ("--settle-max-seconds", args.settle_max_seconds),
    ):
        if not math.isfinite(value) or value <= 0:
            raise SpecError(name, f"must be a finite number > 0, not {value!r}", f"{name} 30")
    bench_checks.refuse_early(
        thresholds=thresholds,
        workload=workload,
        suite=suite,
        gated=thresholds is not None or baseline is not None or args.baseline_url is not None,
        runs_code=args.allow_code_execution or args.sandbox_dir is not None,
    )
    return BenchConfig(
        url=args.url,
        model=args.model,
        api_key=_api_key(args),
        suite=suite,
        suite_ref=args.suite,
        iterations=args.iterations,
        warmup=args.warmup,
        prompt_classes=parse_classes(args.prompt_classes),
        concurrency=levels,
        requests_per_stream=args.requests_per_stream,
        quality_concurrency=args.quality_concurrency,
        thresholds=thresholds,
        baseline=baseline,
        deadline_seconds=args.deadline_seconds,
        request_timeout=args.request_timeout,
        stall_seconds=args.stall_seconds,
        connect_timeout=args.connect_timeout,
        client=args.client,
        baseline_url=args.baseline_url,
        trials=args.trials,
        max_trials=max_trials,
        settle_max_passes=args.settle_max_passes,
        settle_tolerance=tolerance / 100,
        settle_max_seconds=args.settle_max_seconds,
        candidate_placement=_placement(args.candidate_node, args.candidate_gpu_product),
        baseline_placement=_placement(args.baseline_node, args.baseline_gpu_product),
        allow_code_execution=args.allow_code_execution,
        sandbox_dir=args.sandbox_dir,
        workload=workload,
        traffic=traffic,
    )


def workload_from_args(args: argparse.Namespace) -> tuple[WorkloadSpec, Traffic | None]:
    """The workload of --workload-json/--workload and, for a dataset, its checked requests."""
    if args.workload is not None and args.workload != "study":
        workload = _workload_file(args.workload, dataset_given=args.dataset is not None)
    else:
        workload = model_arg(WorkloadSpec, args.workload_json, "--workload-json") or WorkloadSpec()
    dataset = None if args.dataset is None else read_dataset_file(args.dataset)
    return workload, build_traffic(workload, dataset, source=args.dataset or "")


def _workload_file(path: str, *, dataset_given: bool) -> WorkloadSpec:
    """A WorkloadSpec from a YAML or JSON file (bounded: ``api.yaml_input``)."""
    try:
        data = read_capped(path, MAX_INPUT_BYTES)
    except OSError as exc:
        raise SpecError(
            "--workload", f"cannot read {path}: {exc.strerror or exc}", "name a readable file"
        ) from exc
    try:
        documents = load_documents(data)
    except (YAMLInputError, yaml.YAMLError) as exc:
        raise SpecError("--workload", f"{path}: {exc}", "a YAML or JSON WorkloadSpec") from exc
    if len(documents) != 1:
        raise SpecError("--workload", f"{path} holds {len(documents)} documents", "give one")
    return bench_checks.workload_from_document(documents[0], dataset_given=dataset_given)


def _placement(node: str | None, gpu: str | None) -> Placement:
    try:
        return Placement(node=node or None, gpu_product=gpu or None)
    except ValidationError as exc:
        raise first_error(exc, "--*-node/--*-gpu-product", dotted=False, docs=HELP) from exc


def _check_url(url: str, option: str = "--url") -> None:
    """``http(s)://host[:port][/path]``; anything else is a usage error naming ``option``."""
    hint = "http://host:8000"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise SpecError(option, f"{url!r} is not a URL: {exc}", hint) from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(option, f"{url!r} is not an http(s) URL with a host", hint)
    if port == 0 or parts.query or parts.fragment or any(c.isspace() for c in url):
        raise SpecError(option, f"{url!r}: no port 0, query, fragment or spaces", hint)


def _levels(text: str) -> tuple[int, ...]:
    if text.strip().lower() in ("", "none"):
        return ()
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError as exc:
        raise SpecError("--concurrency", f"{text!r} is not a list of integers", "1,2,4,8") from exc
    if any(level < 1 or level > 1024 for level in levels) or len(levels) > MAX_LEVELS:
        raise SpecError("--concurrency", f"1..{MAX_LEVELS} levels, each 1..1024", "1,2,4,8")
    return tuple(levels)


def _api_key(args: argparse.Namespace) -> str | None:
    if args.api_key_file:
        try:
            key = read_option_file(args.api_key_file, "--api-key-file").strip()
        except OSError as exc:
            raise SpecError(
                "--api-key-file", f"cannot read: {exc.strerror or exc}", "name a readable file"
            ) from exc
        if not key:
            raise SpecError("--api-key-file", "the file is empty", "put the API key in it")
        return key
    if args.api_key_env:
        key = os.environ.get(args.api_key_env, "").strip()
        if not key:
            raise SpecError(
                "--api-key-env",
                f"environment variable {args.api_key_env} is unset",
                f"export {args.api_key_env}=<key>, or leave --api-key-env out",
            )
        return key
    return None


def model_arg(model: type[ModelT], text: str | None, option: str) -> ModelT | None:
    if text is None:
        return None
    if text.startswith("@"):
        text = read_option_file(text[1:], option)
    try:
        return model.model_validate(bounded.loads(text, max_bytes=1 << 20))
    except ValueError as exc:
        if isinstance(exc, ValidationError):
            raise first_error(exc, option, docs=HELP) from exc
        raise SpecError(option, str(exc), "give a JSON object, or @FILE") from exc


def _usage_summary(
    path: str | None, model: str, reason: str, identity: RunIdentity | None = None
) -> None:
    if not path:
        return
    summary = BenchSummary(
        model=model,
        errors={"client_error": 1},
        verdict="Error",
        reasons=[f"usage: {reason}"],
        identity=identity,
    )
    _write(path, summary_mod.wire(summary_mod.fit(summary)))


def _publish(
    report: BenchReport, args: argparse.Namespace, jsonl: bool, out: TextIO, err: TextIO
) -> None:
    data: dict[str, Any] = report.to_json()
    tables = human.render(report, args.label)
    if jsonl:
        err.write(tables)
        err.flush()
        out.write(json.dumps({"event": "report", "report": data}, default=str) + "\n")
        out.flush()
    else:
        out.write(tables)
    if args.report_path:
        _write(args.report_path, json.dumps(data, indent=2, default=str) + "\n")
    if args.summary_path:
        _write(args.summary_path, summary_mod.wire(report.summary))
    if args.html:
        try:
            plain = json.loads(json.dumps(data, default=str))  # as --report-path has it
            write_page(args.html, page_from_data(plain, "the bench report"))
        except (OSError, SpecError) as exc:
            err.write(printable(f"bench: --html {args.html}: {exc}") + "\n")
        else:
            err.write(f"bench: report page written to {args.html}\n")


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
