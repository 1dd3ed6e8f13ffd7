"""Digests of what a refactor must not change: the recorded render set and the H200 verdicts.

A move or split that only rearranges code must leave two things byte for byte as they were:
everything the operator writes to the cluster (the recorded render set of
``tests/unit/rollout/recorded_renders.py``) and what ``vllm-operator judge`` says about every
stored H200 summary and report under ``docs/calibration/`` (the re-judged summaries). This
prints one line per case, ``<digest>  <case>``, so two trees compare with ``diff``::

    export PYTHONPATH=$PWD/operator:$PWD/tests
    python hack/refactor_check.py > /tmp/before.txt      # on the commit before the refactor
    python hack/refactor_check.py > /tmp/after.txt       # on the refactored tree
    diff /tmp/before.txt /tmp/after.txt && echo identical

Each stored summary and report is judged at every set of limits its run was measured with
(the ``spec.gate.thresholds`` of each CR stored beside it) and at ``maxRegressionPercent``
10, in both output forms; the digest covers the exit code and everything written to stdout
and stderr. ``--show CASE`` prints a judge case's text instead, to read a difference (a render case
reads as ``tests/unit/rollout/test_render_recorded.py`` writes it on a mismatch).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = ROOT / "docs" / "calibration"
TEN = '{"maxRegressionPercent": 10}'


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def render_cases() -> Iterator[tuple[str, str]]:
    """Each render's digest as ``recorded_renders.json`` records it (not the text)."""
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "rollout"))
    from recorded_renders import digest, renders  # noqa: PLC0415 - the tests' own builder

    for name, text in sorted(renders().items()):
        yield f"render/{name}", digest(text)


def _limits(run: Path) -> list[tuple[str, str]]:
    found = [("ten", TEN)]
    for cr in sorted(run.glob("*.yaml")):
        spec = yaml.safe_load(cr.read_text())
        thresholds = spec.get("spec", {}).get("gate", {}).get("thresholds")
        if thresholds is not None:
            found.append((cr.stem, json.dumps(thresholds, sort_keys=True)))
    return found


def _judge(argv: list[str]) -> str:
    from vllm_operator.commands.judge import main  # noqa: PLC0415 - the tree under test

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv, "vllm-operator judge")
    return f"exit {code}\n--- stdout\n{out.getvalue()}--- stderr\n{err.getvalue()}"


def judge_cases() -> Iterator[tuple[str, str]]:
    for run in sorted(p for p in CALIBRATION.iterdir() if p.is_dir()):
        for stored in sorted(run.glob("summary-*.json")) + sorted(run.glob("report-*.json*")):
            option = "--summary" if stored.name.startswith("summary-") else "--report"
            for name, limits in _limits(run):
                for output in ("human", "json"):
                    argv = [option, str(stored), "--thresholds-json", limits, "--output", output]
                    case = f"judge/{run.name}/{stored.name}/{name}/{output}"
                    yield case, _judge(argv)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", metavar="CASE", help="print this case's text, not digests")
    args = parser.parse_args()
    if args.show is None:
        for case, recorded in render_cases():
            print(f"{recorded[:16]}  {case}")
    for case, text in judge_cases():
        if args.show is None:
            print(f"{_digest(text)}  {case}")
        elif case == args.show:
            print(text, end="")
            return 0
    if args.show is not None:
        print(f"no case {args.show!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
