"""`vllm-operator demo --multi-node`: a model that spans two nodes, gated and promoted.

Why a story of its own: a multi-node revision is a LeaderWorkerSet group, not a Deployment,
and the operator rolls it out only when LeaderWorkerSet is installed and it runs with
``--multi-node``. Here the embedded cluster serves LeaderWorkerSet's API (``lws_crd``), its
kubelet plays the LWS controller (``devcluster.lws_controller``: a leader pod and a worker
pod per group, LWS's env and group restart) and the simulator plays the group (the worker
joins the leader over loopback; the leader serves once it has: ``sim.group``).

The story (``demo_data/multinode-*.yaml``, tensor parallel 1 x pipeline parallel 2 on two
one-GPU pods): vLLM 0.16 ``--enforce-eager`` is gated on the thresholds alone and becomes
stable; vLLM 0.17 ``--performance-mode throughput`` (the story's promoted pair, far faster
on medium and long prompts and on every stream count; a candidate only as fast as its
baseline stays undecided within the demo's trials on a loaded machine) is gated against a
twin of the stable group (a whole second group, measured in the same run) and promoted. What is
checked, as a user with kubectl could: each verdict and its baseline (``twin`` for step 2),
the revision served by a LeaderWorkerSet (no Deployment), and the serving Service only ever
selecting a revision whose group was Ready.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from devcluster.cluster import DevCluster
from vllm_operator.api.status import GateRecord, VLLMDeploymentStatus
from vllm_operator.render import deployment_name
from vllm_operator_demo.demo_reports import figures, write_report
from vllm_operator_demo.demo_session import Session
from vllm_operator_demo.demo_story import Watcher, run_step, serving_violations
from vllm_operator_demo.demo_tables import Row, render
from vllm_operator_demo.lws import LWS_API, LWS_NAME_LABEL, LWS_PLURAL

Obj = dict[str, Any]


@dataclass(frozen=True)
class GroupStep:
    file: str
    label: str
    title: str
    baseline: str  # the baseline the verdict must name: "none" (first revision) or "twin"


GROUP_STORY = (
    GroupStep(
        "multinode-step1-v0.16.0-eager.yaml",
        "v0.16.0 eager, 2 nodes (TP1 x PP2)",
        "a revision spanning two nodes (one LeaderWorkerSet group): gated, becomes stable",
        "none",
    ),
    GroupStep(
        "multinode-step2-v0.17.0-throughput.yaml",
        "v0.17.0 throughput, 2 nodes (TP1 x PP2)",
        "a new two-node revision gated against a twin of the stable group: promoted",
        "twin",
    ),
)


def group_documents() -> list[Obj]:
    data = resources.files("vllm_operator_demo") / "demo_data"
    return [yaml.safe_load((data / step.file).read_text()) for step in GROUP_STORY]


def group_pods(session: Session, set_name: str, namespace: str) -> list[str]:
    """The pods of one LeaderWorkerSet, leader first (``<set>-0``, then ``<set>-0-<i>``)."""
    pods = session.cluster.list(
        "v1", "pods", namespace, label_selector=f"{LWS_NAME_LABEL}={set_name}"
    )
    return sorted(str(p["metadata"]["name"]) for p in pods)


def group_violations(cluster: DevCluster, name: str, namespace: str) -> list[str]:
    """Times the serving Service selected a revision whose LeaderWorkerSet had no Ready group."""
    return serving_violations(cluster, name, namespace, (LWS_API, LWS_PLURAL), "group")


def _full_record(session: Session, name: str, revision: str) -> GateRecord | None:
    """The gate's record of ``revision`` as ``status.lastGate`` keeps it (history entries
    are compacted: no baseline mode)."""
    status = VLLMDeploymentStatus.model_validate(
        session.resource(name, "default").get("status") or {}
    )
    gate = status.last_gate
    return gate if gate is not None and gate.revision == revision else None


def _check_group(session: Session, name: str, revision: str, namespace: str) -> list[str]:
    """What the promoted revision must show: its LeaderWorkerSet alone serves (no
    Deployment), two pods in its group. Problems, none when it holds."""
    problems = []
    sets = [s["metadata"]["name"] for s in session.cluster.list(LWS_API, LWS_PLURAL, namespace)]
    want = deployment_name(name, revision)
    if want not in sets:
        problems.append(f"no LeaderWorkerSet {want} (found {sets})")
    if session.cluster.list("apps/v1", "deployments", namespace):
        problems.append("a Deployment exists: a group revision runs as a LeaderWorkerSet")
    pods = group_pods(session, want, namespace)
    if len(pods) == 2:
        session.say(
            f"revision {revision} serves as LeaderWorkerSet {want}: leader pod {pods[0]} "
            f"(API server), worker pod {pods[1]} (--headless, joined the leader)"
        )
    else:
        problems.append(f"LeaderWorkerSet {want} has pods {pods}, not a leader and one worker")
    return problems


def run_groups(session: Session, timeout: float, *, reports: Path | None = None) -> int:
    """The two-node story; 0 when every verdict is as expected, else 1."""
    say = session.say
    watcher = Watcher(say)
    rows: list[Row] = []
    ok = True
    docs = group_documents()
    name = str(docs[0]["metadata"]["name"])
    for number, (step, doc) in enumerate(zip(GROUP_STORY, docs, strict=True), 1):
        say("")
        say(f"== Step {number}/{len(GROUP_STORY)}: {step.title}", stamp=False)
        revision, record = run_step(session, doc, watcher, timeout)
        record = _full_record(session, name, revision) or record
        outcome = record.outcome if record else "none"
        baseline = (record.baseline_mode if record else None) or "none"
        problems = [] if outcome == "Passed" else [f"verdict {outcome}, not Passed"]
        if record is not None and baseline != step.baseline:
            problems.append(f"baseline {baseline}, not {step.baseline}")
        if not problems:
            problems = _check_group(session, name, revision, "default")
        for problem in problems:
            say(f"PROBLEM: {problem}")
        ok &= not problems
        mark = "ok" if not problems else "UNEXPECTED"
        say(
            f"step {number}: verdict {outcome}, baseline {baseline} (expected Passed, "
            f"{step.baseline}), promoted {mark}"
        )
        if reports is not None:
            say(write_report(session, name, "default", record, reports / f"group{number}.html"))
        rows.append(
            Row(
                step.label,
                revision,
                outcome,
                tuple(record.reasons) if record else (),
                figures(session, name, "default", record),
            )
        )
        if problems:
            break
    violations = group_violations(session.cluster, name, "default")
    say("")
    say(render(rows, session.time_scale), stamp=False)
    for problem in violations:
        say(f"PROBLEM: {problem}")
    if not violations:
        say("the serving Service only ever selected revisions with a Ready group")
    ok &= not violations
    say("RESULT: " + ("all verdicts as expected" if ok else "unexpected outcome"))
    return 0 if ok else 1
