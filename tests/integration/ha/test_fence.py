"""The election shell against the embedded API with a fake clock: the Lease written as
client-go writes it, the conflict decided by the API's resourceVersion check, and the fence
refusing every create, patch and delete of a replica that lost the lease (the Lease calls
themselves never fenced)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster import DevCluster
from vllm_operator.election import Timings
from vllm_operator.handlers.leader import Leader, NotLeader
from vllm_operator.kube.client import Kube, api_client_for

TIMINGS = Timings(lease_duration=15, renew_deadline=10.0, retry_period=2.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def kubes(kubeconfig: Path) -> Iterator[tuple[Kube, Kube]]:
    # Through a kubeconfig, as the operator logs in: its client verifies the HTTPS server.
    a, b = (
        Kube(api_client_for(kubeconfig=str(kubeconfig))),
        Kube(api_client_for(kubeconfig=str(kubeconfig))),
    )
    yield a, b
    a.close()
    b.close()


def _service(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"port": 80}]},
    }


async def test_fenced_writes_stop_at_the_renew_deadline_and_resume_for_the_new_leader(
    devcluster: DevCluster, kubes: tuple[Kube, Kube]
) -> None:
    clock = Clock()
    won: list[str] = []
    a = Leader(
        kubes[0],
        name="ops",
        namespace="default",
        me="a",
        timings=TIMINGS,
        on_change=lambda leading: won.append("a" if leading else "-a"),
        monotonic=clock,
    )
    b = Leader(
        kubes[1],
        name="ops",
        namespace="default",
        me="b",
        timings=TIMINGS,
        on_change=lambda leading: won.append("b" if leading else "-b"),
        monotonic=clock,
    )
    kubes[0].fence, kubes[1].fence = a.fence, b.fence

    await a.attempt()
    await b.attempt()
    assert won == ["a"]
    lease = devcluster.get("coordination.k8s.io/v1", "leases", "ops")
    assert lease["spec"]["holderIdentity"] == "a"
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert await kubes[0].create(_service("by-a")) is not None  # stored
    with pytest.raises(NotLeader):
        await kubes[1].create(_service("by-b"))

    clock.now += 10.0  # a could not renew for the whole deadline (its API calls hung)
    for write in (
        kubes[0].create(_service("late")),
        kubes[0].patch("Service", "default", "by-a", {"metadata": {"labels": {"x": "1"}}}),
        kubes[0].delete("Service", "default", "by-a"),
    ):
        with pytest.raises(NotLeader):
            await write
    assert not devcluster.exists("v1", "services", "late")
    await b.attempt()  # the lease is still a's for b until 15 s after b saw it change
    assert won == ["a"]

    clock.now += 5.0
    await b.attempt()
    assert won == ["a", "b"]
    assert await kubes[1].create(_service("by-b")) is not None  # stored
    await a.attempt()  # a wakes up: it sees b and stays fenced, no steal-back
    assert not a.leading
    assert won == ["a", "b", "-a"]
    lease = devcluster.get("coordination.k8s.io/v1", "leases", "ops")
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("b", 1)

    assert await b.release() is True
    assert not b.leading
    with pytest.raises(NotLeader):
        await kubes[1].delete("Service", "default", "by-b")
    lease = devcluster.get("coordination.k8s.io/v1", "leases", "ops")
    assert lease["spec"].get("holderIdentity") is None
    await a.attempt()  # released: taken at once, no expiry wait
    assert a.leading
    assert won == ["a", "b", "-a", "-b", "a"]


async def test_an_unreachable_api_never_ends_the_election_loop() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"  # nothing listens once closed
    kube = Kube(api_client_for(url), request_timeout=1)
    try:
        clock = Clock()
        leader = Leader(
            kube, name="ops", namespace="default", me="a", timings=TIMINGS, monotonic=clock
        )
        await leader.attempt()  # connection refused: logged, not raised
        await leader.attempt()
        assert not leader.leading
        assert await leader.release() is False
    finally:
        kube.close()
