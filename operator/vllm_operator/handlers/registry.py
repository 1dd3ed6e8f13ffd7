"""kopf wiring: which events trigger a reconcile, and nothing else.

Every handler only names a resource to look at; the work queue runs the reconcile. The
VLLMDeployment's own events (create, spec change, annotation, resume after a restart) and
the events of the Deployments, Jobs and Pods it owns (found by the
``vllm-operator.dev/deployment`` label the operator puts on all of them) make the operator
react in milliseconds; a periodic resync is the safety net for a lost event, and the plan's
own requeue time handles deadlines. The same watches fill the caches a reconcile reads
(``handlers.caches``: kopf indexes, one per kind of its table), so a reconcile makes no
API request to observe. Handlers are ``on.event`` only: no kopf progress or
diff-base storage is written to the resource, and no finalizer is needed (children go by
ownerReferences).

With ``config.leader_election`` every replica watches, but only the Lease holder's queue
reconciles and only it may write (``handlers/leader.py``: a guard around the queue's worker
and a fence on the ``Kube`` client).

``build_registry`` makes a fresh ``kopf.OperatorRegistry`` per operator (no global state
shared between tests or between two operators in one process).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf
from prometheus_client import CollectorRegistry

from vllm_operator.api.resource import GROUP, PLURAL, VERSION
from vllm_operator.config import OperatorConfig
from vllm_operator.handlers.caches import CHILD_LABELS, Caches, cached_children, register_indexes
from vllm_operator.handlers.leader import Leader, leader_for
from vllm_operator.handlers.queue import Worker, WorkQueue
from vllm_operator.handlers.reconcile import Clock, Hook, Reconciler, utc_now
from vllm_operator.kube.client import Kube, api_client_for, login_for
from vllm_operator.metrics import OperatorMetrics
from vllm_operator.render import labels as lbl

logger = logging.getLogger(__name__)


@dataclass
class Runtime:
    """What one running operator holds (for tests: its queue, client and metrics)."""

    config: OperatorConfig
    metrics: OperatorMetrics
    kube: Kube | None = None
    queue: WorkQueue | None = None
    reconciler: Reconciler | None = None
    leader: Leader | None = None  # with config.leader_election
    caches: Caches = field(default_factory=Caches)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def configure(settings: kopf.OperatorSettings, config: OperatorConfig) -> None:
    """kopf settings the operator relies on (applied by ``run`` and by tests)."""
    settings.peering.standalone = True  # no kopf peering: leader election is a Lease (leader.py)
    settings.posting.level = logging.WARNING  # our own Events say what happened
    # Exact namespaces, no namespace list permission. With --multi-node, kopf watches the
    # CRDs, so a LeaderWorkerSet CRD installed after start-up is watched (and cached) at once:
    # a multi-node revision refused for its absence then rolls out without a restart.
    settings.scanning.disabled = not config.multi_node
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60


def build_registry(
    config: OperatorConfig,
    *,
    kube: Kube | None = None,
    metrics: OperatorMetrics | None = None,
    clock: Clock = utc_now,
    on_plan: Hook | None = None,
    login: bool = True,
    runtime_out: Callable[[Runtime], None] | None = None,
) -> kopf.OperatorRegistry:
    """A kopf registry running the rollout with ``config``.

    ``kube`` (default: built at start-up from ``config``), ``metrics`` (default: on a new
    ``CollectorRegistry``) and ``clock`` are the seams tests use; ``on_plan`` sees every plan
    applied; ``login=False`` when the runner provides credentials (DevCluster's runner).
    """
    registry = kopf.OperatorRegistry()
    runtime = Runtime(config=config, metrics=metrics or OperatorMetrics(CollectorRegistry()))
    if runtime_out is not None:
        runtime_out(runtime)

    if login:

        @kopf.on.login(registry=registry)
        def vllm_operator_login(**kwargs: Any) -> kopf.ConnectionInfo | None:
            if config.api_url is None and config.kubeconfig is None and config.context is None:
                info: kopf.ConnectionInfo | None = kopf.login_via_client(**kwargs)
                return info  # in-cluster or the default kubeconfig, as kopf finds them
            given: kopf.ConnectionInfo = login_for(
                config.api_url, config.kubeconfig, config.context
            )
            return given

    @kopf.on.startup(registry=registry)
    async def start(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure(settings, config)
        if runtime.kube is None:
            runtime.kube = kube or Kube(
                api_client_for(config.api_url, config.kubeconfig, config.context),
                workers=config.kube_workers,
            )
        runtime.reconciler = Reconciler(
            runtime.kube,
            config,
            runtime.metrics,
            clock=clock,
            on_plan=on_plan,
            caches=runtime.caches,
        )
        worker: Worker = runtime.reconciler
        runtime.metrics.leader.set(0 if config.leader_election else 1)
        if config.leader_election:  # handlers/leader.py: only the Lease holder reconciles
            runtime.leader = leader_for(config, kube, lambda now: _leadership(runtime, now))
            runtime.kube.fence = runtime.leader.fence
            worker = runtime.leader.guard(worker)
        runtime.queue = WorkQueue(worker, workers=config.workers)
        runtime.queue.start()
        runtime.tasks.append(asyncio.create_task(_resync(runtime.queue, config.resync_seconds)))
        if runtime.leader is not None:
            runtime.tasks.append(asyncio.create_task(runtime.leader.run(), name="leader"))

    @kopf.on.cleanup(registry=registry)
    async def stop(**_: Any) -> None:
        # Graceful: the reconciles in flight finish (the Lease is still renewed meanwhile),
        # then leadership is released at once so a standby takes over without waiting.
        if runtime.queue is not None and not await runtime.queue.drain(
            config.shutdown_grace_seconds
        ):
            logger.warning(
                "reconciles still running after %.0f s were cancelled",
                config.shutdown_grace_seconds,
            )
        for task in runtime.tasks:
            task.cancel()
        await asyncio.gather(*runtime.tasks, return_exceptions=True)
        runtime.tasks.clear()
        if runtime.leader is not None:
            await runtime.leader.release()
            if runtime.leader.kube is not kube:
                runtime.leader.kube.close()
        if runtime.kube is not None and kube is None:
            runtime.kube.close()
            runtime.kube = None

    register_indexes(registry, config.features)

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def resource_event(
        *, event: kopf.RawEvent, name: str, namespace: str | None, **kwargs: Any
    ) -> None:
        runtime.caches.bind(kwargs)
        queue = runtime.queue
        if queue is None:
            return
        key = (namespace or "default", name)
        if event.get("type") == "DELETED":
            queue.forget(key)
            runtime.metrics.forget(*key)
            return
        queue.known.add(key)
        queue.add(key)

    for group, version, plural in (
        (c.resource.group, c.resource.version, c.resource.plural)
        for c in cached_children(config.features)
    ):

        @kopf.on.event(
            group,
            version,
            plural,
            id=f"child-{plural}",
            registry=registry,
            labels=CHILD_LABELS,
        )
        async def child_event(
            *, namespace: str | None, labels: Mapping[str, str], **kwargs: Any
        ) -> None:
            runtime.caches.bind(kwargs)
            queue = runtime.queue
            owner = labels.get(lbl.DEPLOYMENT_LABEL)
            if queue is not None and owner:
                queue.add((namespace or "default", owner))

    return registry


def _leadership(runtime: Runtime, leading: bool) -> None:
    """Leadership won: reconcile every resource the standby's watches saw."""
    runtime.metrics.leader.set(1 if leading else 0)
    if leading and runtime.queue is not None:
        runtime.queue.resync()


async def _resync(queue: WorkQueue, period: float) -> None:
    while True:
        await asyncio.sleep(period)
        queue.resync()
