"""The small views of a VLLMDeployment's children: pods, Deployments, Services, Jobs.

Each view is a pure function of the raw object (a dict, exactly as the API returns it), so
the planner never digs through nested dicts and tests build a cluster in a few lines. What a
view holds comes from the cluster (labels, annotations, status), which keeps a restart safe.
``rollout.observed`` gathers them into one ``Observed`` per resource.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vllm_operator.api.kinds import ChildKind
from vllm_operator.api.launch import LaunchRecord
from vllm_operator.api.resource import MAX_ATTEMPT_DIGITS
from vllm_operator.render import labels


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime, or None when absent or malformed."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def as_dict(value: object) -> dict[str, Any]:
    """``value`` if it is a mapping, else an empty one: raw objects may hold anything."""
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


@dataclass(frozen=True)
class ContainerView:
    """What a container is doing, or why it is not."""

    name: str
    ready: bool = False
    restart_count: int = 0
    waiting_reason: str | None = None
    waiting_message: str | None = None
    running: bool = False
    exit_code: int | None = None
    signal: int | None = None  # terminated.signal: the container was killed by a signal
    terminated_reason: str | None = None
    termination_message: str | None = None
    last_exit_code: int | None = None
    last_reason: str | None = None
    last_message: str | None = None
    # state.running.startedAt: when this instance of the container (a server) started.
    started_at: datetime | None = None
    init: bool = False  # an init container (native sidecars included)


@dataclass(frozen=True)
class PodView:
    """A pod of a revision or of a benchmark Job."""

    name: str
    labels: Mapping[str, str]
    phase: str = "Pending"
    unschedulable: str | None = None  # the scheduler's message when PodScheduled is False
    containers: tuple[ContainerView, ...] = ()
    owner_uid: str | None = None  # the controller ownerReference's uid (a Job's pod: the Job)
    node_name: str | None = None  # spec.nodeName, once scheduled
    ip: str | None = None  # status.podIP: where a canary reads its /metrics
    uid: str | None = None

    @property
    def ready(self) -> bool:
        return bool(self.containers) and all(c.ready for c in self.containers)

    @property
    def server(self) -> ContainerView | None:
        """The server container: the one named as the operator names it, else the first
        main container (never an init container or a native sidecar)."""
        mains = [c for c in self.containers if not c.init]
        return next(
            (c for c in mains if c.name == labels.SERVER_CONTAINER), mains[0] if mains else None
        )

    @property
    def restarts(self) -> int:
        """Restarts of the server container only: a sidecar's restarts say nothing of the
        server's counters (a canary step judges on them)."""
        server = self.server
        return server.restart_count if server is not None else 0

    @property
    def revision(self) -> str | None:
        return self.labels.get(labels.REVISION_LABEL)

    @property
    def job(self) -> str | None:
        return self.labels.get(labels.JOB_LABEL) or self.labels.get("job-name")

    @property
    def component(self) -> str | None:
        return self.labels.get(labels.COMPONENT_LABEL)


@dataclass(frozen=True)
class DeploymentView:
    """The Deployment of one revision."""

    name: str
    revision: str
    replicas: int
    ready_replicas: int = 0
    role: str | None = None
    started_at: datetime | None = None
    # Its launch-plan annotation (api/launch.py); None when absent or unreadable.
    launch: LaunchRecord | None = None
    image: str | None = None
    deleting: bool = False
    component: str | None = None
    # The raw pod template: a twin of this revision is started from it.
    template: Mapping[str, Any] = field(default_factory=dict)
    # The spec digest it was created from; None on Deployments older than the annotation.
    spec_digest: str | None = None
    # Its canary record (rollout/canary/phase.py), as written; None outside a canary.
    canary: str | None = None
    # "LeaderWorkerSet" for a multi-node revision: one replica is a group of pods, and
    # ``ready_replicas`` counts whole groups (the set's status, as LWS writes it).
    kind: ChildKind = "Deployment"
    # A LeaderWorkerSet's raw leaderWorkerTemplate: a twin group is started from it.
    group: Mapping[str, Any] = field(default_factory=dict)
    # Its benchmark figures as written (rollout/figures.py); None when absent.
    figures: str | None = None


