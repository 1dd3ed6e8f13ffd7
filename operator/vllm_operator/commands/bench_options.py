"""The options of `vllm-operator bench`: its argparse parser, help texts and epilog.

Kept apart from ``commands/bench.py`` (what the command does with them: validation into a
``BenchConfig``, the run, the summary) because the option list is long and is read as a
table: each option once, with its default, bound and help. ``UsageError`` replaces
argparse's exit so that even a bad command line ends in a summary the operator can read.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from vllm_operator.api.summary import MAX_TRIALS
from vllm_operator.bench.config import (
    MAX_SETTLE_PASSES,
)
from vllm_operator.bench.quality.run import DEFAULT_CONCURRENCY as DEFAULT_QUALITY_CONCURRENCY
from vllm_operator.bench.quality.run import MAX_CONCURRENCY as MAX_QUALITY_CONCURRENCY
from vllm_operator.commands import bench_checks
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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


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


def parser(prog: str) -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
        description=(
            "Measure an OpenAI-compatible server, then judge the result with the same gate "
            "the operator uses: by default the published study's shapes (latency of "
            "short/medium/long prompts, aggregate tokens/s at several concurrency levels); "
            "with --workload/--workload-json a synthetic or dataset workload swept over load "
            "levels (streams or Poisson request rates) against SLO limits; and a quality "
            "suite."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--url", required=True, help="server root, e.g. http://host:8000")
    p.add_argument("--model", required=True, help="model name to request (as served)")
    key = p.add_mutually_exclusive_group()
    key.add_argument("--api-key-file", metavar="F", help="read the API key from file F")
    key.add_argument("--api-key-env", metavar="VAR", help="read the API key from env VAR")
    p.add_argument(
        "--suite",
        default="builtin:default",
        help="builtin:default (13 tests), builtin:none, or a suite file (default: %(default)s)",
    )
    p.add_argument(
        "--quality-concurrency",
        type=int,
        default=DEFAULT_QUALITY_CONCURRENCY,
        metavar="N",
        help=(
            f"quality tests in flight at once, 1..{MAX_QUALITY_CONCURRENCY}; a real model's "
            "greedy answer can change with its batch, so 1 (one at a time) is the strictest "
            "repeatability, e.g. with thresholds.quality.minIdenticalPercent (default: "
            "%(default)s)"
        ),
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=5,
        help="measured requests per prompt class (default: %(default)s)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="discarded warm-up requests per class (default: %(default)s)",
    )
    p.add_argument(
        "--prompt-classes",
        default="short,medium,long",
        help="classes to measure: names, or NAME=PROMPT/OUTPUT tokens (default: %(default)s)",
    )
    p.add_argument(
        "--concurrency",
        default="1,2,4,8",
        help="comma-separated stream counts; 'none' to skip (default: %(default)s)",
    )
    p.add_argument(
        "--requests-per-stream",
        type=int,
        default=3,
        help="closed-loop requests per stream (default: %(default)s)",
    )
    p.add_argument("--thresholds-json", metavar="JSON", help="gate limits (Thresholds, camelCase)")
    workload = p.add_mutually_exclusive_group()
    workload.add_argument(
        "--workload-json",
        metavar="JSON",
        help=(
            "the requests measured (gate.workload: WorkloadSpec, camelCase): synthetic token "
            "distributions or a dataset; default: the study's classes"
        ),
    )
    workload.add_argument(
        "--workload",
        metavar="study|FILE",
        help=(
            "the same as --workload-json from a YAML or JSON file (the gate.workload block as "
            "the README shows it, with or without its 'workload:' key; --help-workload lists "
            "every field), or 'study' (the default)"
        ),
    )
    p.add_argument(
        "--help-workload",
        action=_WorkloadHelp,
        help="print every field of the workload file (gate.workload) and exit",
    )
    p.add_argument(
        "--dataset",
        metavar="PATH",
        help=(
            "the dataset file of a dataset workload (chat-jsonl or sharegpt, as the workload "
            "says); checked whole before any request is sent, a malformed line is a usage "
            "error naming it"
        ),
    )
    p.add_argument(
        "--baseline-json", metavar="JSON", help="the stable revision's stored BenchSummary"
    )
    p.add_argument(
        "--baseline-url",
        metavar="URL",
        help=(
            "a baseline server measured in the same run, interleaved with --url (same time "
            "window, paired trials); the gate then compares against it, not --baseline-json"
        ),
    )
    p.add_argument(
        "--trials",
        type=int,
        default=3,
        help=(
            f"rounds of every compared figure before the gate's first look, 1..{MAX_TRIALS}; "
            "the gate's interval needs 2 or more (default: %(default)s)"
        ),
    )
    p.add_argument(
        "--max-trials",
        type=int,
        help=(
            f"most rounds of a figure still undecided after --trials (sequential trials, up "
            f"to {MAX_TRIALS} and the deadline's budget); each look's interval is widened for "
            "the number of looks (default: --trials, a fixed number)"
        ),
    )
    settle = p.add_argument_group(
        "settling warm-up",
        "discarded passes over every measured shape on every server until two passes agree",
    )
    settle.add_argument(
        "--settle-max-passes",
        type=int,
        default=4,
        help=(
            f"most warm-up passes, 0..{MAX_SETTLE_PASSES}; 0 sends --warmup requests per shape "
            "once instead (default: %(default)s)"
        ),
    )
    settle.add_argument(
        "--settle-tolerance-percent",
        type=float,
        default=15.0,
        help=(
            "two passes agree when every figure is within this (latency also within the "
            "gate's ms floor); H200: settled passes differed by up to 11%%, a pass with a JIT "
            "compile by 68-194%% (default: %(default)s)"
        ),
    )
    settle.add_argument(
        "--settle-max-seconds",
        type=float,
        default=300.0,
        help="no warm-up pass starts after this long (default: %(default)s)",
    )
    where = p.add_argument_group("placement (recorded; different GPU products: Inconclusive)")
    for role in ("candidate", "baseline"):
        where.add_argument(f"--{role}-node", metavar="NAME", help=f"node the {role} runs on")
        where.add_argument(
            f"--{role}-gpu-product",
            metavar="P",
            help=f"GPU product of the {role}'s node (label nvidia.com/gpu.product)",
        )
    p.add_argument("--report-path", metavar="PATH", help="write the full JSON report here")
    p.add_argument(
        "--html",
        metavar="PATH",
        help="also write the report as one self-contained HTML page (`vllm-operator report`; "
        "needs plotly: pip install 'vllm-operator[report]')",
    )
    p.add_argument("--summary-path", metavar="PATH", help="write the compact summary here")
    p.add_argument(
        "--deadline-seconds",
        type=float,
        default=1500.0,
        help="whole-run deadline (default: %(default)s)",
    )
    p.add_argument(
        "--request-timeout",
        type=float,
        default=600.0,
        help="per-request limit (s) (default: %(default)s)",
    )
    p.add_argument(
        "--stall-seconds",
        type=float,
        default=60.0,
        help="max silence mid-stream (s) (default: %(default)s)",
    )
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        help="connect limit (s) (default: %(default)s)",
    )
    p.add_argument(
        "--client",
        choices=("aiohttp", "httpx"),
        default="aiohttp",
        help="HTTP client (default: %(default)s)",
    )
    p.add_argument(
        "--output",
        choices=("auto", "human", "jsonl"),
        default="auto",
        help="auto: tables and a live line on a terminal, JSON lines otherwise",
    )
    p.add_argument("--label", help="row label in the tables (default: the model name)")
    run = p.add_argument_group(
        "run identity",
        "the benchmark Job, revision and gate attempt this run is; written into the summary, "
        "where the operator checks it against the Job it reads (give all three or none)",
    )
    run.add_argument("--job-name", metavar="NAME", help="name of the benchmark Job")
    run.add_argument("--revision", metavar="REV", help="revision under test")
    run.add_argument("--attempt", type=int, metavar="N", help="gate attempt, from 1")
    code = p.add_mutually_exclusive_group()
    code.add_argument(
        "--allow-code-execution",
        action="store_true",
        help=(
            "run python-tests code from the server's answers in a local sandbox process "
            "(your uid and network, behind Landlock and seccomp: Linux only, elsewhere the "
            "checks are not run; weaker than the Job's sandbox container); without it "
            "or --sandbox-dir, python-tests checks are refused (not run)"
        ),
    )
    code.add_argument(
        "--sandbox-dir",
        metavar="DIR",
        help="exchange directory of a sandbox container (`vllm-operator sandbox serve`)",
    )
    return p
