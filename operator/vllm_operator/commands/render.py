"""`vllm-operator render`: the manifests a VLLMDeployment becomes, without a cluster.

It runs the operator's own planner over an empty in-memory cluster (``rollout/preview.py``),
so the preview is exactly what the operator creates for the first revision, in order, and
cannot drift from it (``render`` sits below the planner, so the preview is the planner's,
not the renderer's). An invalid CR prints every problem as
``field: message (fix: ...)`` and exits 2 without printing any manifest, so a pipe into
``kubectl apply -f -`` never applies half a set.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import IO, Any

import yaml

from vllm_operator.api.limits import describe
from vllm_operator.api.resource import KIND, VLLMDeployment, parse_vllm_deployment
from vllm_operator.api.text import printable
from vllm_operator.api.yaml_input import MAX_INPUT_BYTES, YAMLInputError, load_documents
from vllm_operator.commands.parsing import Parser
from vllm_operator.errors import SpecError, SpecErrors, VLLMOperatorError
from vllm_operator.render.validate import check
from vllm_operator.rollout.canary.traffic import share_warnings
from vllm_operator.rollout.context import DEFAULT_BENCH_IMAGE, Settings
from vllm_operator.rollout.gate_plan import plan_power_notes, plan_warnings
from vllm_operator.rollout.preview import first_revision

EXIT_OK = 0
EXIT_INVALID = 2

EPILOG = """\
examples:
  %(prog)s -f examples/qwen3-30b-a3b-v0.17-throughput.yaml
  %(prog)s -f a.yaml -f b.yaml | kubectl apply --dry-run=server -f -
  cat cr.yaml | %(prog)s -f -

output:
  per VLLMDeployment, what the operator creates for its first revision, in that order, as
  one YAML stream separated by '---':
    the candidate Service <name>--candidate,
    the candidate Deployment <name>--<revision> at rollout.candidateReplicas (default 1;
      with spec.resources.nodes > 1 a LeaderWorkerSet of that name, one group per replica,
      as an operator run with --multi-node creates it),
    the benchmark Job <name>--gate-<revision>-1, once the candidate is Ready (none with
      gate.enabled: false),
    the serving Service <name>, once the gate passed and the candidate, scaled to
      spec.replicas, is Ready,
    then, with it, the serving revision's autoscaler <name> (with spec.autoscaling:
      a HorizontalPodAutoscaler, or a KEDA ScaledObject) and its PodDisruptionBudget
      <name>--<revision>.
  Each as created: the promotion later patches the Deployment's replicas and role label.
  <revision> is the hash of the rendered pod template. The started-at annotation is the
  time of the preview. Warnings go to stderr: eager mode's cost, say, a tail limit the
  gate's plan cannot decide within timeoutSeconds (too few requests at that level), or a
  canary step's weight that whole replicas cannot make (traffic.mode replicas). Notes go
  there too: for each SLO percentile compared with the twin, the smallest regression the
  gate's plan detects with 95%% probability ("gate plan: detects TTFT p99 +140 ms or more
  at 8 req/s"), from the noise of the GPU runs it was fitted on.

input limits (each refused with exit 2, naming the position and the fix):
  at most 1 MiB, 1000 documents and 100000 values per file, UTF-8, no YAML aliases (*name),
  nesting at most 32 levels, integers within 64 bits, strings up to 65536 characters

exit status:
  0  rendered
  2  invalid input: each problem on stderr as 'field: message (fix: ...)'
