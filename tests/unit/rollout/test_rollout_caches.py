"""The reconcile's read side: watch caches -> Observed, own writes, write only on change."""

from __future__ import annotations

import copy
import inspect
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from rollout_world import merge, spec

from builders import resource
from vllm_operator.config import OperatorConfig
from vllm_operator.handlers.caches import (
    CACHED_CHILDREN,
    VLLMD_CACHE,
    Caches,
    ObservedChildren,
    observed_children,
    slim_pod,
)
from vllm_operator.handlers.reconcile import Reconciler, annotations_to_write
from vllm_operator.kube.changes import changes
from vllm_operator.kube.client import Kube, api_client_for
from vllm_operator.kube.own_writes import OwnWrites
from vllm_operator.kube.permissions import PERMISSIONS
from vllm_operator.metrics import OperatorMetrics
from vllm_operator.render import labels
from vllm_operator.rollout import observe, plan

Obj = dict[str, Any]
NS, NAME, UID = "ml", "qwen", "uid-1"
KINDS = ("Deployment", "Service", "Job", "Pod")


def vllmd(rv: str = "10", **meta: Any) -> Obj:
    return resource(
        spec(), name=NAME, namespace=NS, uid=UID, generation=1, resourceVersion=rv, **meta
    )


def child(kind: str, name: str, *, owner: str = NAME, uid: str | None = UID, rv: str = "5") -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": NS,
        "resourceVersion": rv,
        "labels": {
            labels.DEPLOYMENT_LABEL: owner,
            labels.MANAGED_BY_LABEL: labels.MANAGED_BY,
            labels.REVISION_LABEL: "r1",
        },
    }
    if uid is not None:
        meta["ownerReferences"] = [
            {"kind": "VLLMDeployment", "name": owner, "uid": uid, "controller": True}
        ]
    return {"kind": kind, "metadata": meta, "spec": {"replicas": 1}}


def cached(*objs: Obj, body: Obj | None = None, writes: OwnWrites | None = None) -> Caches:
    by_kind: dict[str, list[Obj]] = {kind: [] for kind in KINDS}
    by_kind["VLLMDeployment"] = [body] if body is not None else []
    for obj in objs:
        by_kind[obj["kind"]].append(obj)
    return Caches.of(by_kind, writes)


# -- caches -> Observed --------------------------------------------------------------------


def test_observed_holds_only_this_resources_children_and_its_pods() -> None:
    pod = {**child("Pod", "qwen-r1-abc", uid="uid-rs"), "spec": {"nodeName": "gpu-1"}}
    caches = cached(
        child("Deployment", "qwen-r1"),
        child("Deployment", "qwen-r0", uid="uid-other"),  # labelled as ours, owned by another
        child("Deployment", "beta-r1", owner="beta"),  # another resource's
        child("Service", "qwen"),
        child("Job", "qwen-r1-bench-1"),
        pod,  # controlled by its ReplicaSet: the labels decide
        body=vllmd(),
    )
    body = caches.body(NS, NAME)
    assert body is not None
    observed = observe(body, **observed_children(caches, NS, NAME))
    assert [d.name for d in observed.deployments] == ["qwen-r1"]
    assert [s.name for s in observed.services] == ["qwen"]
    assert [j.name for j in observed.jobs] == ["qwen-r1-bench-1"]
    assert [(p.name, p.node_name) for p in observed.pods] == [("qwen-r1-abc", "gpu-1")]
    assert caches.body(NS, "missing") is None
    assert observed_children(caches, NS, "missing") == {
        "deployments": [],
        "services": [],
        "jobs": [],
        "pods": [],
        "budgets": [],
        "autoscalers": [],  # no engine given: never watched, always empty
    }


def test_every_cached_kind_feeds_observe_and_is_watched_by_kopf_with_permission() -> None:
    parameters = inspect.signature(observe).parameters
    for cached in CACHED_CHILDREN:
        assert cached.observed_as in ObservedChildren.__annotations__
        assert cached.observed_as in parameters
    declared = {(p.api_group, p.resource, p.verb, p.by) for p in PERMISSIONS}
    for cached in (VLLMD_CACHE, *CACHED_CHILDREN):
        res = cached.resource
        assert (res.group, res.plural, "watch", "kopf") in declared
        assert {d[:3] for d in declared} >= {(res.group, res.plural, "list")}
    # The operator itself lists nothing but a finished Job's pods (before its verdict).
    assert [(p.resource, p.by) for p in PERMISSIONS if p.verb == "list" and p.by != "kopf"] == [
        ("pods", "operator")
    ]


def test_an_unbound_cache_refuses_to_answer_rather_than_look_empty() -> None:
    with pytest.raises(RuntimeError, match="no cache of VLLMDeployment"):
        Caches().body(NS, NAME)


