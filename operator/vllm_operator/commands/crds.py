"""`vllm-operator crds`: write (or check) the generated CRD and the Helm chart's copy.

Two byte-identical files exist because Helm installs CRDs only from the chart's own
``crds/`` folder, while ``kubectl apply -f crds/`` users and the docs want a top-level one.
Writing both from one generator, and ``--check`` in CI, keeps them from drifting.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vllm_operator.api.crd import CRD_FILENAME, render_crd_yaml
from vllm_operator.commands.parsing import Parser

DESCRIPTION = f"""\
Generate the VLLMDeployment CustomResourceDefinition from the API models and write it to
OUT_DIR/{CRD_FILENAME} and CHART_DIR/{CRD_FILENAME} (byte-identical
copies). With --check nothing is written: the command exits 1 and names each file that is
missing or differs, so CI catches a model change without a regenerated CRD.
"""

EPILOG = """\
exit status: 0 written / up to date, 1 stale (--check), 2 usage error.
examples:
  vllm-operator crds                      # regenerate crds/ and the chart copy
  vllm-operator crds --check              # CI: fail when they are stale
  vllm-operator crds --stdout | kubectl apply -f -
"""


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(
        prog=prog,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out-dir",
        default="crds",
        type=Path,
        help="folder of the top-level CRD (default: crds)",
    )
    parser.add_argument(
        "--chart-dir",
        default="charts/vllm-operator/crds",
        type=Path,
        help="the Helm chart's crds/ folder (default: charts/vllm-operator/crds)",
    )
    parser.add_argument(
        "--no-chart", action="store_true", help="do not write or check the chart's copy"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when a file is missing or differs from the generated CRD",
    )
    parser.add_argument(
        "--stdout", action="store_true", help="print the CRD to standard output, write nothing"
    )
    return parser


def main(argv: list[str], prog: str) -> int:
    args = build_parser(prog).parse_args(argv)
    text = render_crd_yaml()
    if args.stdout:
        sys.stdout.write(text)
        return 0
    targets: list[Path] = [args.out_dir / CRD_FILENAME]
    if not args.no_chart:
        targets.append(args.chart_dir / CRD_FILENAME)
    if args.check:
        stale = [t for t in targets if not t.is_file() or t.read_text(encoding="utf-8") != text]
        for target in stale:
            sys.stderr.write(f"{prog}: {target} is stale or missing; run `vllm-operator crds`\n")
        return 1 if stale else 0
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            sys.stdout.write(f"wrote {target}\n")
        else:
            sys.stdout.write(f"unchanged {target}\n")
    return 0
