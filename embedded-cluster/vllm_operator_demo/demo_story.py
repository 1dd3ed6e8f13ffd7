"""The demo's story: apply resources one at a time, follow status, judge the outcome.

Everything here is what a user with kubectl could do: apply, read ``status``, and at the
end read the API's change history to check that the serving Service only ever selected a
revision with a Ready pod. The verdicts come from the operator's status (``status.history``),
the figures from each benchmark Job's log (status keeps only their digest), i.e. from what
the gate (and, in step 4, the canary) measured. Live
users (``demo_live``) send requests through the serving Service the whole time; the story
is as expected only if no request of theirs failed because of a traffic switch.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from devcluster.cluster import DevCluster
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.api.progress import NOW as PROGRESS_JOIN
from vllm_operator.api.progress import describe as describe_progress
from vllm_operator.api.resource import API_VERSION, KIND, PLURAL
from vllm_operator.api.status import GateRecord, VLLMDeploymentStatus
from vllm_operator.api.summary import Placement
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import deployment_name, revision_hash, serving_service_name
from vllm_operator.render.labels import REVISION_LABEL
from vllm_operator.rollout.advice import split_holding
from vllm_operator_demo.demo_live import StepTraffic, live_users
from vllm_operator_demo.demo_reports import figures, write_report
from vllm_operator_demo.demo_session import Printer, Session
from vllm_operator_demo.demo_tables import Row, render

Obj = dict[str, Any]

PROGRESS_SECONDS = 0.5
"""How often the live line reads the running benchmark's log (a terminal only)."""


@dataclass(frozen=True)
class Step:
    file: str
    label: str
    title: str
    expect: str  # the verdict the story expects
    canary: bool = False  # the verdict is the canary's (live traffic), not the gate's


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
    Step(
        "step4-v0.17.0-broken-streams.yaml",
        "v0.17.0 throughput, broken streams",
        "a candidate that passes its gate and fails its canary on live traffic: back to stable",
        "Failed",
        canary=True,
    ),
)


def story_documents() -> list[Obj]:
    data = resources.files("vllm_operator_demo") / "demo_data"
    return [yaml.safe_load((data / step.file).read_text()) for step in STORY]


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
        # Where a running benchmark is goes to the live line, not a new line each time.
        message = status.message.split(PROGRESS_JOIN)[0]
        line = (status.phase, message)
        if self.seen.get(f"{name}/phase") != line:
            self.seen[f"{name}/phase"] = line
            why, choices = split_holding(message) if status.phase == "Holding" else ("", [])
            if choices:  # what decides a held candidate: one command per line
                self.say(f"{name}: Holding - {why}")
                for choice in choices:
                    self.say(f"    {choice}", stamp=False)
            else:
                text = f" - {message}" if message else ""
                self.say(f"{name}: {status.phase}{text}")
        gate = status.last_gate
        key = (gate.revision, gate.outcome, gate.finished_at) if gate else None
        if gate is not None and self.seen.get(f"{name}/gate") != key:
            self.seen[f"{name}/gate"] = key
            self.say(
                f"{name}: {verdict_name(gate)} on revision {gate.revision}: {gate.outcome.upper()}"
            )
            for said in verdict_lines(gate):
                self.say(said, stamp=False)
            where = _where(gate)
            if where:
                self.say(f"    ({where})", stamp=False)
        return status


def verdict_name(gate: GateRecord) -> str:
    """Which judge spoke: the benchmark gate, or the canary on live traffic (two verdicts on
    one revision, seconds apart, are two things; a person's or a deadline's is a verdict)."""
    judge = gate.judge()
    return f"{judge} verdict" if judge in ("gate", "canary") else "verdict"


def verdict_lines(gate: GateRecord) -> list[str]:
    """What decided, in full; the reasons that decided nothing only counted (the report
    lists them), so a check that passed is never printed under a FAILED."""
    if gate.deciding:
        decided = gate.decided_by_reasons()
        lines = [f"    - {reason}" for reason in decided]
    elif gate.outcome == "Passed":  # nothing singled out: every figure within, notes aside
        decided = []
        lines = [f"    note: {reason}" for reason in gate.reasons]
        return lines or ["    - every measured figure is within its limits"]
    else:
        decided = gate.reasons
        lines = [f"    - {reason}" for reason in decided]
    rest = len(gate.reasons) - len(decided)
    if rest:
        lines.append(f"    ({rest} other figure(s) and note(s) did not decide it: see the report)")
    return lines


