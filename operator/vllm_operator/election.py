"""Leader election on a ``coordination.k8s.io/v1`` Lease: the pure state machine.

Several operator replicas watch the same resources; only the one holding the Lease may
reconcile and write. The rules are client-go's ``leaderelection`` (what kube-controller-
manager and most Go operators run), so people reading ``kubectl get lease`` see the usual
fields:

- A replica *observes* the Lease on every attempt and remembers, on its own monotonic
  clock, when the record last changed. Another holder's lease is valid until
  ``observed change + leaseDurationSeconds``; no wall clock of another machine is trusted.
- A free lease (no Lease yet, empty ``holderIdentity``) or an expired one is taken by
  writing our identity with the observed ``resourceVersion``: the API server's optimistic
  concurrency makes exactly one contender win.
- The holder renews every ``retry_period``. It *leads* only while its last accepted write
  started less than ``renew_deadline`` ago. Since ``renew_deadline < lease_duration``, a
  leader whose renewals fail stops writing (the fence) before any other replica may take
  over: a frozen or partitioned leader never writes beside its successor.
- Release (graceful shutdown) writes an empty holder, so a standby takes over on its next
  attempt instead of waiting for expiry.

No I/O here: the shell (``handlers/leader.py``) reads and writes the Lease and passes the
times in, so the unit tests drive acquire, renew, expiry, steal and release with a fake
clock.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vllm_operator.errors import VLLMOperatorError

# The factor client-go requires between renew deadline and retry period (JitterFactor).
JITTER_FACTOR = 1.2
MAX_IDENTITY = 253  # a Lease's holderIdentity is free text; keep it to a name's length


class ElectionSettingsError(VLLMOperatorError, ValueError):
    """Timings that would let two leaders overlap or never renew in time."""


@dataclass(frozen=True)
class Timings:
    """How long a lease lasts, how long a leader may fail to renew, how often to try."""

    lease_duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def check(self) -> None:
        """Raise ``ElectionSettingsError`` naming the setting to change."""
        if self.retry_period <= 0:
            raise ElectionSettingsError("retry period must be > 0 seconds")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ElectionSettingsError(
                f"renew deadline ({self.renew_deadline:g} s) must be more than "
                f"{JITTER_FACTOR:g} x the retry period ({self.retry_period:g} s)"
            )
        if self.lease_duration <= self.renew_deadline:
            raise ElectionSettingsError(
                f"lease duration ({self.lease_duration} s) must be more than the renew "
                f"deadline ({self.renew_deadline:g} s): a leader must stop writing before "
                "another replica may take over"
            )


@dataclass(frozen=True)
class Record:
    """What a Lease says (its ``spec``), plus the ``resourceVersion`` to write against."""

    holder: str = ""  # "" = nobody holds it (released)
    lease_duration: int = 15
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0
    resource_version: str | None = None  # None: the Lease does not exist yet

    def content(self) -> tuple[object, ...]:
        """Everything but the resourceVersion (a no-op write keeps it anyway)."""
        return (
            self.holder,
            self.lease_duration,
            self.acquire_time,
            self.renew_time,
            self.transitions,
        )


def micro_time(when: datetime) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _int(value: Any, default: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return min(max(value, low), high)


def _text(value: Any, limit: int = 64) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def parse(body: Mapping[str, Any] | None) -> Record | None:
    """The record of a Lease as read from the API; None when there is no Lease.

    Any field of the wrong type (another tool wrote it, or a person) reads as absent, so a
    garbled Lease is simply free or expired, never a crash.
    """
    if body is None:
        return None
    spec = body.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    meta = body.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    holder = spec.get("holderIdentity")
    return Record(
        holder=holder[:MAX_IDENTITY] if isinstance(holder, str) else "",
        lease_duration=_int(spec.get("leaseDurationSeconds"), 15, 1, 3600),
        acquire_time=_text(spec.get("acquireTime")),
        renew_time=_text(spec.get("renewTime")),
        transitions=_int(spec.get("leaseTransitions"), 0, 0, 2**31 - 1),
        resource_version=_text(meta.get("resourceVersion")),
    )


def manifest(record: Record, name: str, namespace: str) -> dict[str, Any]:
    """The Lease to create (no resourceVersion) or replace (with it)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if record.resource_version:
        metadata["resourceVersion"] = record.resource_version
    spec: dict[str, Any] = {
        "holderIdentity": record.holder or None,
        "leaseDurationSeconds": record.lease_duration,
        "leaseTransitions": record.transitions,
    }
    if record.acquire_time is not None:
        spec["acquireTime"] = record.acquire_time
    if record.renew_time is not None:
        spec["renewTime"] = record.renew_time
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": spec,
    }


