"""The twin of the stable revision during a gate: start it, wait for it, remove it.

A twin exists only while a gate needs it: a gate in ``twin`` or ``auto`` mode on a candidate
(``baseline.py`` decides which attempts measure it), with a
stable revision whose Deployment the operator can copy. Every pass decides that afresh
(``Pass.twin``), and ``remove`` deletes any twin the pass does not keep, so the twin goes
whatever ended the gate (Passed, Failed, Error, an abort, a new spec) and after a restart
mid-gate; the resource's deletion takes it too (ownerReferences). Its pods never carry the
serving label (``render.twin``), so the serving Service cannot send it traffic.

Where each side ran (node, GPU product, vLLM version) is read here from the pods, the Nodes
the shell could read, and the launch plans, for the Job's flags and the gate record.
"""

from __future__ import annotations

from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.summary import Placement
from vllm_operator.render import labels
from vllm_operator.render.names import twin_service_name
from vllm_operator.render.twin import (
    render_twin_deployment,
    render_twin_group,
    render_twin_service,
    template_port,
    twin_url,
)
from vllm_operator.rollout import causes, ledger, waiting
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.objects import ensure_service
from vllm_operator.rollout.status import Outcome
from vllm_operator.rollout.views import DeploymentView, PodView


def wanted(state: Pass, vd: VLLMDeployment, candidate: str, stable: str | None) -> bool:
    """Whether a gate on ``candidate`` may measure a twin of ``stable`` (mode twin or auto;
    ``baseline.keeps_twin`` decides for the attempt)."""
    gate = vd.spec.gate
    if not gate.enabled or gate.baseline.mode == "stored" or stable is None or stable == candidate:
        return False
    source = state.observed.deployment_of(stable)
    return source is not None and bool(source.template)


def ensure(
    state: Pass, vd: VLLMDeployment, candidate: str, stable: str, *, purpose: str | None = None
) -> None:
    """Keep the twin of ``stable`` (and its Service) for this pass; create what is missing
    (``purpose``: what it is for, when not the gate on ``candidate``)."""
    state.twin = stable
    observed = state.observed
    source = observed.deployment_of(stable)
    assert source is not None  # checked by ``wanted``
    port = template_port(source.template)
    ensure_service(
        state, render_twin_service(observed.name, observed.namespace, stable, port), stable
    )
    if observed.twin_of(stable) is not None:
        return
    replicas = vd.spec.rollout.candidate_replicas
    if source.group:  # the stable revision is a multi-node group: its twin is a whole group
        manifest = render_twin_group(
            observed.name, observed.namespace, stable, source.group, replicas
        )
    else:
        manifest = render_twin_deployment(
            observed.name, observed.namespace, stable, source.template, replicas
        )
    manifest["metadata"]["annotations"][labels.STARTED_ANNOTATION] = ledger.timestamp(state.now)
    state.create(manifest)
    state.event(
        "Normal",
        EventReason.TwinCreated,
        f"twin of stable revision {stable} ({replicas} replica(s), no traffic) for "
        + (purpose or f"the gate on revision {candidate}"),
    )


def url(state: Pass, stable: str) -> str:
    """Where the benchmark reaches the twin."""
    source = state.observed.deployment_of(stable)
    port = template_port(source.template) if source is not None else template_port({})
    return twin_url(state.observed.name, state.observed.namespace, port)


def starting(state: Pass, vd: VLLMDeployment, stable: str) -> DeploymentView | Outcome | None:
    """None once the twin is Ready; an Outcome while it does not exist yet (or is going);
    else its Deployment, running but not Ready: each mode decides how long to wait."""
    twin = state.observed.twin_of(stable)
    if twin is not None and not twin.deleting:
        return None if twin.ready_replicas >= vd.spec.rollout.candidate_replicas else twin
    state.after(1.0)
    return Outcome(
        "Progressing",
        f"starting the twin of stable revision {stable}",
        ConditionReason.TwinStarting,
    )


def wait(state: Pass, vd: VLLMDeployment, candidate: str, stable: str) -> Outcome | None:
    """None once the twin is Ready; else where it stands (an Error past the deadline)."""
    twin = starting(state, vd, stable)
    if not isinstance(twin, DeploymentView):
        return twin
    want = vd.spec.rollout.candidate_replicas
    return waiting.until_ready(
        state,
        side="twin",
        candidate=candidate,
        stable=stable,
        ready=twin.ready_replicas,
        wanted=want,
        started_at=twin.started_at,
        cause=causes.pods_cause(state.observed.pods_of_twin(stable)),
        deadline_seconds=vd.spec.rollout.progress_deadline_seconds,
    )


def remove(state: Pass) -> None:
    """Delete every twin this pass does not keep, and the twin Service when none is kept."""
    for twin in state.observed.twins:
        if twin.deleting or twin.revision == state.twin:
            continue
        state.delete(twin.kind, twin.name)
        state.event(
            "Normal",
            EventReason.TwinRemoved,
            f"twin of revision {twin.revision} deleted: {twin.kind} {twin.name}",
        )
    service = state.observed.service(twin_service_name(state.name))
    if state.twin is None and service is not None:
        state.delete("Service", service.name)


def _joined(values: set[str]) -> str | None:
    return ",".join(sorted(values)) if values else None


def placement(state: Pass, revision: str, pods: list[PodView]) -> Placement:
    """Where ``pods`` of ``revision`` run, as far as the cluster tells."""
    nodes = {p.node_name for p in pods if p.node_name}
    gpus = {state.observed.node_gpu.get(n, "") for n in nodes} - {""}
    dep = state.observed.deployment_of(revision)
    launch = dep.launch if dep is not None else None
    return Placement(
        node=_joined(nodes),
        gpu_product=_joined(gpus),
        vllm_version=launch.version if launch is not None and launch.version else None,
    )


def candidate_placement(state: Pass, revision: str) -> Placement:
    return placement(state, revision, state.observed.pods_of_revision(revision))


def twin_placement(state: Pass, stable: str) -> Placement:
    return placement(state, stable, state.observed.pods_of_twin(stable))


def flags(candidate: Placement, baseline: Placement | None) -> dict[str, str]:
    """``bench`` placement flags (without ``--``) for what is known."""
    out: dict[str, str] = {}
    for side, where in (("candidate", candidate), ("baseline", baseline)):
        if where is None:
            continue
        if where.node:
            out[f"{side}-node"] = where.node
        if where.gpu_product:
            out[f"{side}-gpu-product"] = where.gpu_product
    return out


def recorded(known: Placement, measured: Placement | None) -> Placement:
    """What a gate record says about one side: node and GPU product as the operator read
    them (the bench only repeats its flags), the vLLM version as the bench saw it on
    ``/version`` (the launch plan's version when the bench did not say)."""
    if measured is None:
        return known
    return Placement(
        node=known.node or measured.node,
        gpu_product=known.gpu_product or measured.gpu_product,
        vllm_version=measured.vllm_version or known.vllm_version,
    )
