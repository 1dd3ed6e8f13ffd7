"""What the planner sees: a typed, read-only view of one VLLMDeployment and its children.

The kube layer lists the raw objects (dicts, exactly as the API returns them); ``observe``
turns them into the small views of ``rollout.views`` and gathers them into one ``Observed``,
so the planner never digs through nested dicts and the unit tests can build a cluster state
in a few lines. Nothing here talks to the API, and every field the planner decides on comes
from the cluster (labels, annotations, status), which is what makes a restart safe. The
shell's questions about what to read next (GPU products, logs) are answered here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vllm_operator.render import labels
from vllm_operator.rollout.scaling_view import (
    AutoscalerView,
    BudgetView,
    autoscaler_view,
    budget_view,
)
from vllm_operator.rollout.views import (
    DeploymentView,
    JobView,
    PodView,
    ServiceView,
    as_dict,
    deployment_view,
    job_view,
    pod_view,
    service_view,
)


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
    # A/A calibration Jobs (component calibration), apart from the gate's: never judged,
    # never retired by the rollout (rollout/calibration.py owns them).
    calibration_jobs: tuple[JobView, ...] = ()
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
    # Whether the cluster serves LeaderWorkerSets (their CRD installed), as API discovery
    # answered the shell; asked only for a multi-node spec under --multi-node, else True.
    groups_served: bool = True

    @property
    def name(self) -> str:
        return str(as_dict(self.body.get("metadata")).get("name", ""))

    @property
    def namespace(self) -> str:
        return str(as_dict(self.body.get("metadata")).get("namespace", "default"))

    @property
    def uid(self) -> str | None:
        uid = as_dict(self.body.get("metadata")).get("uid")
        return uid if isinstance(uid, str) else None

    @property
    def generation(self) -> int | None:
        gen = as_dict(self.body.get("metadata")).get("generation")
        return gen if isinstance(gen, int) else None

    @property
    def annotations(self) -> Mapping[str, str]:
        return as_dict(as_dict(self.body.get("metadata")).get("annotations"))

    def service(self, name: str) -> ServiceView | None:
        return next((s for s in self.services if s.name == name), None)

    def owned_children(self) -> set[tuple[str, str]]:
        """(kind, name) of every child observed as this resource's own."""
        found: set[tuple[str, str]] = {(d.kind, d.name) for d in (*self.deployments, *self.twins)}
        found |= {("Service", s.name) for s in self.services}
        found |= {("Job", j.name) for j in (*self.jobs, *self.calibration_jobs)}
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
            and p.component
            not in (labels.COMPONENT_BENCHMARK, labels.COMPONENT_TWIN, labels.COMPONENT_CALIBRATION)
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
    every_job = tuple(v for v in (job_view(j) for j in jobs) if v is not None)
    job_views = tuple(j for j in every_job if j.component != labels.COMPONENT_CALIBRATION)
    calibration = tuple(j for j in every_job if j.component == labels.COMPONENT_CALIBRATION)
    return Observed(
        body=body,
        deployments=tuple(sorted(dep_views, key=lambda d: d.name)),
        services=tuple(service_view(s) for s in services),
        jobs=tuple(sorted(job_views, key=lambda j: (j.revision, j.attempt))),
        calibration_jobs=tuple(sorted(calibration, key=lambda j: j.name)),
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