def test_slim_pod_keeps_what_the_planner_reads_and_drops_the_spec() -> None:
    pod = child("Pod", "p", uid="uid-job")
    pod["metadata"]["managedFields"] = [{"manager": "x"}]
    pod["spec"] = {"nodeName": "n1", "containers": [{"name": "bench", "env": [{"name": "A"}]}]}
    pod["status"] = {"phase": "Failed", "containerStatuses": [{"name": "bench"}]}
    slim = slim_pod(pod)
    assert slim["spec"] == {"nodeName": "n1"}
    assert slim["status"] == pod["status"]
    assert "managedFields" not in slim["metadata"]
    assert slim["metadata"]["ownerReferences"] == pod["metadata"]["ownerReferences"]


# -- own writes ----------------------------------------------------------------------------


def test_a_create_is_seen_until_the_watch_brings_it() -> None:
    writes = OwnWrites()
    caches = cached(body=vllmd(), writes=writes)
    created = child("Job", "qwen-r1-bench-1", rv="11")
    caches.record("Job", NS, NAME, "qwen-r1-bench-1", created)
    assert caches.children("Job", NS, NAME) == [created]  # the watch has not delivered it
    later = cached(child("Job", "qwen-r1-bench-1", rv="12"), body=vllmd(), writes=writes)
    assert [j["metadata"]["resourceVersion"] for j in later.children("Job", NS, NAME)] == ["12"]
    assert len(writes) == 0  # caught up: the record is gone


def test_a_status_write_is_seen_until_the_cache_has_it_or_something_newer() -> None:
    writes = OwnWrites()
    stale = cached(body=vllmd(rv="10"), writes=writes)
    written = {**vllmd(rv="13"), "status": {"phase": "Serving"}}
    stale.record("VLLMDeployment", NS, NAME, NAME, written)
    assert stale.body(NS, NAME) == written
    # An event from before the write (another writer's rv 12) does not hide the write.
    between = cached(body=vllmd(rv="12"), writes=writes)
    assert between.body(NS, NAME) == written
    newer = {**vllmd(rv="14"), "status": {"phase": "Progressing"}}
    assert cached(body=newer, writes=writes).body(NS, NAME) == newer
    assert len(writes) == 0


def test_a_delete_hides_the_object_until_the_watch_shows_it_gone_or_changed() -> None:
    writes = OwnWrites()
    before = child("Deployment", "qwen-r0", rv="7")
    caches = cached(before, body=vllmd(), writes=writes)
    caches.record("Deployment", NS, NAME, "qwen-r0", None)
    assert caches.children("Deployment", NS, NAME) == []
    finalizing = copy.deepcopy(before)
    finalizing["metadata"].update(resourceVersion="9", deletionTimestamp="2026-01-01T00:00:00Z")
    assert cached(finalizing, body=vllmd(), writes=writes).children("Deployment", NS, NAME) == [
        finalizing
    ]


def test_a_patched_object_deleted_by_someone_else_is_gone_not_resurrected() -> None:
    writes = OwnWrites()
    caches = cached(child("Service", "qwen", rv="5"), body=vllmd(), writes=writes)
    caches.record("Service", NS, NAME, "qwen", child("Service", "qwen", rv="8"))
    assert cached(body=vllmd(), writes=writes).children("Service", NS, NAME) == []


def test_opaque_resource_versions_compare_by_identity() -> None:
    writes = OwnWrites()
    caches = cached(body=vllmd(rv="abc"), writes=writes)
    written = {**vllmd(rv="xyz"), "status": {"phase": "Serving"}}
    caches.record("VLLMDeployment", NS, NAME, NAME, written)
    assert caches.body(NS, NAME) == written  # still the version from before the write
    other = vllmd(rv="qqq")
    assert cached(body=other, writes=writes).body(NS, NAME) == other


def test_records_expire_and_are_bounded() -> None:
    now = [0.0]
    writes = OwnWrites(ttl=5.0, limit=3, clock=lambda: now[0])
    for i in range(5):
        writes.record(("Job", NS, f"j{i}"), NAME, None, child("Job", f"j{i}", rv=str(10 + i)))
    assert len(writes) == 3
    assert writes.view(("Job", NS, "j0"), None) is None  # the oldest went first
    assert writes.view(("Job", NS, "j4"), None) is not None
    now[0] = 5.0
    assert writes.view(("Job", NS, "j4"), None) is None
    assert writes.view(("Job", NS, "j3"), None) is None
    assert len(writes) == 1  # j2 is dropped when next read
    now[0] = 20.0
    writes.record(("Job", NS, "j9"), NAME, None, child("Job", "j9", rv="30"))
    assert len(writes) == 1  # a write sweeps the expired ones: only j9 is left


# -- write only on change ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "changed"),
    [
        ({"spec": {"replicas": 1}}, False),
        ({"spec": {"replicas": 2}}, True),
        ({"spec": {"selector": None}}, False),  # removing what is not there
        ({"spec": None}, True),
        ({"metadata": {"labels": {labels.ROLE_LABEL: "stable"}}}, True),
        ({"metadata": {"labels": {labels.DEPLOYMENT_LABEL: NAME}}}, False),
        ({"spec": {"replicas": {"x": 1}}}, True),  # an object replaces a number
        ({"status": {}}, True),  # creates the key
        ({}, False),
    ],
)
def test_changes_follows_merge_patch_semantics(patch: Obj, changed: bool) -> None:
    obj = child("Deployment", "qwen-r1")
    assert changes(obj, patch) is changed
    assert (merge(obj, patch) != obj) is changed  # the same answer as applying it


