"""`vllm-operator sandbox`: the command line of the python-tests sandbox process.

Two entries, both a process apart from bench (``bench.sandbox.exchange`` holds what they
do): ``serve`` is what the benchmark Job's sandbox container runs (``render.job`` renders
``vllm-operator sandbox serve --exchange ... --scratch ...``), ``run-one`` is the helper
bench starts per test for ``--allow-code-execution`` on a laptop
(``bench.sandbox.executors.LocalSandbox``, as ``python -I -m vllm_operator.commands sandbox
run-one``). Only argument parsing lives here, as for every other subcommand.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vllm_operator.bench.sandbox.exchange import run_one_stdio, serve


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Run model-written code for python-tests checks, apart from the benchmark, and "
            "give back what each call of its function returned or raised (the benchmark "
            "compares; no expected value reaches the sandbox): `serve` in the benchmark "
            "Job's sandbox container, `run-one` for one job on stdin (what `bench "
            "--allow-code-execution` starts). See docs/security-sandbox.md."
        ),
    )
    sub = p.add_subparsers(dest="command", required=True)
    serve_p = sub.add_parser("serve", help="answer jobs dropped in an exchange directory")
    serve_p.add_argument("--exchange", required=True, help="directory shared with bench")
    serve_p.add_argument("--scratch", required=True, help="size-limited scratch directory")
    one = sub.add_parser("run-one", help="run one job read from stdin, print the result")
    one.add_argument("--scratch", required=True, help="scratch directory for the run")
    return p


def main(argv: list[str], prog: str) -> int:
    args = parser(prog).parse_args(argv)
    if args.command == "serve":
        serve(Path(args.exchange), Path(args.scratch))
        return 0
    return run_one_stdio(Path(args.scratch))
