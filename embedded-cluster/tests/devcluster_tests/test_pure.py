"""The pure pieces of the semantics layer, without a server: selectors, patches, JSONPath,
ages, routing, schema defaults and deletion rules run on the Semantics object directly."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from devcluster.apierrors import ApiError
from devcluster.jsonpath import JsonPathError, find
from devcluster.objects import apply_defaults, next_generation
from devcluster.patches import PatchFailed, json_patch, merge_patch
from devcluster.resources import Registry, types_from_crd
from devcluster.routing import parse_route
from devcluster.selectors import field_matcher, label_matcher
from devcluster.semantics import Semantics
from devcluster.tables import human_duration, table

from .crd import widget, widget_crd


def labelled(**labels: str) -> dict[str, Any]:
    return {"metadata": {"labels": labels}}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a=1", {"a": "1"}, True),
        ("a==1", {"a": "2"}, False),
        ("a!=1", {}, True),
        ("a in (1, 2)", {"a": "2"}, True),
        ("a notin (1,2)", {"a": "2"}, False),
        ("a notin (1,2)", {}, True),
        ("a", {"a": ""}, True),
        ("!a", {"a": ""}, False),
        ("a>3", {"a": "4"}, True),
        (
            "app.kubernetes.io/name=x,tier in (web)",
            {"app.kubernetes.io/name": "x", "tier": "web"},
            True,
        ),
    ],
)
def test_label_selector(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert label_matcher(selector)(labelled(**labels)) is expected


def test_bad_selectors_are_400() -> None:
    for bad in ("a in b", "=x", "a>b"):
        with pytest.raises(ApiError) as err:
            label_matcher(bad)
        assert err.value.code == 400
    with pytest.raises(ApiError):
        field_matcher("metadata.name")


def test_field_selector_on_nested_paths_and_escapes() -> None:
    event = {"involvedObject": {"name": "w,1", "kind": "Widget"}, "metadata": {"name": "e"}}
    assert field_matcher(r"involvedObject.name=w\,1,involvedObject.kind=Widget")(event)
    assert not field_matcher("involvedObject.kind!=Widget")(event)
    assert field_matcher("spec.nodeName=")(event)  # absent compares as empty


def test_merge_patch_rfc7386() -> None:
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2]}
    assert merge_patch(target, {"a": {"b": None, "d": 3}, "l": [3]}) == {
        "a": {"c": 2, "d": 3},
        "l": [3],
    }
    assert target == {"a": {"b": 1, "c": 2}, "l": [1, 2]}  # not mutated


def test_json_patch_rfc6902() -> None:
    doc = {"a": [1, 2], "b": {"c": "x"}}
    ops = [
        {"op": "add", "path": "/a/-", "value": 3},
        {"op": "add", "path": "/a/0", "value": 0},
        {"op": "replace", "path": "/b/c", "value": "y"},
        {"op": "copy", "from": "/b/c", "path": "/d"},
        {"op": "move", "from": "/d", "path": "/e"},
        {"op": "remove", "path": "/a/1"},
        {"op": "test", "path": "/e", "value": "y"},
        {"op": "add", "path": "/k~1l", "value": 1},
    ]
    assert json_patch(doc, ops) == {"a": [0, 2, 3], "b": {"c": "y"}, "e": "y", "k/l": 1}
    with pytest.raises(PatchFailed):
        json_patch(doc, [{"op": "test", "path": "/b/c", "value": "no"}])
    with pytest.raises(PatchFailed):
        json_patch(doc, [{"op": "remove", "path": "/missing"}])


def test_jsonpath_subset() -> None:
    obj = {
        "status": {
            "conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]
        },
        "spec": {"list": [{"n": 1}, {"n": 2}]},
        "metadata": {"labels": {"a.b/c": "v"}},
    }
    assert find(obj, '.status.conditions[?(@.type=="Ready")].status') == ["True"]
    assert find(obj, "{.spec.list[1].n}") == [2]
    assert find(obj, ".spec.list[*].n") == [1, 2]
    assert find(obj, ".metadata.labels['a.b/c']") == ["v"]
    assert find(obj, ".status.missing.x") == []
    assert find(obj, ".status.conditions[?(@.type!='Ready')].type") == ["A"]
    with pytest.raises(JsonPathError):
        find(obj, ".a[?(@.x > 1)]")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (200, "3m20s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (50 * 3600, "2d2h"),
        (400 * 86400, "400d"),
        (800 * 86400, "2y70d"),
    ],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_routing_of_namespaces_and_subresources() -> None:
    registry = Registry()
    assert parse_route("/api/v1/namespaces", registry).plural == "namespaces"  # type: ignore[union-attr]
    ns_status = parse_route("/api/v1/namespaces/foo/status", registry)
    assert ns_status is not None
    assert (ns_status.plural, ns_status.name, ns_status.subresource) == (
        "namespaces",
        "foo",
        "status",
    )
    pod_log = parse_route("/api/v1/namespaces/foo/pods/p/log", registry)
    assert pod_log is not None
    assert (pod_log.namespace, pod_log.plural, pod_log.name, pod_log.subresource) == (
        "foo",
        "pods",
        "p",
        "log",
    )
    legacy = parse_route("/apis/apps/v1/watch/namespaces/x/deployments", registry)
    assert legacy is not None
    assert (legacy.legacy_watch, legacy.namespace) == (True, "x")
    assert parse_route("/apis/apps", registry) is None


def test_schema_defaults_fill_absent_fields_only() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "default": {},
                "properties": {
                    "size": {"type": "integer", "default": 1},
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"mode": {"type": "string", "default": "fast"}},
                        },
                    },
                },
            }
        },
    }
    assert apply_defaults(schema, {}) == {"spec": {"size": 1}}
    assert apply_defaults(schema, {"spec": {"size": 5, "items": [{}, {"mode": "slow"}]}}) == {
        "spec": {"size": 5, "items": [{"mode": "fast"}, {"mode": "slow"}]}
    }


def test_generation_rule() -> None:
    old = {"metadata": {"generation": 4}, "spec": {"a": 1}, "status": {}}
    assert next_generation(old, {**old, "status": {"x": 1}}) == 4
    assert next_generation(old, {**old, "spec": {"a": 2}}) == 5


def fixed_clock() -> datetime.datetime:
    return datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def test_semantics_without_a_server_and_crd_table() -> None:
    deferred: list[Any] = []
    sem = Semantics(clock=fixed_clock, schedule=deferred.append, seed=1)
    namespaces = sem.registry.get("", "v1", "namespaces")
    crds = sem.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert namespaces is not None
    assert crds is not None
    sem.create(namespaces, "", {"metadata": {"name": "default"}})
    sem.create(crds, "", widget_crd())
    rtype = sem.registry.get("test.devcluster.io", "v1", "widgets")
    assert rtype is not None
    assert rtype.status_subresource
    owner = sem.create(rtype, "default", widget("w", size=2))
    assert owner["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert (
        sem.registry.get("test.devcluster.io", "v1", "widgets") == types_from_crd(widget_crd())[0]
    )
    later = datetime.datetime(2026, 1, 1, 0, 5, tzinfo=datetime.UTC)
    tab = table(rtype, [owner], "1", later)
    assert [c["name"] for c in tab["columnDefinitions"]] == [
        "Name",
        "Size",
        "Phase",
        "Ready",
        "Age",
    ]
    assert tab["rows"][0]["cells"] == ["w", 2, None, None, "5m"]
    assert tab["rows"][0]["object"]["kind"] == "PartialObjectMetadata"

    # Garbage collection is deferred through the injected scheduler, as the real collector is.
    cms = sem.registry.get("", "v1", "configmaps")
    assert cms is not None
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": "Widget",
        "name": "w",
        "uid": owner["metadata"]["uid"],
    }
    sem.create(cms, "default", {"metadata": {"name": "child", "ownerReferences": [ref]}})
    for fn in list(deferred):
        fn()
    deferred.clear()
    sem.delete(rtype, "default", "w")
    assert sem.store.get(cms.store_key, "default", "child") is not None  # not yet collected
    for fn in deferred:
        fn()
    assert sem.store.get(cms.store_key, "default", "child") is None


def test_prune_drops_undeclared_fields() -> None:
    from devcluster.objects import prune

    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer"},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}},
                    "list": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"x": {"type": "string"}}},
                    },
                },
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    obj = {
        "apiVersion": "g/v1",
        "kind": "K",
        "metadata": {"name": "n", "labels": {"l": "1"}},
        "spec": {"a": 1, "b": 2, "env": {"K": "V"}, "list": [{"x": "1", "y": "2"}]},
        "status": {"anything": {"goes": 1}},
        "extra": 1,
    }
    assert prune(schema, obj) == {
        "apiVersion": "g/v1",
        "kind": "K",
        "metadata": {"name": "n", "labels": {"l": "1"}},
        "spec": {"a": 1, "env": {"K": "V"}, "list": [{"x": "1"}]},
        "status": {"anything": {"goes": 1}},
    }


def test_schema_validation_messages() -> None:
    from devcluster.schema import validate

    schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 8},
                    "mode": {"type": "string", "enum": ["eager", "throughput"]},
                    "port": {"x-kubernetes-int-or-string": True},
                    "tags": {
                        "type": "array",
                        "maxItems": 2,
                        "items": {"type": "string", "pattern": "^[a-z]+$"},
                    },
                    "ratio": {"type": "number"},
                    "flag": {"type": "boolean"},
                },
            }
        },
    }
    good = {
        "apiVersion": "x",
        "metadata": {},
        "spec": {
            "size": 2,
            "mode": "eager",
            "port": "http",
            "tags": ["a"],
            "ratio": 1,
            "flag": False,
        },
    }
    assert validate(schema, good) == []
    assert [str(e) for e in validate(schema, {"metadata": {}})] == ["spec: Required value"]
    bad = {"size": "2", "mode": "fast", "tags": ["A", "b", "c"], "flag": 1, "port": 1.5}
    errors = [str(e) for e in validate(schema, {"spec": bad})]
    assert (
        'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"'
        in errors
    )
    assert 'spec.mode: Unsupported value: "fast": supported values: "eager", "throughput"' in errors
    assert "spec.tags: Too many: 3: must have at most 2 items" in errors
    assert any(e.startswith('spec.tags[0]: Invalid value: "A"') for e in errors)
    assert any(e.startswith("spec.flag:") for e in errors)
    assert any(e.startswith("spec.port:") for e in errors)
    assert [str(e) for e in validate(schema, {"spec": {"size": 9}})] == [
        "spec.size: Invalid value: 9: spec.size in body should be less than or equal to 8"
    ]
