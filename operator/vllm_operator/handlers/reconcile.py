"""One reconcile pass: read the cluster, ask the pure planner, apply its plan.

This is the whole shell around ``rollout.plan``: no decision is taken here. The cluster is
read from the watch-fed caches (``handlers.caches``: no API request to observe a resource;
only a finished Job's log, a Node's GPU label and the holder of a name about to be created
are read directly, each only when needed). The order of writes is the planner's contract:
status first (a verdict is on record before anything it condemns is deleted), then the
handled-requests annotation, then the actions (each idempotent: 409 on create and 404 on
delete mean "already so"), then Events (best effort). Every write is made only when it
changes what the cache holds (``kube.changes``), and is recorded in the caches so the next
pass sees it even before the watch brings it back (``kube.own_writes``).
A planner that raises on what the API accepted does not fail the pass: ``rollout.stopped``
turns the exception into an ``InvalidSpec`` status and Event, so no status stays empty and
no retry loop runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from vllm_operator.api.kinds import CHILD_KINDS as CHILD_KIND_NAMES
from vllm_operator.api.progress import latest_event
from vllm_operator.api.reasons import EventReason
from vllm_operator.config import OperatorConfig
from vllm_operator.handlers.caches import (
    VLLMD_CACHE,
    Caches,
    ObservedChildren,
    observed_children,
    slim_pod,
)
from vllm_operator.kube.changes import changes
from vllm_operator.kube.client import Kube, KubeError, KubeTransientError
from vllm_operator.kube.prometheus import PrometheusReader
from vllm_operator.kube.scrape import MetricsReader
from vllm_operator.metrics import OperatorMetrics
from vllm_operator.render import labels
from vllm_operator.rollout import (
    Create,
    Delete,
    Patch,
    Plan,
    Settings,
    observe,
    plan,
)
from vllm_operator.rollout.canary import phase as canary
from vllm_operator.rollout.canary import reads as canary_reads
from vllm_operator.rollout.observed import (
    PROGRESS_SECONDS,
    Observed,
    finished_jobs_needing_logs,
    nodes_needing_gpu_product,
    running_job_pods,
)
from vllm_operator.rollout.status import merge_patch
from vllm_operator.rollout.stopped import unhandled
from vllm_operator.rollout.trust import BENCH_CONTAINER
from vllm_operator.rollout.views import holder, owned_by, pod_view

logger = logging.getLogger(__name__)

# Node name -> GPU product entries kept; a label that rarely changes, read once per node.
NODE_CACHE_LIMIT = 1024
# Finished Jobs whose pods were read fresh (uid -> resourceVersion); cleared when full.
REFRESHED_JOBS_LIMIT = 1024
# How long API discovery's "LeaderWorkerSets are served" is trusted; a "no" is asked again
# on every pass of a multi-node resource (the planner requeues it: rollout/stopped.py).
GROUPS_SERVED_SECONDS = 300.0

Clock = Callable[[], datetime]
Hook = Callable[[str, str, Plan], None]
Planner = Callable[[Observed, datetime, Settings], Plan]


def utc_now() -> datetime:
    return datetime.now(UTC)


def _owned_by(uid: str | None, obj: Mapping[str, Any]) -> bool:
    """Only objects this resource controls are its children; a look-alike is not."""
    return owned_by(uid, obj)


CHILD_KINDS = frozenset(CHILD_KIND_NAMES)


def annotations_to_write(
    body: Mapping[str, Any], wanted: Mapping[str, str | None]
) -> dict[str, str | None]:
    """The part of the plan's annotations that changes the resource (None: remove)."""
    meta = body.get("metadata")
    current = meta.get("annotations") if isinstance(meta, Mapping) else None
    have: Mapping[str, Any] = current if isinstance(current, Mapping) else {}
    return {
        key: value
        for key, value in wanted.items()
        if (key in have if value is None else have.get(key) != value)
    }


