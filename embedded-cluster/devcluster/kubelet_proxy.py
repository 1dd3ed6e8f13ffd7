"""Services as local TCP proxies: kube-proxy's job, one listening socket per Service port.

Each Service port gets a loopback listener that forwards every new connection to one of
the Ready pods its selector matches (round robin). Backends are recomputed on every
reconcile, so a selector switch (the operator promoting a revision) takes effect for the
next connection, exactly like endpoints in a cluster. With no Ready backend a connection
is closed at once: the client sees the same failure as a Service without endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ProxyKey = tuple[str, str, int]  # namespace, Service name, Service port
# (namespace, selector, targetPort) -> local ports of the Ready pods it selects
Backends = Callable[[str, dict[str, str], str], list[int]]


class ServiceProxy:
    """A listener on 127.0.0.1:<free port> forwarding to the current backends."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.backends: list[tuple[str, int]] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._rr = itertools.count()
        self._conns: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        # Abort open connections (cancelling their tasks makes asyncio log noise on 3.11);
        # the pipes then end on their own.
        for writer in list(self._writers):
            writer.transport.abort()
        if self._conns:
            await asyncio.wait(list(self._conns), timeout=2.0)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        self._writers.add(writer)
        try:
            if not self.backends:
                return
            host, port = self.backends[next(self._rr) % len(self.backends)]
            try:
                up_reader, up_writer = await asyncio.open_connection(host, port)
            except OSError:
                return
            self._writers.add(up_writer)
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
                self._writers.discard(up_writer)
        finally:
            writer.close()
            self._writers.discard(writer)
            if task is not None:
                self._conns.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            if writer.can_write_eof():
                writer.write_eof()


async def sync_proxies(
    proxies: dict[ProxyKey, ServiceProxy], services: Iterable[dict[str, Any]], backends: Backends
) -> None:
    """One proxy per port of every Service with a selector; backends re-read each time."""
    wanted: dict[ProxyKey, tuple[dict[str, str], str]] = {}
    for svc in services:
        spec = svc.get("spec") or {}
        if not spec.get("selector"):
            continue
        meta = svc.get("metadata") or {}
        for port in spec.get("ports") or []:
            key = (
                str(meta.get("namespace") or ""),
                str(meta.get("name")),
                int(port.get("port", 0)),
            )
            wanted[key] = (dict(spec["selector"]), str(port.get("targetPort", port.get("port"))))
    for key in [k for k in proxies if k not in wanted]:
        await proxies.pop(key).close()
    for key, (selector, target) in wanted.items():
        proxy = proxies.get(key)
        if proxy is None:
            proxy = ServiceProxy(f"{key[0]}/{key[1]}:{key[2]}")
            await proxy.start()
            proxies[key] = proxy
        proxy.backends = [("127.0.0.1", p) for p in backends(key[0], selector, target)]


SERVICES_FILE = "services.json"
"""Where the kubelet publishes its Service proxies (``publish_proxies``)."""


def publish_proxies(
    proxies: Mapping[tuple[str, str, int], ServiceProxy], workdir: Path, published: str | None
) -> str:
    """Write where each Service listens to ``<workdir>/services.json`` (namespace/name:port
    -> 127.0.0.1:local), for clients in other processes (a test's live traffic); returns what
    was written, and writes nothing when ``published`` is the same already."""
    table = {f"{ns}/{name}:{port}": p.address for (ns, name, port), p in proxies.items()}
    text = json.dumps(table, sort_keys=True)
    if published == text:
        return text
    path = workdir / SERVICES_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return text
