"""`vllm-operator demo`: the published upgrade story on an embedded cluster, no GPU needed.

Why it exists: the fastest way to understand the operator is to watch it make the decision
it was built for. Everything here is the real thing except the GPU: the embedded API server
(``DevCluster``), the operator's own kopf handlers in-process, the local kubelet running
each rendered pod (the simulator plays vLLM from the pod's command, args and env) and each
benchmark Job (the real ``vllm-operator bench``), the real gate. The demo only applies
resources and reads their status, like a user with kubectl.

The story (``demo_data/``): 0.16.0 with ``--enforce-eager`` becomes stable; 0.17.0 still
eager is rejected (slower than the revision serving today by more than 10%); 0.17.0 in
throughput mode is promoted. ``--apply FILE`` runs your own resources instead (documents
sharing a name are applied one after the other, each waiting for its verdict).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import signal
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import yaml

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.api.crd import crd_document
from vllm_operator.api.resource import API_VERSION, KIND, PLURAL
from vllm_operator.api.status import GateRecord, VLLMDeploymentStatus
from vllm_operator.config import OperatorConfig
from vllm_operator.devcluster.apierrors import ApiError
from vllm_operator.devcluster.cluster import DevCluster
from vllm_operator.devcluster.demo_tables import Row, render
from vllm_operator.devcluster.kopfrun import OperatorThread
from vllm_operator.devcluster.kubelet import Kubelet
from vllm_operator.errors import SpecErrors
from vllm_operator.handlers.registry import build_registry
from vllm_operator.render import deployment_name, revision_hash, serving_service_name
from vllm_operator.render.labels import REVISION_LABEL

Obj = dict[str, Any]
DEFAULT_TIME_SCALE = 0.05
DEFAULT_DEADLINE_SCALE = 0.1


@dataclass(frozen=True)
class Step:
    file: str
    label: str
    title: str
    expect: str  # the verdict the story expects


STORY = (
    Step(
        "step1-v0.16.0-eager.yaml",
        "v0.16.0 (enforce-eager)",
        "vLLM 0.16.0 with --enforce-eager: the first revision, gated, becomes stable",
        "Passed",
    ),
    Step(
        "step2-v0.17.0-eager.yaml",
        "v0.17.0 (enforce-eager)",
        "vLLM 0.17.0 keeping --enforce-eager: compared with stable 0.16, rejected",
        "Failed",
    ),
    Step(
        "step3-v0.17.0-throughput.yaml",
        "v0.17.0 --performance-mode throughput",
        "vLLM 0.17.0 compiled, --performance-mode throughput: promoted",
        "Passed",
    ),
)


def story_documents() -> list[Obj]:
    data = resources.files("vllm_operator.devcluster") / "demo_data"
    return [yaml.safe_load((data / step.file).read_text()) for step in STORY]


class Printer:
    """Progress lines with the time since the demo started."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.t0 = time.monotonic()

    def __call__(self, text: str = "", *, stamp: bool = True) -> None:
        prefix = f"[{time.monotonic() - self.t0:6.1f}s] " if stamp else ""
        self.out.write(prefix + text + "\n")
        self.out.flush()


class Session:
    """DevCluster + CRD + kubelet + the operator, started and stopped together."""

    def __init__(
        self,
        *,
        time_scale: float,
        deadline_scale: float,
        workdir: Path | None,
        printer: Printer,
    ) -> None:
        self.time_scale = time_scale
        self.deadline_scale = deadline_scale
        self.own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="vllm-operator-demo-"))
        self.say = printer
        self._stack = contextlib.ExitStack()
        self.cluster: DevCluster
        self.kubelet: Kubelet

    def __enter__(self) -> Session:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start(self) -> None:
        self.cluster = self._stack.enter_context(DevCluster(crds=[crd_document()]))
        self.kubelet = Kubelet(
            self.cluster,
            self.workdir / "kubelet",
            time_scale=self.time_scale,
            deadline_time_scale=self.deadline_scale,
            extra_env={"VLLM_SIM_TIME_SCALE": f"{self.time_scale:g}"},
        )
        self._stack.enter_context(self.kubelet)
        config = OperatorConfig(
            namespaces=("default",),
            metrics_port=None,
            liveness_port=None,
            api_url=self.cluster.url,
            deadline_scale=self.deadline_scale,
            resync_seconds=5.0,
        )
        registry = build_registry(config, login=False)
        self._stack.enter_context(OperatorThread(registry, self.cluster, namespaces=["default"]))
        self.say(
            f"embedded API {self.cluster.url}; operator and kubelet running "
            f"(time scale {self.time_scale:g}, pods in {self.workdir / 'kubelet'})"
        )

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        if self.own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def apply(self, doc: Obj) -> Obj:
        """Create, or replace the spec of, one object (like ``kubectl apply``)."""
        meta = doc.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        kind = str(doc.get("kind"))
        plural = PLURAL if kind == KIND else kind
        try:
            current = self.cluster.get(doc["apiVersion"], plural, meta["name"], meta["namespace"])
        except ApiError as exc:
            if exc.code != 404:
                raise
            return self.cluster.create(doc)
        body = dict(current, **{k: v for k, v in doc.items() if k not in ("metadata", "status")})
        return self.cluster.replace(body)

    def resource(self, name: str, namespace: str) -> Obj:
        return self.cluster.get(API_VERSION, PLURAL, name, namespace)


