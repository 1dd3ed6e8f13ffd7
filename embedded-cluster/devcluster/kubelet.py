"""A local "kubelet": the cluster's controllers, scheduler, kube-proxy and kubelet in one.

The operator under test only creates Deployments, Services and Jobs; in a cluster other
components turn those into running pods and write back the status the operator waits on.
``Kubelet`` plays those components against a DevCluster (or any API server URL), over HTTP
only, so the operator's code paths are the production ones:

- Deployment controller: pods ``<deploy>-<template-hash>-<suffix>`` owned by the Deployment
  (uid), Recreate-style replacement, scale up/down, ``status`` and Available/Progressing.
- Job controller: one pod per attempt, active/succeeded/failed, Complete/Failed,
  ``activeDeadlineSeconds`` -> DeadlineExceeded, ``ttlSecondsAfterFinished``.
- LeaderWorkerSet controller, once its CRD is served (``lws_controller``): groups of pods.
- Scheduler: one node (a Node object named ``node_name`` with ``node_labels``, e.g. a GPU
  product label; pods get its ``spec.nodeName``); a pod whose ``nodeSelector`` or required
  node affinity the node does not satisfy stays Pending (``kubelet_scheduler``), as do
  pods that fault rules or a GPU capacity leave Unschedulable, each with a FailedScheduling
  Event.
- Kubelet: each pod's first container runs as a local process (see ``kubelet_launch`` for
  the path, port and Service-URL mapping), probes, restarts, CrashLoopBackOff, logs. What
  an image provides beyond the pod spec (stand-in programs, baked-in environment) comes
  from ``images``, the product's ``ImageHooks`` (``devcluster.images``); by default none.
- kube-proxy: a loopback TCP proxy per Service port (``kubelet_proxy``).

Pod logs stay in ``<workdir>/<namespace>/<pod>/logs/<container>.log`` (``.previous.log`` for
the instance before the last restart); ``pod_log()`` reads them. Use it from async code
(``await kubelet.serve()``) or from threads (``start()``/``stop()``, or ``with
Kubelet(...)``): stopping kills every process group it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from devcluster import hostpaths, kubelet_scheduler
from devcluster import kubelet_api as kapi
from devcluster.images import ImageHooks, NoImageHooks
from devcluster.kubelet_controllers import Plan, deployment_plan, job_plan
from devcluster.kubelet_faults import Faults, gpu_request
from devcluster.kubelet_launch import GroupPorts, LaunchContext
from devcluster.kubelet_proxy import ServiceProxy, publish_proxies, sync_proxies
from devcluster.kubelet_runtime import PodRuntime, RuntimeConfig
from devcluster.lws_controller import lws_plan

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Key = tuple[str, str]
ADDRESS_ANNOTATION = "devcluster.vllm-operator.dev/address"
LOG_LIMIT = 256 * 1024


class Kubelet:
    """Runs what a cluster would run for Deployments, Jobs, Pods and Services."""

    def __init__(
        self,
        cluster: str | kapi.HasURL,
        workdir: str | Path,
        *,
        namespace: str | None = None,
        time_scale: float = 1.0,
        probe_time_scale: float | None = None,
        deadline_time_scale: float = 1.0,
        clock: Callable[[], float] = time.time,
        faults: Faults | None = None,
        extra_env: Mapping[str, str] | None = None,
        images: ImageHooks | None = None,
        resync_seconds: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
        log_sink: Callable[[str, str, str], None] | None = None,
        node_name: str = "devcluster",
        node_labels: Mapping[str, str] | None = None,
        ca_pem: bytes | None = None,
    ) -> None:
        self.url = cluster if isinstance(cluster, str) else cluster.url
        # The CA of an HTTPS API: given, or the DevCluster's own.
        self.ca_pem = ca_pem or getattr(cluster, "ca_pem", None)
        self.node_name = node_name
        self.node_labels = dict(node_labels or {})
        # Where pod logs go for ``GET .../pods/<name>/log``: a DevCluster's set_pod_log.
        self.log_sink = log_sink or getattr(cluster, "set_pod_log", None)
        self._log_sizes: dict[Key, int] = {}
        self._annotated: set[Key] = set()
        self._failed_scheduling: dict[Key, str] = {}  # the reason each Event was written for
        self._events_written = 0
        self.workdir = Path(workdir).absolute()  # on pods' PATH, which run elsewhere (#42)
        self.namespace = namespace
        self.time_scale = time_scale
        self.probe_time_scale = time_scale if probe_time_scale is None else probe_time_scale
        self.deadline_time_scale = deadline_time_scale
        self.clock = clock
        self.faults = faults or Faults()
        self.extra_env = dict(extra_env or {})
        self.images: ImageHooks = images if images is not None else NoImageHooks()
        self.resync_seconds = resync_seconds
        self._transport = transport
        self.runtimes: dict[Key, PodRuntime] = {}
        self.group_ports = GroupPorts(lambda: self.informers["pods"].items())  # noqa: PLW0108
        self.proxies: dict[tuple[str, str, int], ServiceProxy] = {}
        self._published: str | None = None
        self._written: dict[Key, Obj] = {}
        self._wake: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.reconciles = 0
        self._halting = False

    # ---- thread hosting ---------------------------------------------------------------
    def start(self, timeout: float = 15.0) -> Kubelet:
        self._thread = threading.Thread(target=self._thread_main, name="kubelet", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"kubelet did not sync with {self.url} within {timeout} s")
        if self._error is not None:
            raise RuntimeError("kubelet failed to start") from self._error
        return self

    def stop(self, timeout: float = 15.0) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():  # never leave pod processes behind
                log.error("kubelet did not stop within %s s: killing its pods", timeout)
                for pid in self.pids():
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)
            self._thread = None

    def __enter__(self) -> Kubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._thread_serve())
        except BaseException as exc:  # report start-up failures to start()
            self._error = exc
            self._ready.set()

    async def _thread_serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        task = asyncio.create_task(self.serve())
        stop = asyncio.create_task(self._stop.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        # A flag, not task.cancel(): on 3.11 wait_for() can swallow a cancellation.
        self.halt()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    # ---- queries (safe to call from other threads: plain reads) -----------------------
    def pod_address(self, namespace: str, name: str) -> str | None:
        rt = self.runtimes.get((namespace, name))
        return rt.address if rt else None

    def service_address(self, namespace: str, name: str, port: int) -> str | None:
        proxy = self.proxies.get((namespace, name, port))
        return proxy.address if proxy else None

    def pod_log(self, namespace: str, name: str, *, previous: bool = False) -> str:
        rt = self.runtimes.get((namespace, name))
        logs = self.workdir / namespace / name / "logs"
        paths = sorted(logs.glob("*.previous.log" if previous else "*.log"))
        if not previous:
            paths = [p for p in paths if not p.name.endswith(".previous.log")]
        if rt is not None and rt.launch is not None and not previous:
            paths = [rt.launch.log_path]
        texts = []
        for path in paths:
            with contextlib.suppress(OSError):  # absent, or a symlink a pod planted
                texts.append(hostpaths.read_text(path, 64 * 1024 * 1024))
        return "".join(texts)

    async def _register_node(self) -> None:
        """Create this kubelet's Node (its labels are what operators read about the node)."""
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node_name,
                "labels": self._node_labels(),
            },
        }
        try:
            await self._api.create(kapi.NODES, "", node)
        except kapi.APIError as exc:
            if exc.status != 409:  # a second kubelet on the same cluster shares the node
                raise

    def pids(self) -> list[int]:
        runtimes = list(self.runtimes.values())
        mains = [pid for rt in runtimes if (pid := rt.pid) is not None]
        return mains + [pid for rt in runtimes for pid in rt.sidecar_pids]

    # ---- the controller loop ----------------------------------------------------------
    async def serve(self) -> None:
        """Run until cancelled; on the way out stop every pod and proxy."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._wake = asyncio.Event()
        self._halting = False
        self._api = kapi.KubeAPI(self.url, transport=self._transport, ca_pem=self.ca_pem)
        self._probe_http = httpx.AsyncClient()
        self._shim_dir = self.images.install(self.workdir / "bin")
        ns = self.namespace
        self.informers = {
            kind.plural: kapi.Informer(self._api, kind, ns, self._poke)
            for kind in (kapi.PODS, kapi.DEPLOYMENTS, kapi.JOBS, kapi.SERVICES)
        }
        # Secrets and ConfigMaps are read when a pod starts; a list+watch keeps them at hand.
        self.informers["secrets"] = kapi.Informer(self._api, kapi.SECRETS, ns, lambda: None)
        self.informers["configmaps"] = kapi.Informer(self._api, kapi.CONFIGMAPS, ns, lambda: None)
        tasks = [asyncio.create_task(inf.run()) for inf in self.informers.values()]
        # LeaderWorkerSets once their CRD is served; never waited for (LWS may be absent).
        lws = kapi.Informer(self._api, kapi.LEADERWORKERSETS, ns, self._poke, poll_interval=1.0)
        tasks.append(asyncio.create_task(lws.run()))
        await self._register_node()
        try:
            for inf in self.informers.values():
                await inf.synced.wait()
            self.informers[kapi.LEADERWORKERSETS.plural] = lws
            self._ready.set()
            while not self._halting:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.resync_seconds)
                self._wake.clear()
                if self.halting:
                    break
                try:
                    await self.reconcile()
                except (httpx.HTTPError, kapi.APIError) as exc:
                    log.warning("kubelet reconcile failed: %s", exc)
                    await asyncio.sleep(0.05)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.gather(*(rt.stop() for rt in self.runtimes.values()))
            self.runtimes.clear()
            await asyncio.gather(*(p.close() for p in self.proxies.values()))
            self.proxies.clear()
            await self._probe_http.aclose()
            await self._api.close()

    @property
    def halting(self) -> bool:
        return self._halting

    def halt(self) -> None:
        """Ask ``serve()`` to stop pods and proxies and return (call on its loop)."""
        self._halting = True
        self._poke()

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def reconcile(self) -> None:
        self.reconciles += 1
        now = self.clock()
        await self._sync_services()
        pods = self.informers["pods"]
        scale = self.deadline_time_scale
        controllers: tuple[tuple[kapi.Kind, Callable[[Obj, list[Obj]], Plan]], ...] = (
            (kapi.DEPLOYMENTS, lambda o, p: deployment_plan(o, p, now, deadline_scale=scale)),
            (kapi.JOBS, lambda o, p: job_plan(o, p, now, deadline_scale=scale)),
            (kapi.LEADERWORKERSETS, lambda o, p: lws_plan(o, p, now)),
        )
        for kind, planner in controllers:
            for owner in self.informers[kind.plural].items():
                if (owner.get("metadata") or {}).get("deletionTimestamp"):
                    continue
                ns = owner["metadata"].get("namespace", "")
                in_ns = [p for p in pods.items() if p["metadata"].get("namespace") == ns]
                await self._apply(kind, owner, planner(owner, in_ns))
        await self._sync_pods()
        await self._write_pod_statuses()
        if self.log_sink is not None:
            await self._push_logs(self.log_sink)

    async def _push_logs(self, sink: Callable[[str, str, str], None]) -> None:
        """Copy changed container logs to the API's pod log endpoint (the DevCluster's)."""
        for key, rt in list(self.runtimes.items()):
            if rt.launch is None:
                continue
            try:
                size = rt.launch.log_path.lstat().st_size
                if self._log_sizes.get(key) == size:
                    continue
                text = hostpaths.read_text(rt.launch.log_path, LOG_LIMIT)  # no symlinks
            except OSError:
                continue
            self._log_sizes[key] = size
            try:
                await asyncio.to_thread(sink, key[0], key[1], text)
            except Exception as exc:  # the cluster may be stopping: logs are best effort
                log.debug("pushing the log of %s failed: %s", key, exc)

    async def _apply(self, kind: kapi.Kind, owner: Obj, plan: Plan) -> None:
        ns, name = kapi.key_of(owner)
        pods = self.informers["pods"]
        for pod in plan.create:
            try:
                pods.store(await self._api.create(kapi.PODS, ns, self.faults.admit(pod)))
            except kapi.APIError as exc:
                if exc.status != 409:
                    raise
        for pod_name in plan.delete:
            await self._api.delete(kapi.PODS, ns, pod_name)
            pods.forget(ns, pod_name)
        if plan.delete_owner:
            await self._api.delete(kind, ns, name)
            return
        old = owner.get("status") or {}
        if plan.status is not None and any(old.get(k) != val for k, val in plan.status.items()):
            try:
                answer = await self._api.patch_status(kind, ns, name, plan.status)
            except kapi.APIError as exc:
                if exc.status != 404:
                    raise
            else:
                self.informers[kind.plural].store(answer)

    # ---- pods -------------------------------------------------------------------------
    def _gpus_in_use(self) -> int:
        return sum(
            gpu_request(rt.pod)[0]
            for rt in self.runtimes.values()
            if rt.scheduled and rt.final_phase is None
        )

    async def _sync_pods(self) -> None:
        live = {
            kapi.key_of(p): p
            for p in self.informers["pods"].items()
            if not (p.get("metadata") or {}).get("deletionTimestamp")
        }
        for key in [k for k in self.runtimes if k not in live]:
            gone = self.runtimes.pop(key)
            self._written.pop(key, None)
            self._failed_scheduling.pop(key, None)
            self._log_sizes.pop(key, None)
            self._annotated.discard(key)
            self.group_ports.forget(*key)
            await gone.stop()
        for key, pod in live.items():
            found = self.runtimes.get(key)
            if found is not None:
                rt = found
            else:
                if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    continue  # finished before this kubelet started: leave it as it is
                rt = self._new_runtime(pod)
                self.runtimes[key] = rt
            if not rt.scheduled:
                reason = kubelet_scheduler.unschedulable_reason(pod, self._node_labels())
                reason = reason or self.faults.unschedulable_reason(pod, self._gpus_in_use())
                if reason is None:
                    rt.schedule()
                else:
                    rt.unschedulable = reason
                    await self._record_failed_scheduling(key, pod, reason)

    def _node_labels(self) -> dict[str, str]:
        return {"kubernetes.io/hostname": self.node_name, **self.node_labels}

    async def _record_failed_scheduling(self, key: Key, pod: Obj, reason: str) -> None:
        """One Warning Event per pod and reason, as kube-scheduler writes it."""
        if self._failed_scheduling.get(key) == reason:
            return
        ns, name = key
        meta = pod.get("metadata") or {}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock()))
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{os.getpid():x}{self._events_written:x}"},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": name,
                "namespace": ns,
                "uid": meta.get("uid"),
            },
            "reason": "FailedScheduling",
            "message": reason,
            "type": "Warning",
            "source": {"component": "default-scheduler"},
            "reportingComponent": "default-scheduler",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self._api.create(kapi.EVENTS, ns, event)
        except kapi.APIError as exc:
            if exc.status not in (404, 409):  # namespace gone, or written already
                raise
        self._failed_scheduling[key] = reason
        self._events_written += 1

    def _new_runtime(self, pod: Obj) -> PodRuntime:
        ns, name = kapi.key_of(pod)
        config = RuntimeConfig(
            time_scale=self.time_scale,
            probe_time_scale=self.probe_time_scale,
            never_ready=self.faults.is_never_ready(pod),
            image_fault=self.faults.image_fault(pod),
            interrupted=self.faults.is_interrupted(pod),
        )
        ctx = LaunchContext(
            workdir=self.workdir,
            shim_dir=self._shim_dir,
            python_bin=Path(sys.executable).parent,
            secret=self.informers["secrets"].get,
            config_map=self.informers["configmaps"].get,
            resolve_service=self._resolve_service,
            image_env=self.images.env,
            extra_env=self.extra_env,
            pod_port=self.group_ports.get,
            pod_dns=self.group_ports.addresses.lookup,
        )
        poddir = self.workdir / (ns or "default") / name
        return PodRuntime(
            pod,
            poddir,
            ctx=ctx,
            config=config,
            probe_client=self._probe_http,
            on_change=self._poke,
            clock=self.clock,
        )

    def _resolve_service(self, namespace: str, name: str, port: int) -> str | None:
        return self.service_address(namespace, name, port)

    async def _write_pod_statuses(self) -> None:
        pods = self.informers["pods"]
        for key, rt in list(self.runtimes.items()):
            status = rt.status()
            if self._written.get(key) == status:
                continue
            ns, name = key
            try:
                if rt.address and key not in self._annotated:
                    await self._api.patch(
                        kapi.PODS,
                        ns,
                        name,
                        {
                            "metadata": {"annotations": {ADDRESS_ANNOTATION: rt.address}},
                            "spec": {"nodeName": self.node_name},  # bound, as the scheduler does
                        },
                    )
                    self._annotated.add(key)
                pods.store(await self._api.patch_status(kapi.PODS, ns, name, status))
            except kapi.APIError as exc:
                if exc.status != 404:
                    raise
                continue
            self._written[key] = status

    # ---- services ---------------------------------------------------------------------
    async def _sync_services(self) -> None:
        pods = self.informers["pods"]

        def backends(namespace: str, selector: dict[str, str], target: str) -> list[int]:
            ports = []
            for (ns, pod_name), rt in sorted(self.runtimes.items()):
                pod = pods.get(ns, pod_name)
                if ns != namespace or pod is None or not rt.ready:
                    continue
                labels = pod["metadata"].get("labels") or {}
                if all(labels.get(k) == val for k, val in selector.items()):
                    local = rt.local_port(target)
                    if local is not None:
                        ports.append(local)
            return ports

        await sync_proxies(self.proxies, self.informers["services"].items(), backends)
        self._published = publish_proxies(self.proxies, self.workdir, self._published)
