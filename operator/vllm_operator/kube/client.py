"""The one door to the Kubernetes API: typed, idempotent, declared calls over raw JSON.

Built on the ``kubernetes`` client's ``ApiClient`` (its kubeconfig / in-cluster auth, TLS
and retries) but reading and writing plain JSON dicts: the operator's manifests are dicts
already, and skipping the generated models avoids their first-use cost (0.7-1.1 s per
model) and their stricter-than-the-server validation. The client is synchronous, so every
call runs in a small thread pool: the event loop (kopf's watches) never blocks.

It lists nothing but a finished benchmark Job's pods: the operator observes through kopf's
watches (``handlers.caches``) and comes here to write, and for the few reads a cache cannot
answer (a pod's log, a Node's label, the holder of a name about to be created, the pods of
a Job about to be judged, once; whether LeaderWorkerSets are served, by API discovery).
kopf's watches use kopf's own client
with the same credentials: this second stack stays because moving the writes onto kopf's
private API client (``kopf._cogs``) would tie the operator to kopf internals, and a
hand-made aiohttp client would have to redo kubeconfig/in-cluster auth, token refresh and
TLS that the ``kubernetes`` client already does.

Every call checks ``permissions.PERMISSIONS`` first; an undeclared call raises before it
reaches the network, which keeps the Helm chart's RBAC and the code in step.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import kopf
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from vllm_operator.api.kinds import KINDS
from vllm_operator.api.resource import KIND
from vllm_operator.errors import TransientError, VLLMOperatorError
from vllm_operator.kube.permissions import require


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API."""

    group: str
    version: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


# Where each kind lives, from the one table of kinds (api/kinds.py).
RESOURCES: dict[str, Resource] = {k.kind: Resource(k.group, k.version, k.plural) for k in KINDS}
VLLMD = RESOURCES[KIND]


