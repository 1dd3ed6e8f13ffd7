"""The options of `vllm-operator bench`: one table, its parser, help texts and epilog.

Each option is one row of ``OPTIONS`` (its flags, how its text is read, its default and
help, its section of ``--help`` and the options it excludes), as ``config.OPTIONS`` is for
``vllm-operator run``; ``parser`` builds argparse from the rows in their order, and a test
keeps docs/bench.md's option table naming every row. Kept apart from ``commands/bench.py``
(what the command does with the values: validation into a ``BenchConfig``, the run, the
summary). ``UsageError`` replaces argparse's exit so that even a bad command line ends in a
summary the operator can read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from vllm_operator.api.summary import MAX_TRIALS
from vllm_operator.bench.config import (
    MAX_SETTLE_PASSES,
)
from vllm_operator.bench.quality.run import DEFAULT_CONCURRENCY as DEFAULT_QUALITY_CONCURRENCY
from vllm_operator.bench.quality.run import MAX_CONCURRENCY as MAX_QUALITY_CONCURRENCY
from vllm_operator.commands import bench_checks
from vllm_operator.commands.parsing import Parser
from vllm_operator.errors import VLLMOperatorError

EPILOG = """\
exit codes: 0 passed (or no gate), 1 failed or inconclusive, 2 usage error, 3 could not measure
(also: interrupted, terminated, internal error). The summary is written in every case.

examples:
  vllm-operator bench --url http://my-model:8000 --model Qwen/Qwen3-30B-A3B
  vllm-operator bench --url http://cand:8000 --model m --summary-path /dev/termination-log \\
      --thresholds-json '{"quality": {"minPassed": 12}, "maxRegressionPercent": 10}' \\
      --baseline-json @stable-summary.json
  vllm-operator bench --url http://cand:8000 --baseline-url http://stable:8000 --model m \\
      --trials 3 --max-trials 10 --thresholds-json '{"maxRegressionPercent": 10}'
  vllm-operator bench --url http://cand:8000 --model m --workload gate-workload.yaml \\
      --dataset prompts.jsonl      # your own requests (docs/workloads.md)
JSON options take the JSON itself or @FILE. python-tests checks run code from the server's
answers only with --allow-code-execution (local sandbox) or --sandbox-dir (the Job's
sandbox container); otherwise they are refused. See docs/bench.md for every rule.
"""


class UsageError(VLLMOperatorError):
    """argparse rejected the command line (raised instead of exiting, to write a summary)."""


class _Parser(Parser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(self.explained(message))


class _WorkloadHelp(argparse.Action):
    """--help-workload: every field of the workload file, then exit (like --help)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(bench_checks.workload_help())
        parser.exit()


HELP = "`vllm-operator bench --help`"
"""Where every option is documented: the fallback fix of a validation error."""

DESCRIPTION = (
    "Measure an OpenAI-compatible server, then judge the result with the same gate "
    "the operator uses: by default the published study's shapes (latency of "
    "short/medium/long prompts, aggregate tokens/s at several concurrency levels); "
    "with --workload/--workload-json a synthetic or dataset workload swept over load "
    "levels (streams or Poisson request rates) against SLO limits; and a quality "
    "suite."
)


