"""Watches: resume after ?resourceVersion=, no stale replay, nothing lost, selectors, timeouts."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from devcluster import DevCluster


def cm(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": dict(labels)},
        "data": {},
    }


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


def collect(cluster: DevCluster, count: int, **kwargs: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for event in cluster.watch("v1", "configmaps", "default", **kwargs):
        events.append(event)
        if len(events) >= count:
            break
    return events


def test_watch_from_resource_version_sends_only_later_events(devcluster: DevCluster) -> None:
    devcluster.create(cm("old"))
    listed = devcluster.request("GET", "/api/v1/namespaces/default/configmaps")
    devcluster.patch("v1", "configmaps", "old", {"data": {"a": "1"}})
    devcluster.create(cm("new"))
    events = collect(devcluster, 2, resource_version=listed["metadata"]["resourceVersion"])
    assert summary(events) == [("MODIFIED", "old"), ("ADDED", "new")]


def test_watch_without_resource_version_starts_with_current_state(devcluster: DevCluster) -> None:
    devcluster.create(cm("a"))
    devcluster.patch("v1", "configmaps", "a", {"data": {"x": "1"}})
    events = collect(devcluster, 1)
    assert summary(events) == [("ADDED", "a")]
    assert events[0]["object"]["data"] == {"x": "1"}


def test_no_event_is_lost_between_list_and_watch(devcluster: DevCluster) -> None:
    listed = devcluster.request("GET", "/api/v1/namespaces/default/configmaps")
    for i in range(20):  # written before the watch connects: all must still arrive
        devcluster.create(cm(f"c{i}"))
    events = collect(devcluster, 20, resource_version=listed["metadata"]["resourceVersion"])
    assert summary(events) == [("ADDED", f"c{i}") for i in range(20)]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)


def test_live_events_arrive_while_watching(devcluster: DevCluster) -> None:
    rv = devcluster.request("GET", "/api/v1/namespaces/default/configmaps")["metadata"][
        "resourceVersion"
    ]
    events: list[dict[str, Any]] = []
    done = threading.Event()

    def watch() -> None:
        events.extend(collect(devcluster, 3, resource_version=rv, timeout=5))
        done.set()

    thread = threading.Thread(target=watch)
    thread.start()
    devcluster.create(cm("x"))
    devcluster.patch("v1", "configmaps", "x", {"data": {"k": "v"}})
    devcluster.delete("v1", "configmaps", "x")
    assert done.wait(5)
    thread.join()
    assert summary(events) == [("ADDED", "x"), ("MODIFIED", "x"), ("DELETED", "x")]
    assert int(events[2]["object"]["metadata"]["resourceVersion"]) > int(
        events[1]["object"]["metadata"]["resourceVersion"]
    )


def test_label_selector_edges_become_added_and_deleted(devcluster: DevCluster) -> None:
    rv = devcluster.create(cm("a", app="no"))["metadata"]["resourceVersion"]
    devcluster.patch("v1", "configmaps", "a", {"metadata": {"labels": {"app": "yes"}}})
    devcluster.patch("v1", "configmaps", "a", {"data": {"k": "v"}})
    devcluster.patch("v1", "configmaps", "a", {"metadata": {"labels": {"app": "no"}}})
    events = collect(devcluster, 3, resource_version=rv, label_selector="app=yes")
    assert summary(events) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_timeout_seconds_ends_the_stream_and_bookmarks_are_harmless(
    devcluster: DevCluster,
) -> None:
    started = time.monotonic()
    response = devcluster.http.get(
        devcluster.url + "/api/v1/namespaces/default/configmaps",
        params={
            "watch": "true",
            "timeoutSeconds": "1",
            "allowWatchBookmarks": "true",
            "resourceVersion": "1",
        },
        timeout=10,
    )
    assert response.status_code == 200
    assert 0.9 < time.monotonic() - started < 4
    lines = response.text.splitlines()
    assert len(lines) == 1  # nothing happened: only the closing bookmark
    mark = json.loads(lines[0])
    assert mark["type"] == "BOOKMARK"
    assert mark["object"]["metadata"]["resourceVersion"] == "1"


def test_streaming_list_ends_its_initial_events_with_a_bookmark(devcluster: DevCluster) -> None:
    devcluster.create(cm("a"))
    with devcluster.http.stream(
        "GET",
        devcluster.url + "/api/v1/namespaces/default/configmaps",
        params={
            "watch": "true",
            "timeoutSeconds": "1",
            "allowWatchBookmarks": "true",
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
        },
    ) as response:
        events = [json.loads(line) for line in response.iter_lines() if line]
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK", "BOOKMARK"]
    annotations = events[1]["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


def test_too_old_resource_version_is_410_expired() -> None:
    with DevCluster(max_log=5) as cluster:
        for i in range(10):
            cluster.create(cm(f"c{i}"))
        events = list(cluster.watch("v1", "configmaps", "default", resource_version="2"))
    assert events[0]["type"] == "ERROR"
    assert (events[0]["object"]["code"], events[0]["object"]["reason"]) == (410, "Expired")


def test_single_object_and_legacy_watch_paths(devcluster: DevCluster) -> None:
    rv = devcluster.create(cm("a"))["metadata"]["resourceVersion"]
    devcluster.create(cm("b"))
    devcluster.patch("v1", "configmaps", "a", {"data": {"k": "v"}})
    with devcluster.http.stream(
        "GET",
        devcluster.url + "/api/v1/watch/namespaces/default/configmaps",
        params={"resourceVersion": rv, "timeoutSeconds": "1", "fieldSelector": "metadata.name=a"},
    ) as response:
        lines = [line for line in response.iter_lines() if line]
    assert len(lines) == 1
    assert '"MODIFIED"' in lines[0]
