"""What the planner sees: a typed, read-only view of one VLLMDeployment and its children.

The kube layer lists the raw objects (dicts, exactly as the API returns them); ``observe``
turns them into these small views so the planner never digs through nested dicts and the
unit tests can build a cluster state in a few lines. Nothing here talks to the API: the
views are pure functions of the dicts, and every field the planner decides on comes from
the cluster (labels, annotations, status), which is what makes a restart safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vllm_operator.api.launch import LaunchRecord
from vllm_operator.api.resource import MAX_ATTEMPT_DIGITS
from vllm_operator.render import labels
from vllm_operator.rollout.scaling_view import (
    AutoscalerView,
    BudgetView,
    autoscaler_view,
    budget_view,
)

# Annotations and labels the operator adds to what ``render`` produces.
STARTED_ANNOTATION = labels.STARTED_ANNOTATION
ATTEMPT_ANNOTATION = labels.ATTEMPT_ANNOTATION
JOB_LABEL = labels.JOB_LABEL
# twin or stored: what the Job measured its candidate against (set when it is created).
BASELINE_MODE_ANNOTATION = labels.BASELINE_MODE_ANNOTATION
# Why that baseline (mode auto: why the twin was not used), for the gate record.
BASELINE_REASON_ANNOTATION = labels.BASELINE_REASON_ANNOTATION
# The spec digest a revision's Deployment was created from (render/revision.py spec_digest).
SPEC_DIGEST_ANNOTATION = labels.SPEC_DIGEST_ANNOTATION


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime, or None when absent or malformed."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _dict(value: object) -> dict[str, Any]:
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
    def restarts(self) -> int:
        return sum(c.restart_count for c in self.containers)

    @property
    def revision(self) -> str | None:
        return self.labels.get(labels.REVISION_LABEL)

    @property
    def job(self) -> str | None:
        return self.labels.get(JOB_LABEL) or self.labels.get("job-name")

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
    # Its canary record (rollout/canary.py), as written; None outside a canary.
    canary: str | None = None


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

    @property
    def finished(self) -> bool:
        return self.complete or self.failed_reason is not None


@dataclass(frozen=True)
class Observed:
    """One VLLMDeployment and everything the operator created for it."""

    body: Mapping[str, Any]
    deployments: tuple[DeploymentView, ...] = ()
    services: tuple[ServiceView, ...] = ()
    jobs: tuple[JobView, ...] = ()
    pods: tuple[PodView, ...] = ()
    # Job name -> its pod's log, read only for finished Jobs without a termination message.
    logs: Mapping[str, str] = field(default_factory=dict)
    # Job name -> the newest progress event of its running pod (api/progress.py), as the
    # shell last read it (at most every ``PROGRESS_SECONDS``, scaled).
    progress: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # (kind, name) of a child name this resource needs, held by an object it does not own
    # -> who holds it ("VLLMDeployment beta", "no owner"). The shell looks these up.
    foreign: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # Twins of the stable revision (component twin), kept apart from the revisions'
    # Deployments so nothing mistakes a twin for the revision it copies.
    twins: tuple[DeploymentView, ...] = ()
    # Node name -> its nvidia.com/gpu.product label, for the nodes the shell could read.
    node_gpu: Mapping[str, str] = field(default_factory=dict)
    # The autoscaler(s) (HPA, KEDA ScaledObject) and PodDisruptionBudgets it owns.
    autoscalers: tuple[AutoscalerView, ...] = ()
    budgets: tuple[BudgetView, ...] = ()
    # Pod name -> its /metrics page as read by the shell for a canary step (text), or why
    # it could not be read (``ScrapeFailure``); only while a step starts or ends.
    scrapes: Mapping[str, Any] = field(default_factory=dict)
    # HTTPRoute name -> the object, for a canary with traffic.mode gatewayAPI (the shell
    # reads the one the spec names, only while a candidate exists).
    routes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(_dict(self.body.get("metadata")).get("name", ""))

    @property
    def namespace(self) -> str:
        return str(_dict(self.body.get("metadata")).get("namespace", "default"))

    @property
    def uid(self) -> str | None:
        uid = _dict(self.body.get("metadata")).get("uid")
        return uid if isinstance(uid, str) else None

    @property
    def generation(self) -> int | None:
        gen = _dict(self.body.get("metadata")).get("generation")
        return gen if isinstance(gen, int) else None

    @property
    def annotations(self) -> Mapping[str, str]:
        return _dict(_dict(self.body.get("metadata")).get("annotations"))

    def service(self, name: str) -> ServiceView | None:
        return next((s for s in self.services if s.name == name), None)

    def owned_children(self) -> set[tuple[str, str]]:
        """(kind, name) of every child observed as this resource's own."""
        found = {("Deployment", d.name) for d in (*self.deployments, *self.twins)}
        found |= {("Service", s.name) for s in self.services}
        found |= {("Job", j.name) for j in self.jobs}
        found |= {(a.kind, a.name) for a in self.autoscalers}
        found |= {("PodDisruptionBudget", b.name) for b in self.budgets}
        return found

    def deployment_of(self, revision: str) -> DeploymentView | None:
        return next((d for d in self.deployments if d.revision == revision), None)

    def pods_of_revision(self, revision: str) -> list[PodView]:
        return [
            p
            for p in self.pods
            if p.revision == revision
            and p.component not in (labels.COMPONENT_BENCHMARK, labels.COMPONENT_TWIN)
        ]

    def pods_of_twin(self, revision: str) -> list[PodView]:
        return [
            p for p in self.pods if p.revision == revision and p.component == labels.COMPONENT_TWIN
        ]

    def twin_of(self, revision: str) -> DeploymentView | None:
        return next((d for d in self.twins if d.revision == revision), None)

    def pods_of_job(self, job: str) -> list[PodView]:
        return [p for p in self.pods if p.job == job]

    def job_pods(self, job: JobView) -> list[PodView]:
        """The Job's own pods: labelled with its name and, when its uid is known, controlled
        by it (a pod that only copies the labels is not the Job's)."""
        pods = self.pods_of_job(job.name)
        return pods if job.uid is None else [p for p in pods if p.owner_uid == job.uid]


