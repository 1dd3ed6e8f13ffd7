"""A pod's DNS name on one host (``devcluster.pod_dns``): its own loopback address."""

from __future__ import annotations

import ipaddress
import random

from devcluster.pod_dns import PodAddresses, PodLookup, resolve_pod_name


def lookup(pods: dict[tuple[str, str, str], str]) -> PodLookup:
    return lambda ns, host, sub: pods.get((ns, host, sub))


def test_each_pod_gets_a_loopback_address_of_its_own_until_forgotten() -> None:
    addresses = PodAddresses(rng=random.Random(7))
    a, b = addresses.get("ns", "m-0"), addresses.get("ns", "n-0")
    assert a != b
    for address in (a, b):
        ip = ipaddress.ip_address(address)
        assert ip.is_loopback
        assert not address.startswith("127.0.0.")  # the kubelet's own servers live there
    assert addresses.get("ns", "m-0") == a
    addresses.forget("ns", "m-0")
    assert addresses.get("ns", "m-0") != a  # a recreated pod draws a new one (seeded)
    assert addresses.get("other", "m-0") != b


def test_only_an_exact_pod_name_is_resolved() -> None:
    pods = {("ns", "m-0", "m"): "127.5.6.7", ("other", "m-0", "m"): "127.8.9.10"}
    find = lookup(pods)
    for text in ("m-0.m", "m-0.m.ns", "m-0.m.ns.svc", "m-0.m.ns.svc.cluster.local"):
        assert resolve_pod_name(text, "ns", find) == "127.5.6.7", text
    assert resolve_pod_name("m-0.m.other", "ns", find) == "127.8.9.10"
    for text in (
        "m-0",  # a bare name is no pod's DNS name here
        "x-0.m.ns",  # no such pod
        "m-0.m.ns.example.com",  # not the cluster's domain
        "http://m-0.m.ns:8000",  # URLs are the Service proxies' business
        "m-0.m.ns:6379",
        "Qwen/Qwen3-30B",
        "--port",
    ):
        assert resolve_pod_name(text, "ns", find) == text, text
    assert resolve_pod_name("m-0.m.ns", "ns", None) == "m-0.m.ns"


def test_a_name_resolves_to_a_live_pod_with_that_hostname_and_subdomain() -> None:
    pods = [
        {
            "metadata": {"name": "m-0", "namespace": "ns"},
            "spec": {"hostname": "m-0", "subdomain": "m"},
        },
        {
            "metadata": {"name": "gone", "namespace": "ns", "deletionTimestamp": "t"},
            "spec": {"hostname": "g-0", "subdomain": "m"},
        },
    ]
    addresses = PodAddresses(lambda: pods, rng=random.Random(3))
    found = addresses.lookup("ns", "m-0", "m")
    assert found == addresses.get("ns", "m-0")
    assert resolve_pod_name("m-0.m.ns.svc.cluster.local", "ns", addresses.lookup) == found
    for args in (("ns", "m-0", "other"), ("other", "m-0", "m"), ("ns", "g-0", "m")):
        assert addresses.lookup(*args) is None, args
