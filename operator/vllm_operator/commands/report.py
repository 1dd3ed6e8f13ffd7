"""`vllm-operator report`: a benchmark report as one HTML page people read.

The JSON report (``bench --report-path``, or the log of a benchmark Job) holds every figure,
but nobody reads 100 kB of JSON to learn why a revision was rejected. The page shows the
verdict with its reasons, the charts with candidate and baseline on the same axes (the
study's latency per prompt class and tokens/s per stream count, or, for a load sweep, the
latency percentiles, the TTFT and inter-token latency distributions and the throughput
against load) and the quality table (``bench/page/``). It is one self-contained file: no
network is needed, or allowed, to view it.

Drawing needs plotly, an optional dependency (``pip install 'vllm-operator[report]'``; the
demo's install brings it): the benchmark image leaves it out for its size budget. Exit
codes: 0 written, 2 usage error (a file that is not a report, plotly missing).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

from vllm_operator.api.text import printable
from vllm_operator.bench.page.view import MAX_REPORT_BYTES, Report, ReportError, from_bytes
from vllm_operator.commands.inputs import read_capped
from vllm_operator.commands.parsing import Parser
from vllm_operator.errors import SpecError

INSTALL = "pip install 'vllm-operator[report]' (plotly draws the charts)"

EPILOG = """\
exit codes: 0 written, 2 usage error (not a report, unreadable, plotly not installed).

REPORT is the JSON `vllm-operator bench --report-path` writes (plain or gzipped), or a
benchmark Job's log (`kubectl logs job/NAME`: its last report line is used); '-' reads
standard input. Without
--baseline the charts compare the candidate with the baseline measured in the same run (if
any); with it, with the candidate of OTHER (another run of the same workload).

examples:
  vllm-operator report report.json -o report.html
  vllm-operator report today.json --baseline last-week.json -o compare.html
  kubectl logs job/my-model--gate-3d9f4f45ba-1 | vllm-operator report - -o gate.html
"""


class _Parser(Parser):
    def error(self, message: str) -> NoReturn:
        raise SpecError("arguments", self.explained(message), "see `vllm-operator report --help`")


def parser(prog: str) -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
        description=(
            "Write a benchmark report as one self-contained HTML page: the verdict and its "
            "reasons, latency and throughput charts with candidate and baseline on the same "
            "axes, and the quality table."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("report", metavar="REPORT", help="the report JSON (or a Job's log; '-': stdin)")
    p.add_argument(
        "--baseline",
        metavar="OTHER",
        help="compare with the candidate of this report instead of the run's own baseline",
    )
    p.add_argument("-o", "--output", required=True, metavar="HTML", help="where to write the page")
    return p


def plotly_missing() -> str | None:
    """What to install when plotly is absent, else None (checked before any work starts)."""
    return None if importlib.util.find_spec("plotly") is not None else INSTALL


def page_from_data(data: object, where: str) -> str:
    """The page of an in-memory report (``bench --html``); ``SpecError`` if it is not one."""
    from vllm_operator.bench.page import document, view  # noqa: PLC0415 (needs plotly)

    return document.render_report(view.parse(data, where))


def write_page(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file renamed into place)."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_report(path: str, where: str) -> Report:
    """The report at ``path`` ('-': standard input), at most ``MAX_REPORT_BYTES``."""
    try:
        raw = read_capped(path, MAX_REPORT_BYTES)
    except OSError as exc:
        raise ReportError(where, f"cannot read {path}: {exc.strerror or exc}") from exc
    return from_bytes(raw, path, where)


def main(argv: list[str], prog: str) -> int:
    try:
        args = parser(prog).parse_args(argv)
        missing = plotly_missing()
        if missing is not None:
            raise SpecError("plotly", "not installed", missing)
        from vllm_operator.bench.page import document  # noqa: PLC0415 (needs plotly)

        report = _read_report(args.report, f"REPORT {args.report}")
        other = None
        if args.baseline is not None:
            other = _read_report(args.baseline, f"--baseline {args.baseline}")
        page = document.render_report(report, other, args.baseline or "")
        try:
            if args.output == "-":
                sys.stdout.write(page)
                return 0
            write_page(args.output, page)
        except OSError as exc:
            raise SpecError(
                "--output", f"cannot write {args.output}: {exc.strerror or exc}"
            ) from exc
    except SpecError as exc:
        sys.stderr.write(printable(f"{prog}: {exc}") + "\n")
        return 2
    outcome = report.verdict.outcome if report.verdict else "no verdict (no gate)"
    size = len(page.encode("utf-8")) / 1e6
    sys.stdout.write(printable(f"wrote {args.output} ({size:.1f} MB): {outcome}") + "\n")
    return 0