class KubeError(VLLMOperatorError):
    """The API refused a call; ``code`` is the HTTP status."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        self.code = code
        self.reason = reason
        super().__init__(f"{code} {reason}: {message}")


class KubeTransientError(KubeError, TransientError):
    """A refusal worth retrying (conflict on update, throttling, server errors)."""


def _path(res: Resource, namespace: str | None, name: str | None = None, sub: str = "") -> str:
    base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
    if namespace is not None:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{res.plural}"
    if name is not None:
        base += f"/{quote(name, safe='')}"
    if sub:
        base += f"/{sub}"
    return base


def api_client_for(
    url: str | None = None, kubeconfig: str | None = None, context: str | None = None
) -> k8s.ApiClient:
    """An ApiClient for ``url`` (no auth: dev clusters), a kubeconfig, or in-cluster."""
    cfg = configuration_for(url, kubeconfig, context)
    cfg.connection_pool_maxsize = 32
    return k8s.ApiClient(cfg)


def configuration_for(
    url: str | None = None, kubeconfig: str | None = None, context: str | None = None
) -> k8s.Configuration:
    """Where the API is and how to log in: ``url`` without credentials (dev clusters), the
    kubeconfig file or context ``run`` was given, else in-cluster, else the default
    kubeconfig. One answer for the operator's client and for kopf's login."""
    cfg = k8s.Configuration()
    if url is not None:
        cfg.host = url
    elif kubeconfig is not None or context is not None:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context, client_configuration=cfg
        )
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except k8s_config.ConfigException:
            k8s_config.load_kube_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return cfg


def login_for(
    url: str | None = None, kubeconfig: str | None = None, context: str | None = None
) -> kopf.ConnectionInfo:
    """kopf's credentials from the same ``configuration_for`` as the operator's client.

    kopf's own ``login_via_client`` loads only the default kubeconfig (``KUBECONFIG`` or
    ``~/.kube/config``): with ``--kubeconfig`` alone its watches would read one cluster while
    the operator's client wrote to another. This hands kopf the same server and credentials.
    """
    cfg = configuration_for(url, kubeconfig, context)
    header = str(cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken") or "")
    scheme, _, token = header.partition(" ") if " " in header else ("", "", header)
    return kopf.ConnectionInfo(
        server=str(cfg.host),
        ca_path=cfg.ssl_ca_cert or None,
        insecure=not cfg.verify_ssl,
        username=cfg.username or None,
        password=cfg.password or None,
        scheme=scheme or None,
        token=token or None,
        certificate_path=cfg.cert_file or None,
        private_key_path=cfg.key_file or None,
    )


class Kube:
    """Async, declared, idempotent access to the objects the operator manages."""

    def __init__(
        self, api: k8s.ApiClient, *, workers: int = 16, request_timeout: float | None = None
    ) -> None:
        self._api = api
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kube")
        self._request_timeout = request_timeout
        self.calls = 0
        # Called before every create, patch and delete; raises to refuse the write. Leader
        # election sets it (handlers/leader.py) so a replica that lost the Lease stops
        # writing mid-reconcile. The Lease calls below never pass through it.
        self.fence: Callable[[], None] | None = None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._api.close()  # type: ignore[no-untyped-call]

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        _, url, headers, body, _ = self._api.param_serialize(
            method,
            path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self._api.call_api(
            method, url, header_params=headers, body=body, _request_timeout=self._request_timeout
        )
        data = response.read()  # type: ignore[no-untyped-call]
        self.calls += 1
        if response.status >= 400:
            try:
                status = json.loads(data)
                reason, message = str(status.get("reason", "")), str(status.get("message", ""))
            except (ValueError, AttributeError):
                reason, message = "", data.decode("utf-8", "replace")[:500]
            kind = (
                KubeTransientError
                if response.status in (409, 429) or response.status >= 500
                else KubeError
            )
            raise kind(response.status, reason, message)
        if method == "GET" and path.endswith("/log"):
            return data.decode("utf-8", "replace")
        return json.loads(data) if data else None

    async def _run(self, method: str, path: str, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: self._call(method, path, **kwargs))

    # -- reads ---------------------------------------------------------------------------
    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """One object by name, or None when there is none (404)."""
        res = RESOURCES[kind]
        require(res.group, res.plural, "get")
        try:
            found: dict[str, Any] = await self._run("GET", _path(res, namespace, name))
        except KubeError as exc:
            if exc.code == 404:
                return None
            raise
        return found

    async def list_pods(self, namespace: str, selector: Mapping[str, str]) -> list[dict[str, Any]]:
        """The pods matching ``selector`` as the API holds them now (not a cache's view).

        Only for a finished benchmark Job about to be judged: the Job's watch may be ahead
        of the pods' watch, and a verdict taken on a pod whose termination the cache has
        not seen yet would be a wrong Error, recorded for good.
        """
        res = RESOURCES["Pod"]
        require(res.group, res.plural, "list")
        label_selector = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        found = await self._run(
            "GET", _path(res, namespace), query=[("labelSelector", label_selector)]
        )
        items = found.get("items", []) if isinstance(found, dict) else []
        return [
            i
            for i in items
            if isinstance(i, dict)
            and all(
                (i.get("metadata", {}).get("labels") or {}).get(k) == v for k, v in selector.items()
            )
        ]

    async def node_labels(self, name: str) -> dict[str, str] | None:
        """The labels of Node ``name`` (cluster-scoped), or None when it does not exist."""
        res = RESOURCES["Node"]
        require(res.group, res.plural, "get")
        try:
            found = await self._run("GET", _path(res, None, name))
        except KubeError as exc:
            if exc.code == 404:
                return None
            raise
        meta = found.get("metadata") if isinstance(found, dict) else None
        raw = meta.get("labels") if isinstance(meta, dict) else None
        return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}

    async def serves(self, kind: str) -> bool:
        """Whether the API serves ``kind`` now (API discovery of its group version: a 404
        means its CRD is not installed). Discovery is a non-resource URL every authenticated
        user may read (the ``system:discovery`` role), so it needs no rule in the chart."""
        res = RESOURCES[kind]
        path = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
        try:
            found = await self._run("GET", path)
        except KubeError as exc:
            if exc.code == 404:
                return False
            raise
        listed = found.get("resources") if isinstance(found, dict) else None
        return any(isinstance(r, dict) and r.get("name") == res.plural for r in listed or ())

    async def pod_log(
        self, namespace: str, pod: str, tail_lines: int = 200, container: str | None = None
    ) -> str:
        require("", "pods/log", "get")
        query = [("tailLines", str(tail_lines))]
        if container is not None:
            query.append(("container", container))
        text: str = await self._run(
            "GET", _path(RESOURCES["Pod"], namespace, pod, "log"), query=query
        )
        return text

    # -- the Lease (leader election; never fenced: it is how leadership is kept) ----------
    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self.get("Lease", namespace, name)

    async def write_lease(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        """Create the Lease (no resourceVersion) or replace it (optimistic concurrency: a
        stale resourceVersion is a 409 ``KubeTransientError``); returns what was stored."""
        res = RESOURCES["Lease"]
        meta = lease["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        if meta.get("resourceVersion"):
            require(res.group, res.plural, "update")
            stored: dict[str, Any] = await self._run(
                "PUT", _path(res, namespace, name), body=dict(lease)
            )
        else:
            require(res.group, res.plural, "create")
            stored = await self._run("POST", _path(res, namespace), body=dict(lease))
        return stored

    # -- writes --------------------------------------------------------------------------
    def _fenced(self) -> None:
        if self.fence is not None:
            self.fence()

    async def create(self, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
        """Create ``manifest``: the object as stored, or None when the name is taken (409
        AlreadyExists)."""
        self._fenced()
        res = RESOURCES[str(manifest["kind"])]
        require(res.group, res.plural, "create")
        namespace = str(manifest["metadata"]["namespace"])
        try:
            created = await self._run("POST", _path(res, namespace), body=dict(manifest))
        except KubeError as exc:
            if exc.code == 409 and exc.reason == "AlreadyExists":
                return None
            raise
        return created if isinstance(created, dict) else dict(manifest)

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str = "",
    ) -> dict[str, Any]:
        """JSON merge patch of one object (or its ``status`` subresource)."""
        self._fenced()
        res = RESOURCES[kind]
        require(res.group, f"{res.plural}/{subresource}" if subresource else res.plural, "patch")
        result: dict[str, Any] = await self._run(
            "PATCH",
            _path(res, namespace, name, subresource),
            body=dict(patch),
            content_type="application/merge-patch+json",
        )
        return result

    async def delete(self, kind: str, namespace: str, name: str) -> bool:
        """Delete one object with background propagation; False when already gone."""
        self._fenced()
        res = RESOURCES[kind]
        require(res.group, res.plural, "delete")
        try:
            await self._run(
                "DELETE",
                _path(res, namespace, name),
                body={
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "propagationPolicy": "Background",
                },
            )
        except KubeError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    async def event(
        self,
        involved: Mapping[str, Any],
        kind: str,
        reason: str,
        message: str,
        *,
        component: str = "vllm-operator",
        now: datetime | None = None,
    ) -> None:
        """Post an Event about ``involved`` (the VLLMDeployment body, or a Job of it)."""
        meta = involved.get("metadata", {})
        when = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name')}.{secrets.token_hex(8)}",
                "namespace": meta.get("namespace", "default"),
            },
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", VLLMD.api_version),
                "kind": involved.get("kind", "VLLMDeployment"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace", "default"),
                "uid": meta.get("uid"),
            },
            "type": kind,
            "reason": reason,
            "message": message[:1024],
            "firstTimestamp": when,
            "lastTimestamp": when,
            "count": 1,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": component,
        }
        await self.create(event)
