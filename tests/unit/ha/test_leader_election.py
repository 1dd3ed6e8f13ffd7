"""The Lease election state machine with a fake clock: acquire, renew, expire, steal, release.

Two ``Election``s share a tiny in-memory Lease with the API server's optimistic concurrency
(a write names the resourceVersion it read; a stale one is refused), so the races the real
API decides are decided here the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from vllm_operator.election import (
    Election,
    ElectionSettingsError,
    Record,
    Timings,
    manifest,
    parse,
)

T = Timings(lease_duration=15, renew_deadline=10.0, retry_period=2.0)
EPOCH = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class LeaseStore:
    """One Lease with resourceVersion checks, like the API server's PUT/POST."""

    def __init__(self) -> None:
        self.body: dict[str, Any] | None = None
        self.rv = 0
        self.writes = 0

    def read(self) -> Record | None:
        return parse(self.body)

    def write(self, record: Record) -> Record | None:
        current = self.body["metadata"]["resourceVersion"] if self.body else None
        if record.resource_version != current:
            return None  # 409: created meanwhile, or a stale resourceVersion
        self.rv += 1
        self.writes += 1
        body = manifest(record, "vllm-operator", "ops")
        body["metadata"]["resourceVersion"] = str(self.rv)
        self.body = body
        return parse(body)


def step(election: Election, store: LeaseStore, now: float) -> bool:
    """One attempt of the shell's loop: GET, maybe write; returns leading afterwards."""
    election.observe(store.read(), now)
    wanted = election.attempt(now, EPOCH + timedelta(seconds=now))
    if wanted is not None:
        written = store.write(wanted)
        if written is not None:
            election.written(written, now)
    return election.leading(now)


def test_first_replica_acquires_a_missing_lease_and_renews_it() -> None:
    store, a = LeaseStore(), Election("a", T)
    assert not a.leading(0.0)
    assert step(a, store, 0.0)
    body = store.body
    assert body is not None
    assert body["spec"]["holderIdentity"] == "a"
    assert body["spec"]["leaseDurationSeconds"] == 15
    assert body["spec"]["renewTime"] == "2026-11-30T12:00:00.000000Z"
    first_acquire = body["spec"]["acquireTime"]
    assert step(a, store, 2.0)
    assert store.body is not None
    assert store.body["spec"]["renewTime"] == "2026-11-30T12:00:02.000000Z"
    assert store.body["spec"]["acquireTime"] == first_acquire  # renew keeps acquireTime
    assert store.body["spec"]["leaseTransitions"] == 0


def test_standby_waits_while_the_lease_is_renewed_and_never_leads() -> None:
    store, a, b = LeaseStore(), Election("a", T), Election("b", T)
    step(a, store, 0.0)
    for now in range(1, 60):
        if now % 2 == 0:
            assert step(a, store, float(now))
        assert not step(b, store, float(now) + 0.5)
        record = store.read()
        assert record is not None
        assert record.holder == "a"


def test_takeover_after_expiry_counted_from_the_standbys_own_observation() -> None:
    store, a, b = LeaseStore(), Election("a", T), Election("b", T)
    step(a, store, 0.0)
    step(b, store, 100.0)  # b first sees the record at t=100 (its own clock)
    assert not step(b, store, 114.9)  # the record has not changed: 15 s from 100
    assert b.delay(114.0) == pytest.approx(1.0)  # wakes at expiry, not a period later
    assert step(b, store, 115.0)
    record = store.read()
    assert record is not None
    assert (record.holder, record.transitions) == ("b", 1)


def test_leader_that_cannot_renew_stops_leading_before_anyone_may_take_over() -> None:
    store, a, b = LeaseStore(), Election("a", T), Election("b", T)
    step(a, store, 0.0)
    step(b, store, 0.1)
    # a's renewals fail from now on (API unreachable): a only ever observes nothing new.
    assert a.leading(9.99)
    assert not a.leading(10.0)  # renew deadline: the fence closes
    assert not step(b, store, 14.0)  # b must still wait: lease valid until 0.1 + 15
    assert step(b, store, 15.1)
    assert not a.leading(15.1)