@dataclass(frozen=True)
class ServiceView:
    """A Service of the resource; only its selector matters to the rollout."""

    name: str
    selector: Mapping[str, str]
    service_type: str = "ClusterIP"
    ports: tuple[Mapping[str, Any], ...] = ()
    # Its revision annotation: the stable revision while a canary's selector names none.
    annotated_revision: str | None = None

    @property
    def revision(self) -> str | None:
        named = self.selector.get(labels.REVISION_LABEL)
        if named is None and self.shared:
            return self.annotated_revision
        return named

    @property
    def shared(self) -> bool:
        """It selects every revision's server pods (a canary with traffic.mode replicas)."""
        return dict(self.selector) == labels.canary_selector(
            self.selector.get(labels.DEPLOYMENT_LABEL, "")
        )


@dataclass(frozen=True)
class JobView:
    """A benchmark Job: one gate attempt on one revision."""

    name: str
    revision: str
    attempt: int
    created_at: datetime | None = None
    complete: bool = False
    failed_reason: str | None = None  # the Failed condition's reason (DeadlineExceeded, ...)
    failed_message: str | None = None
    deleting: bool = False
    uid: str | None = None
    baseline_mode: str | None = None
    baseline_reason: str | None = None
    component: str | None = None

    @property
    def finished(self) -> bool:
        return self.complete or self.failed_reason is not None


def _container(status: Mapping[str, Any]) -> ContainerView:
    state = as_dict(status.get("state"))
    waiting = as_dict(state.get("waiting"))
    running = as_dict(state.get("running"))
    terminated = as_dict(state.get("terminated"))
    last = as_dict(as_dict(status.get("lastState")).get("terminated"))
    return ContainerView(
        name=str(status.get("name", "")),
        ready=bool(status.get("ready", False)),
        restart_count=_int(status.get("restartCount")),
        waiting_reason=waiting.get("reason") if waiting else None,
        waiting_message=waiting.get("message") if waiting else None,
        running="running" in state,
        exit_code=terminated.get("exitCode") if terminated else None,
        signal=terminated.get("signal") or None if terminated else None,
        terminated_reason=terminated.get("reason") if terminated else None,
        termination_message=terminated.get("message") if terminated else None,
        last_exit_code=last.get("exitCode") if last else None,
        last_reason=last.get("reason") if last else None,
        last_message=last.get("message") if last else None,
        started_at=parse_time(running.get("startedAt")) if running else None,
    )


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of the object's controller (its ownerReference with ``controller: true``)."""
    for raw in _list(as_dict(obj.get("metadata")).get("ownerReferences")):
        ref = as_dict(raw)
        if ref.get("controller") is True and isinstance(ref.get("uid"), str):
            return str(ref["uid"])
    return None


def holder(obj: Mapping[str, Any]) -> str:
    """Who holds an object, for a person: its controller (or first owner), else "no owner"."""
    refs = [as_dict(r) for r in _list(as_dict(obj.get("metadata")).get("ownerReferences"))]
    ref = next((r for r in refs if r.get("controller") is True), refs[0] if refs else None)
    if ref is None:
        return "no owner (not created by this VLLMDeployment)"
    return f"{ref.get('kind', '?')} {ref.get('name', '?')} (uid {ref.get('uid', '?')})"