"""


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(
        prog=prog,
        description=(
            "Print the Kubernetes manifests one or more VLLMDeployment resources become, as\n"
            "the operator's own planner creates them for a first revision: vLLM flags checked\n"
            "against the vLLM version, probes sized for warm-up, the library-path fix,\n"
            "volumes, the Services, the benchmark Job, the autoscaler and the disruption\n"
            "budget. Needs no cluster."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="YAML file with one or more VLLMDeployment documents; '-' reads stdin. Repeatable.",
    )
    parser.add_argument(
        "--bench-image",
        default=DEFAULT_BENCH_IMAGE,
        metavar="IMAGE",
        help="image of the benchmark Job, as the operator's --bench-image (default: %(default)s)",
    )
    return parser


class _Problem(VLLMOperatorError):
    """Input that is not a VLLMDeployment at all (unreadable file, bad YAML)."""


def _documents(source: str, data: bytes) -> Iterator[dict[str, Any]]:
    try:
        docs = load_documents(data)
    except YAMLInputError as exc:
        raise _Problem(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        raise _Problem(f"{source}: not valid YAML: {exc}") from None
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise _Problem(f"{source}: document {i + 1} is not a mapping")
        yield doc


def _read_bounded(fh: IO[bytes]) -> bytes:
    # One byte more than the limit is enough to know the input is too large.
    return fh.read(MAX_INPUT_BYTES + 1)


def _read(source: str, stdin: IO[str]) -> list[dict[str, Any]]:
    if source == "-":
        buffer = getattr(stdin, "buffer", None)
        if buffer is not None:
            data = _read_bounded(buffer)
        else:  # a text stream without bytes underneath (tests' StringIO)
            data = stdin.read(MAX_INPUT_BYTES + 1).encode("utf-8", errors="surrogateescape")
        return list(_documents("<stdin>", data))
    try:
        with open(source, "rb") as fh:
            data = _read_bounded(fh)
    except OSError as exc:
        raise _Problem(f"{source}: cannot read: {exc.strerror}") from None
    return list(_documents(source, data))


def _describe(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    kind = doc.get("kind", KIND)
    kind = kind[:64] if isinstance(kind, str) else KIND
    return f"{kind} {describe(name)}" if name else kind


def _dump(manifests: list[dict[str, Any]]) -> str:
    return yaml.dump_all(manifests, Dumper=_LiteralDumper, sort_keys=False, width=100)


class _LiteralDumper(yaml.SafeDumper):
    """Writes multi-line strings (the entrypoint script) as readable `|` blocks."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_representer)


def run(
    argv: list[str],
    prog: str,
    stdin: IO[str],
    stdout: IO[str],
    stderr: IO[str],
    *,
    now: datetime | None = None,
) -> int:
    """The command with its streams and clock injected (tests call this directly)."""
    args = _parser(prog).parse_args(argv)
    when = now or datetime.now(UTC)
    # What an operator run with --multi-node creates: a multi-node spec shows its group.
    settings = Settings(bench_image=args.bench_image, multi_node=True)
    manifests: list[dict[str, Any]] = []
    failed = False
    for source in args.filename:
        try:
            docs = _read(source, stdin)
        except _Problem as exc:
            stderr.write(printable(f"{prog}: {exc}") + "\n")
            failed = True
            continue
        if not docs:
            stderr.write(f"{prog}: {source}: no documents\n")
            failed = True
        for doc in docs:
            label = f"{source}: {_describe(doc)}"
            try:
                vd: VLLMDeployment = parse_vllm_deployment(doc)
                plan = check(vd)
                rendered = first_revision(doc, when, settings)
            except SpecErrors as exc:
                failed = True
                _report(stderr, prog, label, exc.errors)
                continue
            for warning in [*plan.warnings, *plan_warnings(vd.spec.gate), *share_warnings(vd)]:
                stderr.write(f"warning: {label}: {warning}\n")
            for note in plan_power_notes(vd.spec.gate):
                stderr.write(f"note: {label}: gate plan: {note}\n")
            manifests += rendered
    if failed:
        return EXIT_INVALID
    stdout.write(_dump(manifests))
    return EXIT_OK


def _report(stderr: IO[str], prog: str, label: str, errors: list[SpecError]) -> None:
    count = f"{len(errors)} problem" + ("s" if len(errors) != 1 else "")
    stderr.write(f"{prog}: {label} is invalid ({count}):\n")
    for error in errors:
        stderr.write(printable(str(error)) + "\n")


def main(argv: list[str], prog: str) -> int:
    """Entry point used by ``vllm-operator render``."""
    return run(argv, prog, sys.stdin, sys.stdout, sys.stderr)