def test_frozen_leader_is_fenced_when_it_wakes_after_a_takeover() -> None:
    store, a, b = LeaseStore(), Election("a", T), Election("b", T)
    step(a, store, 0.0)
    step(b, store, 0.0)
    assert step(b, store, 15.0)  # a was frozen (SIGSTOP, GC pause) since t=0
    assert not a.leading(15.5)  # before any read: its deadline passed long ago
    assert not step(a, store, 16.0)  # and it sees b: no write, no steal back
    record = store.read()
    assert record is not None
    assert record.holder == "b"


def test_stale_write_loses_the_race_exactly_one_leader() -> None:
    store, a, b = LeaseStore(), Election("a", T), Election("b", T)
    a.observe(store.read(), 0.0)
    b.observe(store.read(), 0.0)
    wa = a.attempt(0.0, EPOCH)
    wb = b.attempt(0.0, EPOCH)
    assert wa is not None
    assert wb is not None
    written = store.write(wa)
    assert written is not None
    a.written(written, 0.0)
    assert store.write(wb) is None  # created meanwhile: 409
    assert a.leading(0.1)
    assert not b.leading(0.1)
    assert not step(b, store, 1.0)


def test_release_hands_over_at_once_and_closes_the_fence_first() -> None:
    store, a, b = LeaseStore(), Election("a", T), Election("b", T)
    step(a, store, 0.0)
    step(b, store, 1.0)
    released = a.release(EPOCH + timedelta(seconds=3))
    assert not a.leading(3.0)  # before the write is even sent
    assert released is not None
    assert (released.holder, released.lease_duration) == ("", 1)
    assert store.write(released) is not None
    assert store.body is not None
    assert store.body["spec"]["holderIdentity"] is None
    assert step(b, store, 3.5)  # no waiting for expiry
    record = store.read()
    assert record is not None
    assert (record.holder, record.transitions) == ("b", 1)


def test_release_by_a_non_holder_writes_nothing() -> None:
    store, a, b = LeaseStore(), Election("a", T), Election("b", T)
    step(a, store, 0.0)
    step(b, store, 0.5)
    assert b.release(EPOCH) is None


def test_deleted_lease_ends_leadership_until_recreated() -> None:
    store, a = LeaseStore(), Election("a", T)
    step(a, store, 0.0)
    a.observe(None, 1.0)
    assert not a.leading(1.0)
    store.body = None  # deleted by a person; the next attempt creates it again
    assert step(a, store, 2.0)


@pytest.mark.parametrize(
    "body",
    [
        {"spec": "nonsense"},
        {"spec": {"holderIdentity": 7, "leaseDurationSeconds": "15", "leaseTransitions": -4}},
        {"metadata": [], "spec": {"holderIdentity": None, "renewTime": {"x": 1}}},
        {"spec": {"holderIdentity": "x" * 100_000, "leaseDurationSeconds": 10**12}},
    ],
)
def test_garbled_lease_reads_as_free_or_bounded_never_a_crash(body: dict[str, Any]) -> None:
    record = parse(body)
    assert record is not None
    assert len(record.holder) <= 253
    assert 1 <= record.lease_duration <= 3600
    assert record.transitions >= 0
    a = Election("a", T)
    a.observe(record, 0.0)
    if not record.holder:
        assert a.attempt(0.0, EPOCH) is not None  # free: take it


def test_delay_never_spins_when_the_write_keeps_failing() -> None:
    store, a, b = LeaseStore(), Election("a", T), Election("b", T)
    step(a, store, 0.0)
    b.observe(store.read(), 0.0)
    assert b.delay(30.0) == pytest.approx(0.2)  # expired long ago: a tenth of the period
    assert a.delay(1.0) == 2.0


@pytest.mark.parametrize(
    ("timings", "words"),
    [
        (Timings(lease_duration=10, renew_deadline=10.0, retry_period=2.0), "lease duration"),
        (Timings(lease_duration=15, renew_deadline=2.0, retry_period=2.0), "renew deadline"),
        (Timings(lease_duration=15, renew_deadline=10.0, retry_period=0.0), "retry period"),
    ],
)
def test_timings_that_allow_two_leaders_are_refused(timings: Timings, words: str) -> None:
    with pytest.raises(ElectionSettingsError, match=words):
        Election("a", timings)


def test_identity_is_bounded() -> None:
    with pytest.raises(ElectionSettingsError):
        Election("", T)
    with pytest.raises(ElectionSettingsError):
        Election("x" * 254, T)