def _container(status: Mapping[str, Any]) -> ContainerView:
    state = _dict(status.get("state"))
    waiting = _dict(state.get("waiting"))
    running = _dict(state.get("running"))
    terminated = _dict(state.get("terminated"))
    last = _dict(_dict(status.get("lastState")).get("terminated"))
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
    for raw in _list(_dict(obj.get("metadata")).get("ownerReferences")):
        ref = _dict(raw)
        if ref.get("controller") is True and isinstance(ref.get("uid"), str):
            return str(ref["uid"])
    return None


def holder(obj: Mapping[str, Any]) -> str:
    """Who holds an object, for a person: its controller (or first owner), else "no owner"."""
    refs = [_dict(r) for r in _list(_dict(obj.get("metadata")).get("ownerReferences"))]
    ref = next((r for r in refs if r.get("controller") is True), refs[0] if refs else None)
    if ref is None:
        return "no owner (not created by this VLLMDeployment)"
    return f"{ref.get('kind', '?')} {ref.get('name', '?')} (uid {ref.get('uid', '?')})"


def owned_by(uid: str | None, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is controlled by the resource with ``uid`` (its ownerReference)."""
    return uid is not None and controller_uid(obj) == uid


def pod_view(obj: Mapping[str, Any]) -> PodView:
    meta = _dict(obj.get("metadata"))
    status = _dict(obj.get("status"))
    unschedulable = None
    for raw in _list(status.get("conditions")):
        cond = _dict(raw)
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            unschedulable = str(cond.get("message") or cond.get("reason") or "Unschedulable")
    containers = tuple(
        _container(_dict(c))
        for c in _list(status.get("initContainerStatuses")) + _list(status.get("containerStatuses"))
    )
    node = _dict(obj.get("spec")).get("nodeName")
    return PodView(
        name=str(meta.get("name", "")),
        labels=_dict(meta.get("labels")),
        phase=str(status.get("phase", "Pending")),
        unschedulable=unschedulable,
        containers=containers,
        owner_uid=controller_uid(obj),
        node_name=node if isinstance(node, str) and node else None,
        ip=_str_or_none(status.get("podIP")),
        uid=_str_or_none(meta.get("uid")),
    )


def deployment_view(obj: Mapping[str, Any]) -> DeploymentView | None:
    meta = _dict(obj.get("metadata"))
    meta_labels = _dict(meta.get("labels"))
    annotations = _dict(meta.get("annotations"))
    revision = meta_labels.get(labels.REVISION_LABEL)
    if not isinstance(revision, str):
        return None
    spec = _dict(obj.get("spec"))
    status = _dict(obj.get("status"))
    template = _dict(spec.get("template"))
    containers = _list(_dict(template.get("spec")).get("containers"))
    image = _dict(containers[0]).get("image") if containers else None
    started = parse_time(annotations.get(STARTED_ANNOTATION)) or parse_time(
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
        spec_digest=_str_or_none(annotations.get(SPEC_DIGEST_ANNOTATION)),
        canary=_str_or_none(annotations.get(labels.CANARY_ANNOTATION)),
    )


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def service_view(obj: Mapping[str, Any]) -> ServiceView:
    meta = _dict(obj.get("metadata"))
    spec = _dict(obj.get("spec"))
    return ServiceView(
        name=str(meta.get("name", "")),
        selector=_dict(spec.get("selector")),
        service_type=str(spec.get("type", "ClusterIP")),
        ports=tuple(_dict(p) for p in _list(spec.get("ports"))),
        annotated_revision=_str_or_none(
            _dict(meta.get("annotations")).get(labels.REVISION_ANNOTATION)
        ),
    )


def job_view(obj: Mapping[str, Any]) -> JobView | None:
    meta = _dict(obj.get("metadata"))
    meta_labels = _dict(meta.get("labels"))
    annotations = _dict(meta.get("annotations"))
    revision = meta_labels.get(labels.REVISION_LABEL)
    if not isinstance(revision, str):
        return None
    # The attempt is in the Job's name too, which nobody can edit: the annotation counts only
    # while it is a number a Job name has room for.
    attempt = (
        _attempt(annotations.get(ATTEMPT_ANNOTATION))
        or _attempt(str(meta.get("name", "")).rsplit("-", 1)[-1])
        or 1
    )
    status = _dict(obj.get("status"))
    complete = False
    failed_reason = failed_message = None
    for raw in _list(status.get("conditions")):
        cond = _dict(raw)
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
        baseline_mode=_one_of(annotations.get(BASELINE_MODE_ANNOTATION), ("twin", "stored")),
        baseline_reason=_str_or_none(annotations.get(BASELINE_REASON_ANNOTATION)),
    )


def _attempt(text: object) -> int:
    """A gate attempt (1 to 999), or 0 when ``text`` is not one."""
    if not isinstance(text, str) or not text.isdecimal() or len(text) > MAX_ATTEMPT_DIGITS:
        return 0
    return int(text) if int(text) >= 1 else 0


def _one_of(value: object, allowed: tuple[str, ...]) -> str | None:
    return value if isinstance(value, str) and value in allowed else None


def observe(
    body: Mapping[str, Any],
    *,
    deployments: Sequence[Mapping[str, Any]] = (),
    services: Sequence[Mapping[str, Any]] = (),
    jobs: Sequence[Mapping[str, Any]] = (),
    pods: Sequence[Mapping[str, Any]] = (),
    logs: Mapping[str, str] | None = None,
    progress: Mapping[str, Mapping[str, Any]] | None = None,
    foreign: Mapping[tuple[str, str], str] | None = None,
    node_gpu: Mapping[str, str] | None = None,
    autoscalers: Sequence[Mapping[str, Any]] = (),
    budgets: Sequence[Mapping[str, Any]] = (),
    scrapes: Mapping[str, Any] | None = None,
) -> Observed:
    """Build the planner's view from raw API objects (already filtered to this resource)."""
    all_views = tuple(v for v in (deployment_view(d) for d in deployments) if v is not None)
    dep_views = tuple(v for v in all_views if v.component != labels.COMPONENT_TWIN)
    twin_views = tuple(v for v in all_views if v.component == labels.COMPONENT_TWIN)
    job_views = tuple(v for v in (job_view(j) for j in jobs) if v is not None)
    return Observed(
        body=body,
        deployments=tuple(sorted(dep_views, key=lambda d: d.name)),
        services=tuple(service_view(s) for s in services),
        jobs=tuple(sorted(job_views, key=lambda j: (j.revision, j.attempt))),
        pods=tuple(pod_view(p) for p in pods),
        logs=dict(logs or {}),
        progress=dict(progress or {}),
        foreign=dict(foreign or {}),
        twins=tuple(sorted(twin_views, key=lambda d: d.name)),
        node_gpu=dict(node_gpu or {}),
        autoscalers=tuple(sorted((autoscaler_view(a) for a in autoscalers), key=_kind_name)),
        budgets=tuple(sorted((budget_view(b) for b in budgets), key=lambda b: b.name)),
        scrapes=dict(scrapes or {}),
    )


def _kind_name(view: AutoscalerView) -> tuple[str, str]:
    return (view.kind, view.name)


def nodes_needing_gpu_product(observed: Observed) -> list[str]:
    """Nodes of the candidates' and twins' pods whose GPU product the planner lacks.

    Only the pods a gate compares (candidate-role Deployments and twins), so the shell reads
    a handful of Nodes during a gate and none at rest.
    """
    revisions = {d.revision for d in observed.deployments if d.role == labels.ROLE_CANDIDATE}
    twins = {d.revision for d in observed.twins}
    wanted: set[str] = set()
    for pod in observed.pods:
        if pod.node_name is None or pod.node_name in observed.node_gpu:
            continue
        compared = twins if pod.component == labels.COMPONENT_TWIN else revisions
        if pod.component in (labels.COMPONENT_TWIN, labels.COMPONENT_SERVER) and (
            pod.revision in compared
        ):
            wanted.add(pod.node_name)
    return sorted(wanted)


PROGRESS_SECONDS = 30.0
"""How often a running benchmark's progress is read and reported (times the deadline scale)."""


def running_job_pods(observed: Observed) -> list[tuple[str, str]]:
    """(job, pod) of each running benchmark pod: whose log tail says where the run is."""
    wanted: list[tuple[str, str]] = []
    for job in observed.jobs:
        if job.finished or job.deleting:
            continue
        wanted += [(job.name, pod.name) for pod in observed.job_pods(job) if pod.phase == "Running"]
    return wanted


def finished_jobs_needing_logs(observed: Observed) -> list[tuple[str, str]]:
    """(job, pod) pairs whose summary must come from the log: finished, no termination message.

    The kube layer reads only these logs, so a reconcile costs no log reads in the usual case.
    """
    wanted: list[tuple[str, str]] = []
    for job in observed.jobs:
        if not job.finished:
            continue
        for pod in observed.job_pods(job):
            if pod.containers and not any(c.termination_message for c in pod.containers):
                wanted.append((job.name, pod.name))
    return wanted