def test_annotations_are_written_only_when_they_differ() -> None:
    body = vllmd(annotations={"a": "1", "b": "2"})
    assert annotations_to_write(body, {"a": "1", "b": None, "c": None}) == {"b": None}
    assert annotations_to_write(body, {"a": "2"}) == {"a": "2"}
    assert annotations_to_write(vllmd(), {"a": None}) == {}


class _Recording(Kube):
    """A Kube that answers writes like an API server that bumps resourceVersion, and
    records them; nothing reaches the network."""

    def __init__(self) -> None:
        super().__init__(api_client_for("http://127.0.0.1:9"), workers=1)
        self.writes: list[tuple[str, str, str]] = []
        self.rv = 100

    def _stored(self, obj: Obj) -> Obj:
        self.rv += 1
        out = copy.deepcopy(obj)
        out.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        return out

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.writes.append(("get", kind, name))  # who holds a name about to be created
        return None

    async def create(self, manifest: Any) -> dict[str, Any] | None:
        self.writes.append(("create", manifest["kind"], manifest["metadata"]["name"]))
        return self._stored(dict(manifest))

    async def patch(
        self, kind: str, namespace: str, name: str, patch: Any, *, subresource: str = ""
    ) -> dict[str, Any]:
        self.writes.append(("patch", kind, name))
        current = self.body if kind == "VLLMDeployment" else {"metadata": {"name": name}}
        self.body = self._stored(merge(current, dict(patch)))
        return self.body

    async def delete(self, kind: str, namespace: str, name: str) -> bool:
        self.writes.append(("delete", kind, name))
        return True

    async def event(self, *args: Any, **kwargs: Any) -> None:
        self.writes.append(("event", "", ""))


async def test_a_second_pass_on_a_lagging_cache_writes_nothing() -> None:
    kube = _Recording()
    kube.body = vllmd()
    caches = cached(body=vllmd())  # a watch that never catches up
    reconciler = Reconciler(
        kube, OperatorConfig(), OperatorMetrics(CollectorRegistry()), caches=caches
    )
    try:
        await reconciler.reconcile(NS, NAME)
        first = [w for w in kube.writes if w[0] not in ("event", "get")]
        assert ("patch", "VLLMDeployment", NAME) in first  # the status
        assert any(w[:2] == ("create", "Deployment") for w in first)  # the candidate
        kube.writes.clear()
        await reconciler.reconcile(NS, NAME)
        # It sees its candidate (status: waiting for it) and creates nothing again.
        assert kube.writes == [("patch", "VLLMDeployment", NAME)]
        kube.writes.clear()
        await reconciler.reconcile(NS, NAME)
        assert kube.writes == []  # nothing changed: no request at all
    finally:
        kube.close()


class _FreshPods(_Recording):
    """The API holds the Job's pod terminated; the cache still shows it running."""

    def __init__(self, pod: Obj) -> None:
        super().__init__()
        self.pod, self.lists = pod, 0

    async def list_pods(self, namespace: str, selector: Any) -> list[dict[str, Any]]:
        self.lists += 1
        return [self.pod]


async def test_a_finished_jobs_pods_are_read_fresh_once_before_the_verdict() -> None:
    job = child("Job", "qwen-r1-bench-1")
    job["metadata"]["uid"] = "uid-job"
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    running = child("Pod", "qwen-r1-bench-1-x", uid="uid-job")
    running["metadata"]["labels"]["vllm-operator.dev/job"] = "qwen-r1-bench-1"
    running["status"] = {"phase": "Running", "containerStatuses": [{"name": "bench"}]}
    done = copy.deepcopy(running)
    done["status"] = {
        "phase": "Succeeded",
        "containerStatuses": [
            {"name": "bench", "state": {"terminated": {"exitCode": 0, "message": "{}"}}}
        ],
    }
    kube = _FreshPods(done)
    kube.body = vllmd()
    seen: list[Any] = []

    def planner(observed: Any, now: Any, settings: Any) -> Any:
        seen.append(observed)
        return plan(observed, now, settings)

    caches = cached(job, running, body=vllmd())  # the pods' watch lags the Job's
    reconciler = Reconciler(
        kube,
        OperatorConfig(),
        OperatorMetrics(CollectorRegistry()),
        caches=caches,
        planner=planner,
    )
    try:
        await reconciler.reconcile(NS, NAME)
        (pod,) = seen[0].pods
        assert pod.phase == "Succeeded"  # not the cache's "Running"
        assert pod.containers[0].exit_code == 0
        await reconciler.reconcile(NS, NAME)
        assert kube.lists == 1  # once per Job version, not every pass
    finally:
        kube.close()
