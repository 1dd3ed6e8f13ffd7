"""``DevCluster``: the API server in its own thread and event loop, plus sync helpers.

Its own loop because kopf, when stopped, waits for (and after 5 s cancels) every task
created after it started in the same loop, kmock's and pytest-asyncio's included; a
separate thread also lets synchronous code (the ``kubernetes`` client, kubectl, the demo's
main thread) use the cluster without any event loop. The helpers go through HTTP like any
client does; ``call()`` runs a function on the cluster's loop for the few things that have
no API (pod logs, the change history).
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Self, TypeVar

import aiohttp.web
import httpx
import yaml

from .apierrors import ApiError
from .apiserver import ApiServer
from .kubeconfig import write_kubeconfig
from .resources import ResourceType
from .semantics import JSON_PATCH, MERGE, Clock, Semantics, utcnow
from .store import Store

T = TypeVar("T")


class DevCluster:
    """An embedded Kubernetes API on 127.0.0.1. Use as a context manager or start()/stop()."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Clock = utcnow,
        namespaces: Iterable[str] = ("default",),
        crds: Iterable[dict[str, Any] | str | Path] = (),
        seed: int | None = None,
        max_log: int = 100_000,
    ) -> None:
        self._host = host
        self._max_log = max_log
        self._port = port
        self._clock = clock
        self._namespaces = list(namespaces)
        self._crds = [_load(c) for c in crds]
        self._seed = seed
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._http: httpx.Client | None = None
        self.server: ApiServer | None = None

    # --- lifecycle ---------------------------------------------------------------------
    def start(self, timeout: float = 10.0) -> Self:
        if self._thread is not None:
            raise RuntimeError("DevCluster already started")
        self._thread = threading.Thread(target=self._run, name="devcluster", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("DevCluster did not start in time")
        if self._failure is not None:
            raise RuntimeError("DevCluster failed to start") from self._failure
        self._http = httpx.Client(base_url=self.url, timeout=30.0)
        for crd in self._crds:
            self.create(crd)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stopping.set)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._port}"

    @property
    def semantics(self) -> Semantics:
        assert self.server is not None, "DevCluster is not started"
        return self.server.semantics

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        return write_kubeconfig(path, self.url, namespace=namespace)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(loop))
        except BaseException as exc:  # reported to start(), never lost
            self._failure = exc
            self._ready.set()
        finally:
            loop.close()

    async def _main(self, loop: asyncio.AbstractEventLoop) -> None:
        self._stopping = asyncio.Event()

        def schedule(fn: Callable[[], None]) -> None:
            loop.call_soon(_guarded, fn)

        semantics = Semantics(
            Store(self._max_log), clock=self._clock, schedule=schedule, seed=self._seed
        )
        self.server = ApiServer(semantics=semantics, server_address=self._host)
        async with self.server:
            runner = aiohttp.web.ServerRunner(aiohttp.web.Server(self.server), shutdown_timeout=1.0)
            await runner.setup()
            site = aiohttp.web.TCPSite(runner, self._host, self._port)
            await site.start()
            sockets = getattr(site._server, "sockets", None) or []
            self._port = int(sockets[0].getsockname()[1])
            self.server.server_address = f"{self._host}:{self._port}"
            for name in self._namespaces:
                semantics.create(
                    semantics.registry.get("", "v1", "namespaces"),  # type: ignore[arg-type]
                    "",
                    {"metadata": {"name": name}},
                )
            self._ready.set()
            try:
                await self._stopping.wait()
            finally:
                semantics.store.close_all()
                await runner.cleanup()

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """Run ``fn`` on the cluster's loop (where the store lives) and return its result."""
        assert self._loop is not None, "DevCluster is not started"
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return future.result(timeout)

    # --- synchronous HTTP helpers --------------------------------------------------------
    def resource_type(self, api_version: str, plural_or_kind: str) -> ResourceType:
        group, _, version = api_version.rpartition("/")

        def find() -> ResourceType | None:
            for rtype in self.semantics.registry:
                if (rtype.group, rtype.version) == (group, version) and plural_or_kind in (
                    rtype.plural,
                    rtype.kind,
                ):
                    return rtype
            return None

        found = self.call(find)
        if found is None:
            raise ApiError(404, "NotFound", f"{api_version} {plural_or_kind} is not served")
        return found

    def path(
        self,
        api_version: str,
        plural: str,
        name: str | None = None,
        namespace: str | None = "default",
        subresource: str = "",
    ) -> str:
        rtype = self.resource_type(api_version, plural)
        base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        parts = [base]
        if rtype.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(rtype.plural)
        if name:
            parts.append(name)
        if subresource:
            parts.append(subresource)
        return "/".join(parts)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Any:
        assert self._http is not None, "DevCluster is not started"
        content = None if body is None else _dumps(body)
        response = self._http.request(
            method, path, content=content, params=params, headers={"Content-Type": content_type}
        )
        data = response.json() if response.content else None
        if response.status_code >= 400:
            status = data if isinstance(data, dict) else {}
            raise ApiError(
                response.status_code,
                str(status.get("reason", "")),
                str(status.get("message", response.text)),
                status.get("details"),
            )
        return data

    def create(self, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        ns = namespace or meta.get("namespace") or "default"
        result: dict[str, Any] = self.request(
            "POST", self.path(body["apiVersion"], body["kind"], namespace=ns), body=body
        )
        return result

    def get(
        self,
        api_version: str,
        plural: str,
        name: str,
        namespace: str | None = "default",
        subresource: str = "",
    ) -> dict[str, Any]:
        result: dict[str, Any] = self.request(
            "GET", self.path(api_version, plural, name, namespace, subresource)
        )
        return result

    def list(
        self,
        api_version: str,
        plural: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        params = {
            k: v
            for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector))
            if v
        }
        result = self.request("GET", self.path(api_version, plural, None, namespace), params=params)
        return list(result["items"])

    def patch(
        self,
        api_version: str,
        plural: str,
        name: str,
        patch: Any,
        namespace: str | None = "default",
        *,
        subresource: str = "",
        content_type: str = "",
    ) -> dict[str, Any]:
        content_type = content_type or (JSON_PATCH if isinstance(patch, list) else MERGE)
        result: dict[str, Any] = self.request(
            "PATCH",
            self.path(api_version, plural, name, namespace, subresource),
            body=patch,
            content_type=content_type,
        )
        return result

    def replace(
        self, body: dict[str, Any], *, subresource: str = "", namespace: str | None = None
    ) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        ns = namespace or meta.get("namespace") or "default"
        path = self.path(body["apiVersion"], body["kind"], meta["name"], ns, subresource)
        result: dict[str, Any] = self.request("PUT", path, body=body)
        return result

    def delete(
        self,
        api_version: str,
        plural: str,
        name: str,
        namespace: str | None = "default",
        *,
        propagation: str | None = None,
    ) -> dict[str, Any]:
        body = {"propagationPolicy": propagation} if propagation else None
        result: dict[str, Any] = self.request(
            "DELETE", self.path(api_version, plural, name, namespace), body=body
        )
        return result

    def watch(
        self,
        api_version: str,
        plural: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        timeout: float = 5.0,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Watch events (dicts with ``type`` and ``object``) until ``timeout`` seconds pass.

        Stop early by breaking out of the loop; the stream is closed on exit.
        """
        params = {"watch": "true", "timeoutSeconds": str(max(1, round(timeout)))}
        for key, value in (
            ("resourceVersion", resource_version),
            ("labelSelector", label_selector),
            ("fieldSelector", field_selector),
        ):
            if value:
                params[key] = value
        path = self.path(api_version, plural, None, namespace)
        with httpx.stream("GET", self.url + path, params=params, timeout=timeout + 5) as response:
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)

    def exists(
        self, api_version: str, plural: str, name: str, namespace: str | None = "default"
    ) -> bool:
        try:
            self.get(api_version, plural, name, namespace)
        except ApiError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    def wait_for(
        self,
        condition: Callable[[], T],
        *,
        timeout: float = 5.0,
        interval: float = 0.01,
        message: str = "condition",
    ) -> T:
        """Poll ``condition`` until it returns something truthy; its last error is reported."""
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while True:
            try:
                result = condition()
                if result:
                    return result
            except Exception as exc:  # e.g. 404 while the object is not there yet
                last_error = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"{message} not met within {timeout}s") from last_error
            time.sleep(interval)

    def history(
        self, api_version: str, plural: str, name: str, namespace: str | None = "default"
    ) -> builtins.list[dict[str, Any]]:
        """Every stored version of one object, oldest first (from the change log)."""
        rtype = self.resource_type(api_version, plural)
        ns = (namespace or "") if rtype.namespaced else ""
        changes = self.call(lambda: self.semantics.store.history(rtype.store_key, ns, name))
        return [dict(change.obj, _event=change.type) for change in changes]

    def set_pod_log(self, namespace: str, name: str, text: str) -> None:
        """What ``GET .../pods/<name>/log`` returns (no API writes logs, hence a helper)."""
        self.call(lambda: self.semantics.pod_logs.__setitem__((namespace, name), text))


def _guarded(fn: Callable[[], None]) -> None:
    # Deferred work (GC) that races with a client write loses: the client's write stands.
    with contextlib.suppress(ApiError):
        fn()


def _dumps(body: Any) -> bytes:
    return json.dumps(body).encode()


def _load(crd: dict[str, Any] | str | Path) -> dict[str, Any]:
    if isinstance(crd, dict):
        return crd
    loaded: dict[str, Any] = yaml.safe_load(Path(crd).read_text())
    return loaded