def _status(obj: Obj) -> VLLMDeploymentStatus:
    return VLLMDeploymentStatus.model_validate(obj.get("status") or {})


class Watcher:
    """Prints what changed in a VLLMDeployment's status since the last look."""

    def __init__(self, say: Printer) -> None:
        self.say = say
        self.seen: dict[str, Any] = {}

    def observe(self, obj: Obj) -> VLLMDeploymentStatus:
        status = _status(obj)
        name = obj["metadata"]["name"]
        line = (status.phase, status.message)
        if self.seen.get(f"{name}/phase") != line:
            self.seen[f"{name}/phase"] = line
            self.say(f"{name}: {status.phase}" + (f" - {status.message}" if status.message else ""))
        gate = status.last_gate
        key = (gate.revision, gate.outcome, gate.finished_at) if gate else None
        if gate is not None and self.seen.get(f"{name}/gate") != key:
            self.seen[f"{name}/gate"] = key
            self.say(f"{name}: verdict on revision {gate.revision}: {gate.outcome.upper()}")
            for reason in gate.reasons:
                self.say(f"    - {reason}", stamp=False)
        return status


def _settled(status: VLLMDeploymentStatus, revision: str) -> GateRecord | None:
    """The verdict on ``revision`` once the rollout around it has finished."""
    record = next((r for r in status.history if r.revision == revision), None)
    if record is None and status.last_gate and status.last_gate.revision == revision:
        record = status.last_gate
    promoted = status.stable is not None and status.stable.revision == revision
    if record is None:
        return None
    if record.outcome == "Passed":
        return record if promoted and status.candidate is None else None
    candidate_gone = status.candidate is None or status.candidate.revision != revision
    return record if candidate_gone or status.phase in ("Holding", "Failed") else None


def run_step(
    session: Session, doc: Obj, watcher: Watcher, timeout: float
) -> tuple[str, GateRecord | None]:
    vd = parse_vllm_deployment(doc)
    revision = revision_hash(vd.spec)
    name, namespace = vd.metadata.name, vd.metadata.namespace
    session.apply(doc)
    session.say(f"applied {name} (revision {revision}, {vd.spec.engine.image})")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = watcher.observe(session.resource(name, namespace))
        if not vd.spec.gate.enabled and status.stable and status.stable.revision == revision:
            return revision, None
        record = _settled(status, revision)
        if record is not None:
            return revision, record
        time.sleep(0.1)
    session.say(f"{name}: no verdict on {revision} within {timeout:g} s")
    return revision, None


def serving_violations(cluster: DevCluster, name: str, namespace: str) -> list[str]:
    """Times the serving Service selected a revision whose Deployment had no Ready pod."""
    problems = []
    svc = serving_service_name(name)
    for version in cluster.history("v1", "services", svc, namespace):
        revision = ((version.get("spec") or {}).get("selector") or {}).get(REVISION_LABEL)
        if not revision or version.get("_event") == "DELETED":
            continue
        rv = int(version["metadata"]["resourceVersion"])
        states = cluster.history(
            "apps/v1", "deployments", deployment_name(name, revision), namespace
        )
        before = [s for s in states if int(s["metadata"]["resourceVersion"]) < rv]
        ready = (before[-1].get("status") or {}).get("readyReplicas", 0) if before else 0
        if not ready:
            problems.append(f"Service {svc} selected revision {revision} with no Ready pod")
    return problems


def run_story(session: Session, timeout: float) -> int:
    say = session.say
    watcher = Watcher(say)
    rows: list[Row] = []
    ok = True
    for number, (step, doc) in enumerate(zip(STORY, story_documents(), strict=True), 1):
        say("")
        say(f"== Step {number}/{len(STORY)}: {step.title}", stamp=False)
        revision, record = run_step(session, doc, watcher, timeout)
        outcome = record.outcome if record else "none"
        good = outcome == step.expect
        ok &= good
        mark = "ok" if good else "UNEXPECTED"
        say(f"step {number}: verdict {outcome} (expected {step.expect}) {mark}")
        rows.append(
            Row(
                step.label,
                revision,
                outcome,
                tuple(record.reasons) if record else (),
                record.summary if record else None,
            )
        )
        if not good:
            break
    name = str(story_documents()[0]["metadata"]["name"])
    violations = serving_violations(session.cluster, name, "default")
    say("")
    say(render(rows, session.time_scale), stamp=False)
    for problem in violations:
        say(f"PROBLEM: {problem}")
    if not violations:
        say("the serving Service only ever selected Ready revisions", stamp=True)
    ok &= not violations
    say("RESULT: " + ("all verdicts as expected" if ok else "unexpected outcome"), stamp=True)
    return 0 if ok else 1


