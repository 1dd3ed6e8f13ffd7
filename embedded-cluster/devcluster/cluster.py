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
import concurrent.futures
import contextlib
import ssl
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Self, TypeVar

import aiohttp.web
import httpx
import yaml

from .apierrors import ApiError
from .apiserver import ApiServer
from .client import ClusterClient
from .kubeconfig import write_kubeconfig
from .semantics import Clock, Semantics, utcnow
from .store import Store
from .tls import serving_certificate

T = TypeVar("T")


class DevCluster(ClusterClient):
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
        tls: bool = False,
    ) -> None:
        self._host = host
        # HTTPS with a CA of its own (tls.py): what the kubeconfig and kopf's login carry.
        self._certificate = serving_certificate(host) if tls else None
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
        self._http = httpx.Client(base_url=self.url, timeout=30.0, verify=self.verify)
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
        scheme = "https" if self._certificate is not None else "http"
        return f"{scheme}://{self._host}:{self._port}"

    @property
    def http(self) -> httpx.Client:
        """A client of this cluster (its base URL and CA) for raw requests in tests."""
        assert self._http is not None, "DevCluster is not started"
        return self._http

    @property
    def ca_pem(self) -> bytes | None:
        """The CA that signed the serving certificate (PEM); None over plain HTTP."""
        return None if self._certificate is None else self._certificate.ca_pem

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """What an httpx client of this cluster verifies the server with."""
        return True if self._certificate is None else self._certificate.client_context()

    @property
    def semantics(self) -> Semantics:
        assert self.server is not None, "DevCluster is not started"
        return self.server.semantics

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        return write_kubeconfig(path, self.url, namespace=namespace, ca_pem=self.ca_pem)

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
            context = None if self._certificate is None else self._certificate.server_context()
            site = aiohttp.web.TCPSite(runner, self._host, self._port, ssl_context=context)
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


def _guarded(fn: Callable[[], None]) -> None:
    # Deferred work (GC) that races with a client write loses: the client's write stands.
    with contextlib.suppress(ApiError):
        fn()


def _load(crd: dict[str, Any] | str | Path) -> dict[str, Any]:
    if isinstance(crd, dict):
        return crd
    loaded: dict[str, Any] = yaml.safe_load(Path(crd).read_text())
    return loaded