class Election:
    """One replica's view of the election; times are seconds of a monotonic clock."""

    def __init__(self, identity: str, timings: Timings) -> None:
        timings.check()
        if not identity or len(identity) > MAX_IDENTITY:
            raise ElectionSettingsError(f"identity must be 1..{MAX_IDENTITY} characters")
        self.identity = identity
        self.timings = timings
        self.observed: Record | None = None
        self._observed_at: float | None = None  # when the observed record last changed
        self._renewed_at: float | None = None  # start of our last accepted acquire/renew

    # -- reading ---------------------------------------------------------------------------
    def observe(self, record: Record | None, now: float) -> None:
        """What a GET of the Lease returned at ``now``."""
        before = self.observed
        if record is None or before is None:
            changed = record is not before
        else:
            changed = before.content() != record.content()
        if changed or self._observed_at is None:
            self._observed_at = now
        self.observed = record
        if record is None or record.holder != self.identity:
            self._renewed_at = None  # gone, or someone else's: we do not lead, whatever we thought

    def holder(self) -> str:
        return self.observed.holder if self.observed is not None else ""

    def expired(self, now: float) -> bool:
        """Whether the observed holder's lease has run out (True when nobody holds it)."""
        record = self.observed
        if record is None or not record.holder or self._observed_at is None:
            return True
        return now >= self._observed_at + record.lease_duration

    def leading(self, now: float) -> bool:
        """True while this replica may write: it holds the lease and renewed in time."""
        return (
            self._renewed_at is not None
            and self.holder() == self.identity
            and now - self._renewed_at < self.timings.renew_deadline
        )

    # -- writing ---------------------------------------------------------------------------
    def attempt(self, now: float, wall: datetime) -> Record | None:
        """The record to write at ``now`` (acquire or renew), or None: another replica holds
        a valid lease and we wait."""
        record = self.observed
        stamp = micro_time(wall)
        if record is None:
            return Record(
                holder=self.identity,
                lease_duration=self.timings.lease_duration,
                acquire_time=stamp,
                renew_time=stamp,
            )
        if record.holder == self.identity:
            return dataclasses.replace(
                record, lease_duration=self.timings.lease_duration, renew_time=stamp
            )
        if not self.expired(now):
            return None
        return dataclasses.replace(
            record,
            holder=self.identity,
            lease_duration=self.timings.lease_duration,
            acquire_time=stamp,
            renew_time=stamp,
            transitions=record.transitions + 1,
        )

    def written(self, record: Record, started: float) -> None:
        """The API accepted our write (``record`` as it returned), begun at ``started``.

        Leadership is counted from the start of the write, not its answer: whoever reads the
        new record read it after we sent it, so our deadline ends before their expiry.
        """
        self.observed = record
        self._observed_at = started
        if record.holder == self.identity:
            self._renewed_at = started

    def release(self, wall: datetime) -> Record | None:
        """The record that gives the lease up (None when we do not hold it).

        Leadership ends here, before the write is sent: the fence is closed first.
        """
        self._renewed_at = None
        record = self.observed
        if record is None or record.holder != self.identity:
            return None
        stamp = micro_time(wall)
        return dataclasses.replace(
            record, holder="", lease_duration=1, acquire_time=stamp, renew_time=stamp
        )

    def delay(self, now: float) -> float:
        """Seconds until the next attempt: the retry period, or sooner when the observed
        lease expires before that (takeover at expiry, not up to a period later); never
        less than a tenth of the period, so a failing write cannot spin."""
        period = self.timings.retry_period
        if self.holder() in ("", self.identity) or self._observed_at is None:
            return period
        assert self.observed is not None
        left = self._observed_at + self.observed.lease_duration - now
        return min(period, max(period / 10, math.ceil(left * 1000) / 1000))