def _where(gate: GateRecord) -> str:
    """Where candidate and baseline ran, as the gate record says."""

    def side(placement: Placement | None) -> str:
        if placement is None:
            return "?"
        text = placement.node or "?"
        if placement.gpu_product:
            text += f" ({placement.gpu_product})"
        return text

    if gate.baseline_mode == "twin":
        return (
            f"candidate on {side(gate.candidate_placement)}, twin of stable revision "
            f"{gate.baseline_revision} on {side(gate.baseline_placement)}, measured in one run"
        )
    if gate.candidate_placement is not None and gate.decided_by == "gate":
        return f"candidate on {side(gate.candidate_placement)}"
    return ""


def _settled(status: VLLMDeploymentStatus, revision: str) -> GateRecord | None:
    """The verdict on ``revision`` once the rollout around it has finished."""
    record = next((r.record() for r in status.history if r.revision == revision), None)
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
    revision = revision_hash(vd.spec, plan_launch(vd.spec))
    name, namespace = vd.metadata.name, vd.metadata.namespace
    session.apply(doc)
    session.say(f"applied {name} (revision {revision}, {vd.spec.engine.image})")
    deadline = time.monotonic() + timeout
    next_look = 0.0
    while time.monotonic() < deadline:
        status = watcher.observe(session.resource(name, namespace))
        live = session.say.live_enabled and status.phase == "Benchmarking"
        if live and time.monotonic() >= next_look:
            next_look = time.monotonic() + PROGRESS_SECONDS
            event = session.bench_progress(name, namespace, revision)
            if event is None:  # not started yet, or finished: no stale line
                session.say.live("")
            else:
                where = describe_progress(event, vd.spec.gate.max_trials)
                session.say.live(f"{name}: benchmarking {revision}: {where}")
        if not vd.spec.gate.enabled and status.stable and status.stable.revision == revision:
            return revision, None
        record = _settled(status, revision)
        if record is not None:
            return revision, record
        time.sleep(0.1)
    session.say(f"{name}: no verdict on {revision} within {timeout:g} s")
    return revision, None


def serving_violations(
    cluster: DevCluster,
    name: str,
    namespace: str,
    kind: tuple[str, str] = ("apps/v1", "deployments"),
    unit: str = "pod",
) -> list[str]:
    """Times the serving Service selected a revision whose workload (``kind``: api version
    and plural; a Deployment by default) had no Ready ``unit``, read from the API's change
    history in resourceVersion order."""
    problems = []
    svc = serving_service_name(name)
    for version in cluster.history("v1", "services", svc, namespace):
        revision = ((version.get("spec") or {}).get("selector") or {}).get(REVISION_LABEL)
        if not revision or version.get("_event") == "DELETED":
            continue
        rv = int(version["metadata"]["resourceVersion"])
        states = cluster.history(*kind, deployment_name(name, revision), namespace)
        before = [s for s in states if int(s["metadata"]["resourceVersion"]) < rv]
        ready = (before[-1].get("status") or {}).get("readyReplicas", 0) if before else 0
        if not ready:
            problems.append(f"Service {svc} selected revision {revision} with no Ready {unit}")
    return problems


def _stable(session: Session, name: str) -> str | None:
    """The revision serving before a step (None before the first)."""
    if not session.cluster.exists(API_VERSION, PLURAL, name, "default"):
        return None
    status = _status(session.resource(name, "default"))
    return status.stable.revision if status.stable else None


def _gate_summary(session: Session, name: str, revision: str) -> GateRecord | None:
    """The benchmark gate's record of ``revision`` (a canary's verdict carries no figures)."""
    status = _status(session.resource(name, "default"))
    records = (r.record() for r in status.history if r.revision == revision)
    return next((r for r in records if r.judge() == "gate"), None)