def run_apply(session: Session, files: list[str], timeout: float) -> int:
    docs: list[Obj] = []
    for file in files:
        text = sys.stdin.read() if file == "-" else Path(file).read_text()
        docs += [d for d in yaml.safe_load_all(text) if d]
    watcher = Watcher(session.say)
    rows: list[Row] = []
    ok = True
    for doc in docs:
        if doc.get("kind") != KIND:
            session.apply(doc)
            session.say(f"applied {doc.get('kind')} {doc['metadata']['name']}")
            continue
        revision, record = run_step(session, doc, watcher, timeout)
        status = _status(
            session.resource(doc["metadata"]["name"], doc["metadata"].get("namespace", "default"))
        )
        promoted = status.stable is not None and status.stable.revision == revision
        ok &= promoted
        label = f"{doc['metadata']['name']} ({doc['spec']['engine']['image'].rsplit(':', 1)[-1]})"
        rows.append(
            Row(
                label,
                revision,
                record.outcome if record else ("promoted" if promoted else "none"),
                tuple(record.reasons) if record else (),
                record.summary if record else None,
            )
        )
    session.say("")
    session.say(render(rows, session.time_scale), stamp=False)
    session.say(
        "RESULT: " + ("every revision promoted" if ok else "not every revision was promoted")
    )
    return 0 if ok else 1


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def keep_running(session: Session, out: TextIO) -> None:
    path = session.cluster.write_kubeconfig(session.workdir / "kubeconfig")
    out.write(
        "\nThe embedded API keeps running until Ctrl-C. Try:\n"
        f"  kubectl --kubeconfig {path} get vllmd\n"
        f"  kubectl --kubeconfig {path} describe vllmd\n"
        f"  kubectl --kubeconfig {path} get deployments,pods,services,jobs\n"
        f"KUBECONFIG={path}\n"
    )
    out.flush()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        out.write("stopping\n")
    finally:
        signal.signal(signal.SIGTERM, previous)


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=textwrap.fill(
            "Run the operator on an embedded Kubernetes API with a local kubelet (the vLLM "
            "simulator plays each rendered pod; the real benchmark runs as each gate Job) "
            "and walk the published vLLM 0.16 -> 0.17 upgrade story: 0.16 eager becomes "
            "stable, 0.17 still eager is rejected on regression, 0.17 throughput is "
            "promoted. Prints progress, each verdict with its reasons, and the study's "
            "comparison tables built from the measured figures. No cluster, no GPU."
        ),
        epilog=(
            "exit status: 0 when every verdict is as expected (with --apply: every revision "
            "promoted), 1 otherwise, 2 for invalid input.\n\nexamples:\n"
            f"  {prog}\n  {prog} --keep\n  {prog} --apply my-vllmd.yaml --keep"
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
        "--keep",
        action="store_true",
        help="afterwards keep the embedded API running, write a kubeconfig and print "
        "kubectl commands; stop with Ctrl-C",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=DEFAULT_TIME_SCALE,
        help="simulated time per real second for the simulator, probes and restart back-off "
        f"(default {DEFAULT_TIME_SCALE}: a 30 s request takes 1.5 s; smaller is faster, "
        "noisier)",
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
        "--workdir", type=Path, help="keep pod directories and logs here (default: a temp dir)"
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
    say = Printer(sys.stdout)
    say("vllm-operator demo: starting the embedded cluster, kubelet and operator")
    with Session(
        time_scale=args.time_scale,
        deadline_scale=args.deadline_scale,
        workdir=args.workdir,
        printer=say,
    ) as session:
        if args.apply:
            code = run_apply(session, args.apply, args.timeout)
        else:
            code = run_story(session, args.timeout)
        say(f"finished in {time.monotonic() - say.t0:.1f} s", stamp=False)
        if args.keep:
            keep_running(session, sys.stdout)
    return code


def _user_documents(files: list[str]) -> Iterator[Obj]:
    for file in files:
        if file == "-":
            continue
        for doc in yaml.safe_load_all(Path(file).read_text()):
            if doc and doc.get("kind") == KIND:
                yield doc
