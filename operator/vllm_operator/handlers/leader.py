"""Leader election's shell: keep (or wait for) the Lease, fence writes, gate the work queue.

Every replica runs kopf's watches (a warm standby: its queue knows every resource), but
only the Lease holder reconciles. The pure rules are in ``vllm_operator.election``; this
module only reads and writes the Lease (on a client of its own with a request timeout, so
a busy reconcile pool never delays a renewal) and applies the answers:

- ``fence`` is installed on the reconcile's ``Kube``: every create, patch and delete first
  checks leadership on the monotonic clock, so a reconcile in flight when a renewal fails
  stops before its next write, even if this loop is stuck;
- ``guard`` wraps the queue's worker: while standing by, a key is dropped (its resource is
  still ``known``) and when leadership is won the queue resyncs every known resource;
- ``release`` (graceful shutdown) closes the fence, then writes an empty holder so a
  standby takes over on its next attempt instead of waiting for the lease to expire.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from vllm_operator.config import OperatorConfig
from vllm_operator.election import Election, Timings, manifest, parse
from vllm_operator.errors import TransientError
from vllm_operator.kube.client import Kube, KubeError, api_client_for

logger = logging.getLogger(__name__)

Key = tuple[str, str]
Worker = Callable[[Key], Awaitable[float | None]]
Monotonic = Callable[[], float]
Wall = Callable[[], datetime]


class NotLeader(TransientError):
    """A write refused because this replica does not hold the Lease (any more)."""


def identity(pod_name: str | None) -> str:
    """The replica's name in the Lease: pod (or host) name plus a random suffix, so a
    restarted pod with the same name is a new contender, never the old holder."""
    base = (pod_name or socket.gethostname() or "vllm-operator")[:200]
    return f"{base}_{secrets.token_hex(4)}"


class Leader:
    """One replica's side of the election (start with ``run`` as a task)."""

    def __init__(
        self,
        kube: Kube,
        *,
        name: str,
        namespace: str,
        me: str,
        timings: Timings,
        on_change: Callable[[bool], None] = lambda leading: None,
        monotonic: Monotonic = time.monotonic,
        wall: Wall = lambda: datetime.now(UTC),
    ) -> None:
        self.kube = kube
        self.name = name
        self.namespace = namespace
        self.election = Election(me, timings)
        self.on_change = on_change  # called with True when leadership is won, False when lost
        self.monotonic = monotonic
        self.wall = wall
        self._was_leading = False
        self._last_holder: str | None = None
        self.released = False

    @property
    def leading(self) -> bool:
        return self.election.leading(self.monotonic())

    def fence(self) -> None:
        """Raise ``NotLeader`` unless this replica may write now."""
        if not self.leading:
            raise NotLeader(f"not the leader ({self.describe()}): write refused")

    def describe(self) -> str:
        holder = self.election.holder() or "nobody"
        return f"Lease {self.namespace}/{self.name} held by {holder}"

    def guard(self, worker: Worker) -> Worker:
        """``worker`` that runs only while leading (a standby drops the key)."""

        async def guarded(key: Key) -> float | None:
            if not self.leading:
                return None
            try:
                return await worker(key)
            except NotLeader:
                logger.info("leadership lost during the reconcile of %s/%s; stopped", *key)
                return None

        return guarded

    async def attempt(self) -> None:
        """One GET and, if the rules say so, one acquire or renew write."""
        timeout = self.election.timings.renew_deadline / 2
        started = self.monotonic()
        try:
            body = await asyncio.wait_for(self.kube.get_lease(self.namespace, self.name), timeout)
            self.election.observe(parse(body), started)
            wanted = self.election.attempt(started, self.wall())
            if wanted is not None:
                stored = await asyncio.wait_for(
                    self.kube.write_lease(manifest(wanted, self.name, self.namespace)), timeout
                )
                record = parse(stored)
                if record is not None:
                    self.election.written(record, started)
        except Exception as exc:
            # 409: another replica wrote first; anything else (refused, unreachable, timed
            # out): try again next period. The fence needs nothing from here: leadership
            # lapses by itself at the renew deadline.
            log = logger.debug if isinstance(exc, KubeError) and exc.code == 409 else logger.info
            log("lease %s/%s attempt failed: %s", self.namespace, self.name, exc)
        self._report()

    def _report(self) -> None:
        leading = self.leading
        holder = self.election.holder()
        if leading and not self._was_leading:
            logger.info("leading: acquired %s", self.describe())
            self._was_leading = True
            self.on_change(True)
        elif not leading and self._was_leading:
            logger.warning("stopped leading: %s", self.describe())
            self._was_leading = False
            self.on_change(False)
        elif not leading and holder != self._last_holder:
            logger.info("standing by: %s", self.describe())
        self._last_holder = holder

    async def run(self) -> None:
        """Attempt every period (sooner at the observed lease's expiry) until cancelled."""
        while True:
            await self.attempt()
            await asyncio.sleep(self.election.delay(self.monotonic()))

    async def release(self) -> bool:
        """Give the Lease up if held (fence closed first); True when it was released."""
        record = self.election.release(self.wall())
        if self._was_leading:
            self._was_leading = False
            self.on_change(False)
        if record is None:
            return False
        try:
            timeout = self.election.timings.renew_deadline / 2
            await asyncio.wait_for(
                self.kube.write_lease(manifest(record, self.name, self.namespace)), timeout
            )
        except Exception as exc:
            logger.warning("could not release %s (it expires on its own): %s", self.name, exc)
            return False
        self.released = True
        logger.info("released Lease %s/%s", self.namespace, self.name)
        return True


def leader_for(
    config: OperatorConfig, kube: Kube | None, on_change: Callable[[bool], None]
) -> Leader:
    """The ``Leader`` of ``config``; on a ``Kube`` of its own unless a test passes one."""
    timings = config.timings
    if kube is None:
        kube = Kube(
            api_client_for(config.api_url, config.kubeconfig, config.context),
            workers=2,
            request_timeout=timings.renew_deadline / 2,
        )
    return Leader(
        kube,
        name=config.lease_name,
        namespace=config.lease_namespace,
        me=identity(config.pod_name),
        timings=timings,
        on_change=on_change,
    )
