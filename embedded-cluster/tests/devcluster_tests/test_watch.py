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


def test_timeout_seconds_ends_the_stream_and_a_bookmark_comes_before_it(
    devcluster: DevCluster,
) -> None:
    """A real server sends its bookmark 2 s before timeoutSeconds, never at the end."""
    started = time.monotonic()
    response = devcluster.http.get(
        devcluster.url + "/api/v1/namespaces/default/configmaps",
        params={
            "watch": "true",
            "timeoutSeconds": "3",
            "allowWatchBookmarks": "true",
            "resourceVersion": "1",
        },
        timeout=10,
    )
    assert response.status_code == 200
    assert 2.9 < time.monotonic() - started < 6
    lines = response.text.splitlines()
    assert len(lines) == 1  # nothing happened: only the pre-timeout bookmark
    mark = json.loads(lines[0])
    assert mark["type"] == "BOOKMARK"
    assert mark["object"]["metadata"]["resourceVersion"] == "1"
    short = devcluster.http.get(
        devcluster.url + "/api/v1/namespaces/default/configmaps",
        params={"watch": "true", "timeoutSeconds": "1", "allowWatchBookmarks": "true"},
    )
    assert short.text == ""  # under 2 s: no bookmark is due before the end


def test_bookmarks_come_periodically_with_the_current_version(devcluster: DevCluster) -> None:
    assert devcluster.server is not None
    devcluster.server.bookmark_interval = 0.3
    seen: list[dict[str, Any]] = []
    with devcluster.http.stream(
        "GET",
        devcluster.url + "/api/v1/namespaces/default/configmaps",
        params={"watch": "true", "timeoutSeconds": "30", "allowWatchBookmarks": "true"},
    ) as response:
        for line in response.iter_lines():
            if not line:
                continue
            seen.append(json.loads(line))
            marks = [e for e in seen if e["type"] == "BOOKMARK"]
            if len(marks) == 1 and seen[-1]["type"] == "BOOKMARK":
                devcluster.create(cm("after-first-bookmark"))
            if len(marks) == 3:
                break
    assert [e["type"] for e in seen].count("ADDED") == 1
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in seen]
    assert versions == sorted(versions)  # a bookmark never goes back in time
    assert seen[-1]["object"]["metadata"]["resourceVersion"] == str(devcluster.semantics.store.rv)
    without = devcluster.http.get(
        devcluster.url + "/api/v1/namespaces/default/configmaps",
        params={
            "watch": "true",
            "timeoutSeconds": "3",
            "resourceVersion": str(devcluster.semantics.store.rv),
        },
    )
    assert without.text == ""  # no allowWatchBookmarks: no bookmarks


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
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
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


def _invalid(devcluster: DevCluster, **params: str) -> str:
    response = devcluster.http.get("/api/v1/namespaces/default/configmaps", params=params)
    assert response.status_code == 422, response.text
    body = response.json()
    assert (body["reason"], body["details"]["kind"]) == ("Invalid", "ListOptions")
    message: str = body["message"]
    assert message.startswith('ListOptions.meta.k8s.io "" is invalid: ')
    return message


def test_list_and_watch_options_are_validated(devcluster: DevCluster) -> None:
    assert (
        "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless"
        " resourceVersion is provided"
    ) in _invalid(devcluster, resourceVersionMatch="Exact")
    assert 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"' in _invalid(
        devcluster, resourceVersionMatch="Exact", resourceVersion="0"
    )
    assert 'resourceVersionMatch: Unsupported value: "Newest"' in _invalid(
        devcluster, resourceVersionMatch="Newest", resourceVersion="1"
    )
    assert "sendInitialEvents is forbidden for list" in _invalid(
        devcluster, sendInitialEvents="true"
    )
    assert "resourceVersionMatch is forbidden for watch unless sendInitialEvents" in _invalid(
        devcluster, watch="true", resourceVersionMatch="NotOlderThan", resourceVersion="1"
    )
    assert "sendInitialEvents requires setting allowWatchBookmarks to true" in _invalid(
        devcluster, watch="true", sendInitialEvents="true", resourceVersionMatch="NotOlderThan"
    )


def test_exact_list_is_the_state_at_that_version(devcluster: DevCluster) -> None:
    devcluster.create(cm("a"))
    devcluster.create(cm("b"))
    at = devcluster.semantics.store.rv
    devcluster.patch("v1", "configmaps", "a", {"data": {"k": "changed"}})
    devcluster.delete("v1", "configmaps", "b")
    devcluster.create(cm("c"))
    path = "/api/v1/namespaces/default/configmaps"
    then = devcluster.http.get(
        path, params={"resourceVersion": str(at), "resourceVersionMatch": "Exact"}
    ).json()
    assert then["metadata"]["resourceVersion"] == str(at)
    assert [(o["metadata"]["name"], o.get("data")) for o in then["items"]] == [
        ("a", {}),
        ("b", {}),
    ]
    future = devcluster.http.get(
        path, params={"resourceVersion": str(at + 100), "resourceVersionMatch": "Exact"}
    )
    assert future.status_code == 504
    assert "Too large resource version" in future.json()["message"]


def test_exact_list_of_a_compacted_version_is_410() -> None:
    with DevCluster(max_log=5) as cluster:
        for i in range(10):
            cluster.create(cm(f"c{i}"))
        response = cluster.http.get(
            "/api/v1/namespaces/default/configmaps",
            params={"resourceVersion": "2", "resourceVersionMatch": "Exact"},
        )
        assert response.status_code == 410
        assert response.json()["reason"] == "Expired"


def test_continue_tokens_survive_deletes_and_garbage_is_400(devcluster: DevCluster) -> None:
    for name in "abcde":
        devcluster.create(cm(name))
    path = "/api/v1/namespaces/default/configmaps"
    first = devcluster.http.get(path, params={"limit": "2"}).json()
    assert [o["metadata"]["name"] for o in first["items"]] == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 3
    devcluster.delete("v1", "configmaps", "a")  # a position-based token would now skip "c"
    devcluster.create(cm("f"))  # created after the snapshot: not in this list
    token = first["metadata"]["continue"]
    second = devcluster.http.get(path, params={"limit": "2", "continue": token}).json()
    assert [o["metadata"]["name"] for o in second["items"]] == ["c", "d"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    third = devcluster.http.get(
        path, params={"limit": "2", "continue": second["metadata"]["continue"]}
    ).json()
    assert [o["metadata"]["name"] for o in third["items"]] == ["e"]
    assert "continue" not in third["metadata"]
    for garbage in ("2", "not-base64!", "eyJ2IjoieCJ9"):
        response = devcluster.http.get(path, params={"limit": "2", "continue": garbage})
        assert response.status_code == 400, garbage
        assert response.json()["message"].startswith("invalid continue token")


def test_a_continue_token_past_compaction_is_410() -> None:
    with DevCluster(max_log=3) as cluster:
        for i in range(4):
            cluster.create(cm(f"c{i}"))
        path = "/api/v1/namespaces/default/configmaps"
        first = cluster.http.get(path, params={"limit": "1"}).json()
        for i in range(4, 10):
            cluster.create(cm(f"c{i}"))
        response = cluster.http.get(
            path, params={"limit": "1", "continue": first["metadata"]["continue"]}
        )
        assert response.status_code == 410
        assert "continue parameter is too old" in response.json()["message"]