def _canary_outcome(
    session: Session, name: str, stable: str | None, record: GateRecord | None
) -> list[str]:
    """What a step the canary decided must show: the canary's reason, the traffic back on
    the stable revision. Problems, none when both hold."""
    problems = []
    if record is None or not record.reasons or not record.reasons[0].startswith("canary"):
        problems.append("the verdict is not the canary's")
    selector = session.cluster.get("v1", "services", serving_service_name(name), "default")
    serving = ((selector.get("spec") or {}).get("selector") or {}).get(REVISION_LABEL)
    if stable is None or serving != stable:
        problems.append(f"the serving Service selects {serving or 'both revisions'}")
    else:
        session.say(
            f"traffic back on stable revision {stable}: the serving Service selects its pods "
            "alone again"
        )
    return problems


def run_story(session: Session, timeout: float, *, reports: Path | None = None) -> int:
    """The four steps, live users sending requests through the serving Service all along;
    with ``reports``, one report page per step written there."""
    say = session.say
    watcher = Watcher(say)
    rows: list[Row] = []
    ok = True
    docs = story_documents()
    name = str(docs[0]["metadata"]["name"])
    model = str(docs[0]["spec"]["model"].get("servedModelName") or docs[0]["spec"]["model"]["name"])
    users = live_users(session.kubelet.workdir, name, "default", model)
    switch_failures = 0
    with users:
        for number, (step, doc) in enumerate(zip(STORY, docs, strict=True), 1):
            say("")
            say(f"== Step {number}/{len(STORY)}: {step.title}", stamp=False)
            stable = _stable(session, name)
            before = len(users.snapshot())
            revision, record = run_step(session, doc, watcher, timeout)
            traffic = StepTraffic.of(users.snapshot()[before:])
            outcome = record.outcome if record else "none"
            good = outcome == step.expect
            if step.canary and good:
                problems = _canary_outcome(session, name, stable, record)
                for problem in problems:
                    say(f"PROBLEM: {problem}")
                good = not problems
            ok &= good
            mark = "ok" if good else "UNEXPECTED"
            say(f"step {number}: verdict {outcome} (expected {step.expect}) {mark}")
            say(traffic.line(number))
            switch_failures += traffic.switch_failures
            gate = _gate_summary(session, name, revision) if step.canary else record
            if reports is not None:
                page = reports / f"step{number}-{revision}.html"
                say(write_report(session, name, "default", gate, page))
            rows.append(
                Row(
                    step.label,
                    revision,
                    outcome,
                    tuple(record.reasons) if record else (),
                    figures(session, name, "default", gate),
                )
            )
            if not good:
                break
    violations = serving_violations(session.cluster, name, "default")
    say("")
    say(render(rows, session.time_scale), stamp=False)
    for problem in violations:
        say(f"PROBLEM: {problem}")
    if not violations:
        say("the serving Service only ever selected Ready revisions", stamp=True)
    sent = users.snapshot()
    failed = sum(1 for s in sent if not s.ok)
    say(
        f"live users: {len(sent)} requests in all, {failed} failed, {switch_failures} of "
        "them by a traffic switch",
        stamp=True,
    )
    ok &= not violations and switch_failures == 0
    say("RESULT: " + ("all verdicts as expected" if ok else "unexpected outcome"), stamp=True)
    return 0 if ok else 1


def run_apply(
    session: Session,
    files: list[str],
    timeout: float,
    *,
    keep: bool = False,
    reports: Path | None = None,
) -> int:
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
        name, namespace = doc["metadata"]["name"], doc["metadata"].get("namespace", "default")
        status = _status(session.resource(name, namespace))
        if reports is not None:
            page = reports / f"{name}-{revision}.html"
            session.say(write_report(session, name, namespace, record, page))
        promoted = status.stable is not None and status.stable.revision == revision
        ok &= promoted
        if status.phase == "Holding":
            how = (
                "the demo keeps running afterwards: run them with the KUBECONFIG it prints"
                if keep
                else "run the demo again with --keep to run them against its API"
            )
            session.say(f"revision {revision} is held for a person (commands above); {how}")
        label = f"{doc['metadata']['name']} ({doc['spec']['engine']['image'].rsplit(':', 1)[-1]})"
        rows.append(
            Row(
                label,
                revision,
                record.outcome if record else ("promoted" if promoted else "none"),
                tuple(record.reasons) if record else (),
                figures(session, name, namespace, record),
            )
        )
    session.say("")
    session.say(render(rows, session.time_scale), stamp=False)
    session.say(
        "RESULT: " + ("every revision promoted" if ok else "not every revision was promoted")
    )
    return 0 if ok else 1