def owned_by(uid: str | None, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is controlled by the resource with ``uid`` (its ownerReference)."""
    return uid is not None and controller_uid(obj) == uid


def pod_view(obj: Mapping[str, Any]) -> PodView:
    meta = as_dict(obj.get("metadata"))
    status = as_dict(obj.get("status"))
    unschedulable = None
    for raw in _list(status.get("conditions")):
        cond = as_dict(raw)
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            unschedulable = str(cond.get("message") or cond.get("reason") or "Unschedulable")
    containers = tuple(
        dataclasses.replace(_container(as_dict(c)), init=True)
        for c in _list(status.get("initContainerStatuses"))
    ) + tuple(_container(as_dict(c)) for c in _list(status.get("containerStatuses")))
    node = as_dict(obj.get("spec")).get("nodeName")
    return PodView(
        name=str(meta.get("name", "")),
        labels=as_dict(meta.get("labels")),
        phase=str(status.get("phase", "Pending")),
        unschedulable=unschedulable,
        containers=containers,
        owner_uid=controller_uid(obj),
        node_name=node if isinstance(node, str) and node else None,
        ip=_str_or_none(status.get("podIP")),
        uid=_str_or_none(meta.get("uid")),
    )


def deployment_view(obj: Mapping[str, Any]) -> DeploymentView | None:
    meta = as_dict(obj.get("metadata"))
    meta_labels = as_dict(meta.get("labels"))
    annotations = as_dict(meta.get("annotations"))
    revision = meta_labels.get(labels.REVISION_LABEL)
    if not isinstance(revision, str):
        return None
    spec = as_dict(obj.get("spec"))
    status = as_dict(obj.get("status"))
    group = (
        as_dict(spec.get("leaderWorkerTemplate")) if obj.get("kind") == "LeaderWorkerSet" else {}
    )
    # A group's leader template: its image, its port, and what a twin group relabels.
    template = as_dict(group.get("leaderTemplate")) if group else as_dict(spec.get("template"))
    containers = _list(as_dict(template.get("spec")).get("containers"))
    image = as_dict(containers[0]).get("image") if containers else None
    started = parse_time(annotations.get(labels.STARTED_ANNOTATION)) or parse_time(
        meta.get("creationTimestamp")
    )
    return DeploymentView(
        name=str(meta.get("name", "")),
        revision=revision,
        replicas=_int(spec.get("replicas", 1)),
        ready_replicas=_int(status.get("readyReplicas")),
        role=meta_labels.get(labels.ROLE_LABEL),
        started_at=started,
        launch=LaunchRecord.from_annotation(annotations.get(labels.LAUNCH_PLAN_ANNOTATION)),
        image=image if isinstance(image, str) else None,
        deleting=bool(meta.get("deletionTimestamp")),
        component=meta_labels.get(labels.COMPONENT_LABEL),
        template=template,
        spec_digest=_str_or_none(annotations.get(labels.SPEC_DIGEST_ANNOTATION)),
        canary=_str_or_none(annotations.get(labels.CANARY_ANNOTATION)),
        kind="LeaderWorkerSet" if group else "Deployment",
        group=group,
        figures=_str_or_none(annotations.get(labels.FIGURES_ANNOTATION)),
    )


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def service_view(obj: Mapping[str, Any]) -> ServiceView:
    meta = as_dict(obj.get("metadata"))
    spec = as_dict(obj.get("spec"))
    return ServiceView(
        name=str(meta.get("name", "")),
        selector=as_dict(spec.get("selector")),
        service_type=str(spec.get("type", "ClusterIP")),
        ports=tuple(as_dict(p) for p in _list(spec.get("ports"))),
        annotated_revision=_str_or_none(
            as_dict(meta.get("annotations")).get(labels.REVISION_ANNOTATION)
        ),
    )


def job_view(obj: Mapping[str, Any]) -> JobView | None:
    meta = as_dict(obj.get("metadata"))
    meta_labels = as_dict(meta.get("labels"))
    annotations = as_dict(meta.get("annotations"))
    revision = meta_labels.get(labels.REVISION_LABEL)
    if not isinstance(revision, str):
        return None
    # The attempt is in the Job's name too, which nobody can edit: the annotation counts only
    # while it is a number a Job name has room for.
    attempt = (
        _attempt(annotations.get(labels.ATTEMPT_ANNOTATION))
        or _attempt(str(meta.get("name", "")).rsplit("-", 1)[-1])
        or 1
    )
    status = as_dict(obj.get("status"))
    complete = False
    failed_reason = failed_message = None
    for raw in _list(status.get("conditions")):
        cond = as_dict(raw)
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "Complete":
            complete = True
        elif cond.get("type") == "Failed":
            failed_reason = str(cond.get("reason") or "Failed")
            failed_message = str(cond.get("message") or "")
    return JobView(
        name=str(meta.get("name", "")),
        revision=revision,
        attempt=attempt,
        created_at=parse_time(meta.get("creationTimestamp")),
        complete=complete,
        failed_reason=failed_reason,
        failed_message=failed_message,
        deleting=bool(meta.get("deletionTimestamp")),
        uid=meta.get("uid") if isinstance(meta.get("uid"), str) else None,
        baseline_mode=_one_of(annotations.get(labels.BASELINE_MODE_ANNOTATION), ("twin", "stored")),
        baseline_reason=_str_or_none(annotations.get(labels.BASELINE_REASON_ANNOTATION)),
        component=_str_or_none(meta_labels.get(labels.COMPONENT_LABEL)),
    )


def _attempt(text: object) -> int:
    """A gate attempt (1 to 999), or 0 when ``text`` is not one."""
    if not isinstance(text, str) or not text.isdecimal() or len(text) > MAX_ATTEMPT_DIGITS:
        return 0
    return int(text) if int(text) >= 1 else 0


def _one_of(value: object, allowed: tuple[str, ...]) -> str | None:
    return value if isinstance(value, str) and value in allowed else None