class Reconciler:
    """Reconciles one VLLMDeployment per call; safe to call again at any time."""

    def __init__(
        self,
        kube: Kube,
        config: OperatorConfig,
        metrics: OperatorMetrics,
        *,
        clock: Clock = utc_now,
        on_plan: Hook | None = None,
        planner: Planner = plan,
        caches: Caches | None = None,
    ) -> None:
        self.kube = kube
        self.caches = caches if caches is not None else Caches()
        self.planner = planner
        # The config is the planner's Settings (it extends them): nothing is copied.
        self.settings: Settings = config
        self.metrics = metrics
        self.clock = clock
        self.on_plan = on_plan
        self.node_gpu: dict[str, str] = {}  # "" when unknown (no label, gone, forbidden)
        # Job uid -> the Job's resourceVersion when its pods were last read fresh.
        self.refreshed_jobs: dict[str, str] = {}
        # (namespace, Job) -> (when its log was last read, the newest progress event).
        self.progress: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self.progress_seconds = PROGRESS_SECONDS * config.deadline_scale
        self.metrics_reader = MetricsReader(config.pod_address)
        self.groups_seen: float | None = None  # when discovery last said LWS is served
        self.prometheus_reader = PrometheusReader()

    async def _read_progress(
        self, namespace: str, observed: Observed
    ) -> dict[str, Mapping[str, Any]]:
        """The newest progress event of each running benchmark pod, its log tail read at
        most every ``progress_seconds`` per Job (a quick ``kubectl logs --tail``)."""
        running = running_job_pods(observed)
        jobs = {job for job, _ in running}
        own = {job.name for job in observed.jobs}  # this resource's Jobs, running or not
        for key in [k for k in self.progress if k[0] == namespace and k[1] in own - jobs]:
            del self.progress[key]
        if len(self.progress) >= NODE_CACHE_LIMIT:
            self.progress.clear()
        now = time.monotonic()
        for job, pod in running:
            last = self.progress.get((namespace, job))
            if last is not None and now - last[0] < self.progress_seconds:
                continue
            try:
                tail = await self.kube.pod_log(
                    namespace, pod, tail_lines=20, container=BENCH_CONTAINER
                )
            except KubeError as exc:
                logger.info("no progress from %s/%s: %s", namespace, pod, exc)
                tail = ""
            event = latest_event(tail)
            if event is None and last is not None:
                event = last[1]
            self.progress[(namespace, job)] = (now, event or {})
        return {
            job: event
            for (ns, job), (_, event) in self.progress.items()
            if ns == namespace and job in jobs and event
        }

    async def _groups_served(self, body: Mapping[str, Any]) -> bool:
        """Whether the cluster serves LeaderWorkerSets, asked of API discovery only where it
        matters: under ``--multi-node``, for a spec with ``nodes`` > 1. The planner refuses
        such a spec while they are not served, before creating anything of its revision."""
        resources = (body.get("spec") or {}).get("resources")
        nodes = resources.get("nodes") if isinstance(resources, Mapping) else None
        if not self.settings.multi_node or not isinstance(nodes, int) or nodes <= 1:
            return True
        now = time.monotonic()
        if self.groups_seen is not None and now - self.groups_seen < GROUPS_SERVED_SECONDS:
            return True
        served = await self.kube.serves("LeaderWorkerSet")
        self.groups_seen = now if served else None
        return served

    async def _read_gpu_products(self, nodes: list[str]) -> None:
        """Fill ``node_gpu`` for ``nodes``; a Node the operator may not read is unknown."""
        if len(self.node_gpu) + len(nodes) > NODE_CACHE_LIMIT:
            self.node_gpu.clear()
        for node in nodes:
            try:
                found = await self.kube.node_labels(node)
            except KubeTransientError:
                raise
            except KubeError as exc:  # 403 without the chart's nodes rule: record node only
                logger.info("GPU product of node %s unknown: %s", node, exc)
                found = None
            self.node_gpu[node] = (found or {}).get(labels.GPU_PRODUCT_LABEL, "")

    async def __call__(self, key: tuple[str, str]) -> float | None:
        started = time.perf_counter()
        try:
            delay = await self.reconcile(*key)
        except Exception as exc:
            self.metrics.failed(exc)
            raise
        finally:
            self.metrics.reconciled(time.perf_counter() - started)
        return delay

    async def reconcile(self, namespace: str, name: str) -> float | None:
        kube = self.kube
        body = self.caches.body(namespace, name)
        if body is None:
            self.metrics.forget(namespace, name)
            return None
        uid = body.get("metadata", {}).get("uid")
        children = observed_children(self.caches, namespace, name)
        logs: dict[str, str] = {}
        progress: dict[str, Mapping[str, Any]] = {}

        def view() -> Observed:
            return observe(body, **children, logs=logs, progress=progress, node_gpu=self.node_gpu)

        observed = view()
        if await self._refresh_finished_job_pods(namespace, observed, children):
            observed = view()
        progress.update(await self._read_progress(namespace, observed))
        if progress:
            observed = view()
        wanted = finished_jobs_needing_logs(observed)
        nodes = nodes_needing_gpu_product(observed)
        if wanted or nodes:
            for job, pod in wanted:
                try:
                    # The bench's own log: never another container's of the pod.
                    logs[job] = await kube.pod_log(namespace, pod, container=BENCH_CONTAINER)
                except KubeError as exc:
                    logger.info("no log for %s/%s: %s", namespace, pod, exc)
            await self._read_gpu_products(nodes)
            observed = view()
        route = canary_reads.route_to_read(observed)
        if route is not None:  # a gatewayAPI canary: the route whose weights it sets
            found = await kube.get("HTTPRoute", namespace, route)
            observed = dataclasses.replace(observed, routes={route: found} if found else {})
        if not await self._groups_served(body):
            observed = dataclasses.replace(observed, groups_served=False)
        now = self.clock()
        # A canary step that starts or is due: both revisions' /metrics, read now.
        targets = canary.scrape_targets(observed, now)
        if targets:
            source = canary_reads.prometheus_source(observed)
            scrapes: Mapping[str, object]
            if source is not None:  # analysis.prometheus: the same counts, from Prometheus
                since = canary.last_read_at(observed)
                reader = self.prometheus_reader
                gateway = canary_reads.gateway_scope(observed, targets)
                scrapes = await reader.read(
                    source, namespace, targets, now, since=since, gateway=gateway
                )
            else:
                port = canary_reads.scrape_port(observed, name)
                scrapes = await self.metrics_reader.read(namespace, targets, port)
            observed = dataclasses.replace(observed, scrapes=scrapes)
        result = self._plan(observed, now, namespace, name)
        foreign = await self.foreign_names(namespace, uid, observed, result)
        if foreign:
            # Plan again knowing who holds those names: a Stalled status and no action, so
            # nothing is written twice and no false Event is posted.
            observed = dataclasses.replace(observed, foreign=foreign)
            result = self._plan(observed, now, namespace, name)
        await self.apply(body, result)
        if self.on_plan is not None:
            self.on_plan(namespace, name, result)
        return result.requeue_after

    async def _refresh_finished_job_pods(
        self, namespace: str, observed: Observed, children: ObservedChildren
    ) -> bool:
        """Read the pods of each newly finished Job from the API, once per Job version.

        Each kind has its own watch: the Job's "Complete" can reach the cache before its
        pod's termination does, and the gate would then judge a pod that seems to be still
        running (a wrong Error, recorded for good). Once per (Job, resourceVersion): the
        verdict is taken in that pass, and later passes read the cache, caught up by then.
        """
        versions = {
            str(meta.get("name")): str(meta.get("resourceVersion"))
            for meta in (j.get("metadata") for j in children.get("jobs", []))
            if isinstance(meta, Mapping)
        }
        refreshed: set[str] = set()
        fresh: list[Mapping[str, Any]] = []
        for job in observed.jobs:
            if not job.finished or job.deleting or job.uid is None:
                continue
            version = versions.get(job.name, "")
            if self.refreshed_jobs.get(job.uid) == version:
                continue
            if len(self.refreshed_jobs) >= REFRESHED_JOBS_LIMIT:
                self.refreshed_jobs.clear()
            self.refreshed_jobs[job.uid] = version
            pods = await self.kube.list_pods(namespace, {labels.JOB_LABEL: job.name})
            fresh += [slim_pod(p) for p in pods]
            refreshed.add(job.name)
        if not refreshed:
            return False
        kept = [p for p in children.get("pods", []) if pod_view(p).job not in refreshed]
        children["pods"] = kept + fresh
        return True

    async def foreign_names(
        self, namespace: str, uid: str | None, observed: Observed, result: Plan
    ) -> dict[tuple[str, str], str]:
        """Names the plan would create that an object this resource does not own holds.

        Only creates are looked up (one GET each; creates are rare): every other action
        targets an observed object, and observed objects are the owned ones.
        """
        known = observed.owned_children()
        foreign: dict[tuple[str, str], str] = {}
        for action in result.actions:
            key = (action.kind, action.name)
            if not isinstance(action, Create) or action.kind not in CHILD_KINDS or key in known:
                continue
            found = await self.kube.get(action.kind, namespace, action.name)
            if found is not None and not _owned_by(uid, found):
                foreign[key] = holder(found)
        return foreign

    def _plan(self, observed: Observed, now: datetime, namespace: str, name: str) -> Plan:
        try:
            return self.planner(observed, now, self.settings)
        except Exception as exc:
            # The API accepted something the planner cannot handle: report it in status
            # (InvalidSpec + one Event per generation) instead of failing every retry.
            logger.exception("planning %s/%s failed; reporting InvalidSpec", namespace, name)
            return unhandled(observed, now, exc, self.settings)

    async def apply(self, body: Mapping[str, Any], result: Plan) -> None:
        kube = self.kube
        meta = body.get("metadata", {})
        namespace, name = str(meta.get("namespace", "default")), str(meta.get("name"))
        caches, own = self.caches, VLLMD_CACHE.kind
        status_patch = merge_patch(body.get("status") or {}, result.status.to_wire())
        if status_patch is not None:
            written = await kube.patch(
                own, namespace, name, {"status": status_patch}, subresource="status"
            )
            caches.record(own, namespace, name, name, written)
        annotations = annotations_to_write(body, result.annotations)
        if annotations:
            written = await kube.patch(
                own, namespace, name, {"metadata": {"annotations": annotations}}
            )
            caches.record(own, namespace, name, name, written)
        for action in result.actions:
            try:
                if isinstance(action, Create):
                    created = await kube.create(action.manifest)
                    if created is not None:
                        caches.record(action.kind, namespace, name, action.name, created)
                elif isinstance(action, Patch):
                    target = caches.child(action.kind, namespace, name, action.name)
                    if not changes(target, action.patch):
                        continue  # the cache holds it already: no request
                    written = await kube.patch(action.kind, namespace, action.name, action.patch)
                    caches.record(action.kind, namespace, name, action.name, written)
                elif isinstance(action, Delete):
                    await kube.delete(action.kind, namespace, action.name)
                    caches.record(action.kind, namespace, name, action.name, None)
            except KubeTransientError:
                raise  # retried with back-off; nothing a person needs to see yet
            except KubeError as exc:
                # Refused for good (invalid, forbidden, quota): say so where people look.
                with contextlib.suppress(KubeError):
                    what = f"{type(action).__name__.lower()} {action.kind} {action.name}"
                    await kube.event(
                        body, "Warning", EventReason.ApplyFailed, f"{what}: {exc}"[:1024]
                    )
                raise
        for record in result.verdicts:
            self.metrics.verdict(namespace, name, record)
        self.metrics.set_phase(namespace, name, result.status.phase)
        self.metrics.canary(namespace, name, result.status)
        for event in result.events:
            try:
                await kube.event(
                    body if event.job is None else event.job.involved(namespace),
                    event.type,
                    event.reason,
                    event.message,
                )
            except KubeError as exc:  # Events are best effort; the status holds the facts
                logger.warning(
                    "event %s on %s/%s not posted: %s", event.reason, namespace, name, exc
                )
        for event in result.events:
            log = logger.warning if event.type == "Warning" else logger.info
            log("%s/%s %s: %s", namespace, name, event.reason, event.message)
