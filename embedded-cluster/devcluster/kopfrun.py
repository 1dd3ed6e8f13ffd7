"""Run a kopf operator (a given registry) against a DevCluster in a background thread.

The same pattern serves the integration tests and the demo: the operator gets its own
thread and event loop (kopf, on stop, waits for and then cancels every task created in
its loop after it started, so sharing the test's loop costs 5 s per test), an explicit
login, standalone peering and sub-second cancellation polling so stop is fast.

The login is an ``@kopf.on.login`` handler added to the registry (kopf's public API): a
plain ``kopf.OperatorRegistry`` has no other login handler, so kopf never falls back to a
kubeconfig or in-cluster login that could point at a real cluster; and should a registry
carry a login of its own, devcluster's credentials have a priority above any kopf or a
product gives, so kopf's vault always picks them. (An earlier version pre-filled kopf's
credentials vault, which kopf does not export: ``kopf._cogs``.)
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Collection
from typing import Any, Self

import kopf

from .cluster import DevCluster

SettingsHook = Callable[[kopf.OperatorSettings], None]

# kopf's vault hands out the credentials of the highest priority (its own logins use < 100).
LOGIN_PRIORITY = 1_000_000

# One login handler per registry, reading the URL (and the CA of an HTTPS server) of the
# cluster it currently runs against.
_LOGIN_TARGETS: weakref.WeakKeyDictionary[kopf.OperatorRegistry, list[tuple[str, bytes | None]]] = (
    weakref.WeakKeyDictionary()
)


def _login_for(registry: kopf.OperatorRegistry, url: str, ca_pem: bytes | None = None) -> None:
    target = _LOGIN_TARGETS.get(registry)
    if target is not None:
        target[0] = (url, ca_pem)
        return
    target = [(url, ca_pem)]
    _LOGIN_TARGETS[registry] = target

    @kopf.on.login(registry=registry, id="devcluster-login")
    def devcluster_login(**_: Any) -> kopf.ConnectionInfo:
        server, ca = target[0]
        # ca_data: kopf verifies the server against the cluster's own CA, as a kubeconfig's
        # certificate-authority-data makes it do against a real cluster.
        return kopf.ConnectionInfo(
            server=server, ca_data=ca, default_namespace="default", priority=LOGIN_PRIORITY
        )


def fast_settings(settings: kopf.OperatorSettings) -> None:
    """Settings for an operator in tests and demos: standalone, quick to react and to stop."""
    settings.peering.standalone = True
    settings.background.cancellation_polling = 0.1
    settings.watching.reconnect_backoff = 0.1
    settings.queueing.idle_timeout = 1.0
    settings.queueing.exit_timeout = 1.0
    settings.queueing.error_delays = [0.1, 0.2, 0.5, 1.0]
    settings.networking.error_backoffs = [0.1, 0.2, 0.5]


class OperatorThread:
    """A kopf operator running ``registry`` against ``cluster`` until ``stop()``."""

    def __init__(
        self,
        registry: kopf.OperatorRegistry,
        cluster: DevCluster | str,
        *,
        namespaces: Collection[str] = (),
        settings: SettingsHook | None = None,
        memo: Any = None,
        posting: bool = True,
    ) -> None:
        self.registry = registry
        self.url = cluster if isinstance(cluster, str) else cluster.url
        self.ca_pem = None if isinstance(cluster, str) else cluster.ca_pem
        self.namespaces = list(namespaces)
        self._settings_hook = settings
        self._memo = memo
        self._posting = posting
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self, timeout: float = 15.0) -> Self:
        if self._thread is not None:
            raise RuntimeError("operator already started")
        _login_for(self.registry, self.url, self.ca_pem)
        self._thread = threading.Thread(target=self._run, name="kopf-operator", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise RuntimeError("the kopf operator did not become ready in time") from self.error
        if self.error is not None:
            raise RuntimeError("the kopf operator failed to start") from self.error
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError("the kopf operator did not stop in time")
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced by start()/tests, never swallowed silently
            self.error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        settings = kopf.OperatorSettings()
        fast_settings(settings)
        settings.posting.enabled = self._posting
        if self._settings_hook is not None:
            self._settings_hook(settings)
        await kopf.operator(
            registry=self.registry,
            settings=settings,
            clusterwide=not self.namespaces,
            namespaces=self.namespaces,
            stop_flag=self._stop,
            ready_flag=self._ready,
            memo=self._memo,
        )