@dataclass(frozen=True)
class Option:
    """One option of ``vllm-operator bench``: its flags and what argparse does with it."""

    flags: tuple[str, ...]
    help: str
    convert: Callable[[str], Any] | None = None  # argparse's ``type``
    default: Any = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    required: bool = False
    action: str | type[argparse.Action] | None = None
    group: str = ""  # a section of --help (GROUPS); none: the main options
    exclusive: str = ""  # options sharing it exclude each other

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``add_argument`` this row sets (the others left out)."""
        given = {
            "help": self.help,
            "type": self.convert,
            "default": self.default,
            "metavar": self.metavar,
            "choices": self.choices,
            "action": self.action,
        }
        found = {k: v for k, v in given.items() if v is not None}
        return {**found, "required": True} if self.required else found


SETTLE = "settling warm-up"
PLACEMENT = "placement (recorded; different GPU products: Inconclusive)"
IDENTITY = "run identity"
GROUPS: dict[str, str | None] = {
    SETTLE: "discarded passes over every measured shape on every server until two passes agree",
    PLACEMENT: None,
    IDENTITY: "the benchmark Job, revision and gate attempt this run is; written into the "
    "summary, where the operator checks it against the Job it reads (give all three or none)",
}


def _placement(role: str) -> tuple[Option, Option]:
    return (
        Option((f"--{role}-node",), f"node the {role} runs on", metavar="NAME", group=PLACEMENT),
        Option(
            (f"--{role}-gpu-product",),
            f"GPU product of the {role}'s node (label nvidia.com/gpu.product)",
            metavar="P",
            group=PLACEMENT,
        ),
    )


OPTIONS: tuple[Option, ...] = (
    Option(("--url",), "server root, e.g. http://host:8000", required=True),
    Option(("--model",), "model name to request (as served)", required=True),
    Option(("--api-key-file",), "read the API key from file F", metavar="F", exclusive="key"),
    Option(("--api-key-env",), "read the API key from env VAR", metavar="VAR", exclusive="key"),
    Option(
        ("--suite",),
        "builtin:default (13 tests), builtin:none, or a suite file (default: %(default)s)",
        default="builtin:default",
    ),
    Option(
        ("--quality-concurrency",),
        f"quality tests in flight at once, 1..{MAX_QUALITY_CONCURRENCY}; a real model's "
        "greedy answer can change with its batch, so 1 (one at a time) is the strictest "
        "repeatability, e.g. with thresholds.quality.minIdenticalPercent (default: "
        "%(default)s)",
        convert=int,
        default=DEFAULT_QUALITY_CONCURRENCY,
        metavar="N",
    ),
    Option(
        ("--iterations",),
        "measured requests per prompt class (default: %(default)s)",
        convert=int,
        default=5,
    ),
    Option(
        ("--warmup",),
        "discarded warm-up requests per class (default: %(default)s)",
        convert=int,
        default=1,
    ),
    Option(
        ("--prompt-classes",),
        "classes to measure: names, or NAME=PROMPT/OUTPUT tokens (default: %(default)s)",
        default="short,medium,long",
    ),
    Option(
        ("--concurrency",),
        "comma-separated stream counts; 'none' to skip (default: %(default)s)",
        default="1,2,4,8",
    ),
    Option(
        ("--requests-per-stream",),
        "closed-loop requests per stream (default: %(default)s)",
        convert=int,
        default=3,
    ),
    Option(("--thresholds-json",), "gate limits (Thresholds, camelCase)", metavar="JSON"),
    Option(
        ("--workload-json",),
        "the requests measured (gate.workload: WorkloadSpec, camelCase): synthetic token "
        "distributions or a dataset; default: the study's classes",
        metavar="JSON",
        exclusive="workload",
    ),
    Option(
        ("--workload",),
        "the same as --workload-json from a YAML or JSON file (the gate.workload block as "
        "the README shows it, with or without its 'workload:' key; --help-workload lists "
        "every field), or 'study' (the default)",
        metavar="study|FILE",
        exclusive="workload",
    ),
    Option(
        ("--help-workload",),
        "print every field of the workload file (gate.workload) and exit",
        action=_WorkloadHelp,
    ),
    Option(
        ("--dataset",),
        "the dataset file of a dataset workload (chat-jsonl or sharegpt, as the workload "
        "says); checked whole before any request is sent, a malformed line is a usage "
        "error naming it",
        metavar="PATH",
    ),
    Option(("--baseline-json",), "the stable revision's stored BenchSummary", metavar="JSON"),
    Option(
        ("--baseline-url",),
        "a baseline server measured in the same run, interleaved with --url (same time "
        "window, paired trials); the gate then compares against it, not --baseline-json",
        metavar="URL",
    ),
    Option(
        ("--trials",),
        f"rounds of every compared figure before the gate's first look, 1..{MAX_TRIALS}; "
        "the gate's interval needs 2 or more (default: %(default)s)",
        convert=int,
        default=3,
    ),
    Option(
        ("--max-trials",),
        f"most rounds of a figure still undecided after --trials (sequential trials, up "
        f"to {MAX_TRIALS} and the deadline's budget); each look's interval is widened for "
        "the number of looks (default: --trials, a fixed number)",
        convert=int,
    ),
    Option(
        ("--settle-max-passes",),
        f"most warm-up passes, 0..{MAX_SETTLE_PASSES}; 0 sends --warmup requests per shape "
        "once instead (default: %(default)s)",
        convert=int,
        default=4,
        group=SETTLE,
    ),
    Option(
        ("--settle-tolerance-percent",),
        "two passes agree when every figure is within this (latency also within the "
        "gate's ms floor); H200: settled passes differed by up to 11%%, a pass with a JIT "
        "compile by 68-194%% (default: %(default)s)",
        convert=float,
        default=15.0,
        group=SETTLE,
    ),
    Option(
        ("--settle-max-seconds",),
        "no warm-up pass starts after this long (default: %(default)s)",
        convert=float,
        default=300.0,
        group=SETTLE,
    ),
    *_placement("candidate"),
    *_placement("baseline"),
    Option(("--report-path",), "write the full JSON report here", metavar="PATH"),
    Option(
        ("--html",),
        "also write the report as one self-contained HTML page (`vllm-operator report`; "
        "needs plotly: pip install 'vllm-operator[report]')",
        metavar="PATH",
    ),
    Option(("--summary-path",), "write the compact summary here", metavar="PATH"),
    Option(
        ("--deadline-seconds",),
        "whole-run deadline (default: %(default)s)",
        convert=float,
        default=1500.0,
    ),
    Option(
        ("--request-timeout",),
        "per-request limit (s) (default: %(default)s)",
        convert=float,
        default=600.0,
    ),
    Option(
        ("--stall-seconds",),
        "max silence mid-stream (s) (default: %(default)s)",
        convert=float,
        default=60.0,
    ),
    Option(
        ("--connect-timeout",),
        "connect limit (s) (default: %(default)s)",
        convert=float,
        default=10.0,
    ),
    Option(
        ("--client",),
        "HTTP client (default: %(default)s)",
        choices=("aiohttp", "httpx"),
        default="aiohttp",
    ),
    Option(
        ("--output",),
        "human: the tables, ending in the gate's verdict (and a live line on stderr while "
        "it is a terminal), piped or not; jsonl: one JSON event per line on stdout, the last "
        "the full report, the tables on stderr (what the benchmark Job's log holds); auto: "
        "human (default: %(default)s)",
        choices=("auto", "human", "jsonl"),
        default="human",
    ),
    Option(("--label",), "row label in the tables (default: the model name)"),
    Option(("--job-name",), "name of the benchmark Job", metavar="NAME", group=IDENTITY),
    Option(("--revision",), "revision under test", metavar="REV", group=IDENTITY),
    Option(("--attempt",), "gate attempt, from 1", convert=int, metavar="N", group=IDENTITY),
    Option(
        ("--allow-code-execution",),
        "run python-tests code from the server's answers in a local sandbox process "
        "(your uid and network, behind Landlock and seccomp: Linux only, elsewhere the "
        "checks are not run; weaker than the Job's sandbox container); without it "
        "or --sandbox-dir, python-tests checks are refused (not run)",
        action="store_true",
        exclusive="code",
    ),
    Option(
        ("--sandbox-dir",),
        "exchange directory of a sandbox container (`vllm-operator sandbox serve`)",
        metavar="DIR",
        exclusive="code",
    ),
)


def parser(prog: str) -> argparse.ArgumentParser:
    """``vllm-operator bench``'s parser: the rows of ``OPTIONS`` in order."""
    p = _Parser(
        prog=prog,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sections: dict[str, Any] = {"": p}
    for title, text in GROUPS.items():  # in the order --help shows them
        sections[title] = p.add_argument_group(title, text)
    exclusive: dict[str, Any] = {}
    for option in OPTIONS:
        where = sections[option.group]
        if option.exclusive:
            if option.exclusive not in exclusive:
                exclusive[option.exclusive] = where.add_mutually_exclusive_group()
            where = exclusive[option.exclusive]
        where.add_argument(*option.flags, **option.arguments())
    return p
