"""API-server semantics over HTTP: each test covers one gap of plain kmock 0.8."""

from __future__ import annotations

import re
from typing import Any

import pytest

from devcluster import ApiError, DevCluster

from .crd import API_VERSION, PLURAL, widget, widget_crd


def cm(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, **meta},
        "data": {"k": "v"},
    }


POD_SPEC = {"containers": [{"name": "c", "image": "i"}]}
JOB_POD_SPEC = {**POD_SPEC, "restartPolicy": "Never"}


def deployment(name: str, replicas: int = 1, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, **meta},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": POD_SPEC},
        },
        "status": {"readyReplicas": 99},
    }


def test_namespaces_list_and_default_namespace(devcluster: DevCluster) -> None:
    response = devcluster.http.get(devcluster.url + "/api/v1/namespaces")
    assert response.status_code == 200
    assert [ns["metadata"]["name"] for ns in response.json()["items"]] == ["default"]
    assert response.json()["kind"] == "NamespaceList"


def test_create_stamps_server_metadata_and_answers_201(devcluster: DevCluster) -> None:
    response = devcluster.http.post(
        devcluster.url + "/api/v1/namespaces/default/configmaps", json=cm("a")
    )
    assert response.status_code == 201
    meta = response.json()["metadata"]
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert meta["generation"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    assert meta["namespace"] == "default"
    second = devcluster.create(cm("b"))
    assert int(second["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    assert second["metadata"]["uid"] != meta["uid"]


def test_resource_version_is_global_across_resources(devcluster: DevCluster) -> None:
    versions = [
        int(devcluster.create(body)["metadata"]["resourceVersion"])
        for body in (cm("a"), deployment("d"), cm("b"))
    ]
    assert versions == sorted(versions)
    assert len(set(versions)) == 3


def test_client_cannot_set_server_metadata(devcluster: DevCluster) -> None:
    created = devcluster.create(cm("a", uid="mine", resourceVersion="999", generation=7))
    assert created["metadata"]["uid"] != "mine"
    assert created["metadata"]["generation"] == 1
    assert created["metadata"]["resourceVersion"] != "999"


def test_generation_bumps_on_spec_changes_only(devcluster: DevCluster) -> None:
    devcluster.create(deployment("d"))
    labelled = devcluster.patch("apps/v1", "deployments", "d", {"metadata": {"labels": {"x": "1"}}})
    assert labelled["metadata"]["generation"] == 1
    status = devcluster.patch(
        "apps/v1", "deployments", "d", {"status": {"replicas": 1}}, subresource="status"
    )
    assert status["metadata"]["generation"] == 1
    scaled = devcluster.patch("apps/v1", "deployments", "d", {"spec": {"replicas": 3}})
    assert scaled["metadata"]["generation"] == 2


def test_generation_of_specless_objects_tracks_their_content(devcluster: DevCluster) -> None:
    devcluster.create(cm("a"))
    assert (
        devcluster.patch("v1", "configmaps", "a", {"metadata": {"labels": {"x": "y"}}})["metadata"][
            "generation"
        ]
        == 1
    )
    assert (
        devcluster.patch("v1", "configmaps", "a", {"data": {"k": "w"}})["metadata"]["generation"]
        == 2
    )


def test_noop_write_keeps_resource_version(devcluster: DevCluster) -> None:
    created = devcluster.create(cm("a"))
    same = devcluster.patch("v1", "configmaps", "a", {"data": {"k": "v"}})
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_generate_name(devcluster: DevCluster) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "run-"}}
    names = {devcluster.create(body)["metadata"]["name"] for _ in range(5)}
    assert len(names) == 5
    assert all(re.fullmatch(r"run-[a-z0-9]{5}", n) for n in names)


def test_name_or_generate_name_is_required(devcluster: DevCluster) -> None:
    with pytest.raises(ApiError) as err:
        devcluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    assert (err.value.code, err.value.reason) == (422, "Invalid")


@pytest.mark.parametrize("api_version", ["v1", "events.k8s.io/v1"])
def test_events_are_created_with_generate_name(devcluster: DevCluster, api_version: str) -> None:
    body = {
        "apiVersion": api_version,
        "kind": "Event",
        "metadata": {"generateName": "w1.", "namespace": "default"},
        "reason": "Tested",
    }
    first, second = devcluster.create(body), devcluster.create(body)
    assert first["metadata"]["name"] != second["metadata"]["name"]
    assert first["metadata"]["name"].startswith("w1.")


def test_create_conflict_is_409_already_exists(devcluster: DevCluster) -> None:
    devcluster.create(cm("a"))
    response = devcluster.http.post(
        devcluster.url + "/api/v1/namespaces/default/configmaps", json=cm("a")
    )
    assert response.status_code == 409
    body = response.json()
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "AlreadyExists", 409)
    assert body["details"]["name"] == "a"


def test_missing_object_is_404_not_found_status(devcluster: DevCluster) -> None:
    response = devcluster.http.get(
        devcluster.url + "/apis/apps/v1/namespaces/default/deployments/nope"
    )
    assert response.status_code == 404
    body = response.json()
    assert (body["kind"], body["status"], body["reason"]) == ("Status", "Failure", "NotFound")
    assert body["message"] == 'deployments.apps "nope" not found'
    assert devcluster.http.get(devcluster.url + "/apis/nope.io/v1/things").status_code == 404


def test_create_in_missing_namespace_is_404(devcluster: DevCluster) -> None:
    with pytest.raises(ApiError) as err:
        devcluster.create(cm("a", namespace="ghost"))
    assert err.value.code == 404
    assert "namespaces" in err.value.message


def test_stale_resource_version_conflicts_in_put_and_patch(devcluster: DevCluster) -> None:
    first = devcluster.create(cm("a"))
    devcluster.patch("v1", "configmaps", "a", {"data": {"k": "2"}})
    stale = dict(first, data={"k": "3"})
    with pytest.raises(ApiError) as put_err:
        devcluster.replace(stale)
    assert (put_err.value.code, put_err.value.reason) == (409, "Conflict")
    old_rv = first["metadata"]["resourceVersion"]
    with pytest.raises(ApiError) as patch_err:
        devcluster.patch("v1", "configmaps", "a", {"metadata": {"resourceVersion": old_rv}})
    assert patch_err.value.code == 409


def test_put_replaces_the_object(devcluster: DevCluster) -> None:
    current = devcluster.create(cm("a"))
    current["data"] = {"other": "x"}
    replaced = devcluster.replace(current)
    assert replaced["data"] == {"other": "x"}
    assert replaced["metadata"]["uid"] == current["metadata"]["uid"]
    assert devcluster.get("v1", "configmaps", "a")["data"] == {"other": "x"}


def test_failed_json_patch_test_is_422(devcluster: DevCluster) -> None:
    devcluster.create(cm("a"))
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "0"},
        {"op": "add", "path": "/metadata/finalizers", "value": ["x"]},
    ]
    with pytest.raises(ApiError) as err:
        devcluster.patch("v1", "configmaps", "a", ops)
    assert err.value.code == 422
    assert "finalizers" not in devcluster.get("v1", "configmaps", "a")["metadata"]


def test_patch_content_types(devcluster: DevCluster) -> None:
    devcluster.create(deployment("d"))
    merged = devcluster.patch(
        "apps/v1", "deployments", "d", {"metadata": {"labels": {"a": "1", "b": "2"}}}
    )
    assert merged["metadata"]["labels"] == {"a": "1", "b": "2"}
    nulled = devcluster.patch("apps/v1", "deployments", "d", {"metadata": {"labels": {"a": None}}})
    assert nulled["metadata"]["labels"] == {"b": "2"}
    smp = devcluster.patch(
        "apps/v1",
        "deployments",
        "d",
        {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}},
        content_type="application/strategic-merge-patch+json",
    )
    assert smp["spec"]["template"]["spec"]["containers"] == [{"name": "c", "image": "i"}]
    jp = devcluster.patch(
        "apps/v1",
        "deployments",
        "d",
        [
            {"op": "replace", "path": "/spec/replicas", "value": 5},
            {"op": "remove", "path": "/metadata/labels/b"},
        ],
    )
    assert jp["spec"]["replicas"] == 5
    assert "b" not in jp["metadata"].get("labels", {})
    with pytest.raises(ApiError) as err:
        devcluster.patch("apps/v1", "deployments", "d", {}, content_type="text/plain")
    assert err.value.code == 415


def test_status_subresource_of_builtins(devcluster: DevCluster) -> None:
    created = devcluster.create(deployment("d"))
    assert "status" not in created  # status of a create is ignored
    ignored = devcluster.patch("apps/v1", "deployments", "d", {"status": {"readyReplicas": 1}})
    assert "status" not in ignored
    written = devcluster.patch(
        "apps/v1",
        "deployments",
        "d",
        {"status": {"readyReplicas": 1}, "spec": {"replicas": 9}},
        subresource="status",
    )
    assert written["status"] == {"readyReplicas": 1}
    assert written["spec"]["replicas"] == 1  # a status write changes only status
    put = devcluster.get("apps/v1", "deployments", "d")
    put["status"] = {"readyReplicas": 7}
    assert devcluster.replace(put)["status"] == {"readyReplicas": 1}
    assert devcluster.replace(put, subresource="status")["status"] == {"readyReplicas": 7}


def test_status_subresource_follows_the_crd(devcluster: DevCluster) -> None:
    devcluster.create(widget_crd(status=False))
    devcluster.create(widget("w", size=1))
    patched = devcluster.patch(API_VERSION, PLURAL, "w", {"status": {"phase": "X"}})
    assert patched["status"] == {"phase": "X"}  # no subresource: status is ordinary content
    with pytest.raises(ApiError) as err:
        devcluster.patch(API_VERSION, PLURAL, "w", {"status": {}}, subresource="status")
    assert err.value.code == 404


def test_label_selectors(devcluster: DevCluster) -> None:
    for name, labels in {
        "a": {"app": "x", "tier": "web"},
        "b": {"app": "y"},
        "c": {"app": "z", "tier": "db"},
        "d": {},
    }.items():
        devcluster.create(cm(name, labels=labels))

    def names(selector: str) -> list[str]:
        items = devcluster.list("v1", "configmaps", "default", label_selector=selector)
        return [i["metadata"]["name"] for i in items]

    assert names("app=x") == ["a"]
    assert names("app==y") == ["b"]
    assert names("app!=x") == ["b", "c", "d"]
    assert names("app in (x, z)") == ["a", "c"]
    assert names("app notin (x,z)") == ["b", "d"]
    assert names("tier") == ["a", "c"]
    assert names("!tier") == ["b", "d"]
    assert names("app in (x,y,z),!tier") == ["b"]
    with pytest.raises(ApiError) as err:
        names("app in x")
    assert err.value.code == 400


def test_field_selectors(devcluster: DevCluster) -> None:
    devcluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    devcluster.create(cm("a"))
    devcluster.create(cm("b"))
    devcluster.create(cm("a", namespace="other"))
    by_name = devcluster.list("v1", "configmaps", None, field_selector="metadata.name=a")
    assert sorted(i["metadata"]["namespace"] for i in by_name) == ["default", "other"]
    by_ns = devcluster.list("v1", "configmaps", None, field_selector="metadata.namespace=other")
    assert [i["metadata"]["name"] for i in by_ns] == ["a"]
    both = devcluster.list(
        "v1", "configmaps", None, field_selector="metadata.name!=a,metadata.namespace=default"
    )
    assert [i["metadata"]["name"] for i in both] == ["b"]


def test_delete_with_finalizers_waits_for_the_last_one(devcluster: DevCluster) -> None:
    devcluster.create(cm("a", finalizers=["x/one", "x/two"]))
    marked = devcluster.delete("v1", "configmaps", "a")
    assert marked["metadata"]["deletionTimestamp"]
    assert devcluster.exists("v1", "configmaps", "a")
    devcluster.patch("v1", "configmaps", "a", {"metadata": {"finalizers": ["x/two"]}})
    assert devcluster.exists("v1", "configmaps", "a")
    devcluster.patch("v1", "configmaps", "a", [{"op": "remove", "path": "/metadata/finalizers"}])
    assert not devcluster.exists("v1", "configmaps", "a")


def owned_by(owner: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    body["metadata"].setdefault("ownerReferences", []).append(ref)
    return body


def test_garbage_collection_cascades_by_uid(devcluster: DevCluster) -> None:
    top = devcluster.create(deployment("top"))
    mid = devcluster.create(owned_by(top, cm("mid")))
    devcluster.create(owned_by(mid, cm("leaf")))
    other = devcluster.create(cm("other"))
    devcluster.create(owned_by(other, owned_by(top, cm("shared"))))
    devcluster.delete("apps/v1", "deployments", "top")
    devcluster.wait_for(lambda: not devcluster.exists("v1", "configmaps", "leaf"))
    assert not devcluster.exists("v1", "configmaps", "mid")
    shared = devcluster.get("v1", "configmaps", "shared")
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["other"]


def test_orphan_propagation_and_job_default(devcluster: DevCluster) -> None:
    owner = devcluster.create(deployment("d"))
    devcluster.create(owned_by(owner, cm("kept")))
    devcluster.delete("apps/v1", "deployments", "d", propagation="Orphan")
    devcluster.wait_for(
        lambda: "ownerReferences" not in devcluster.get("v1", "configmaps", "kept")["metadata"]
    )
    job = devcluster.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"template": {"spec": JOB_POD_SPEC}},
        }
    )
    devcluster.create(owned_by(job, cm("job-pod")))
    devcluster.delete("batch/v1", "jobs", "j")  # no policy: Jobs orphan, as on a real server
    devcluster.wait_for(
        lambda: "ownerReferences" not in devcluster.get("v1", "configmaps", "job-pod")["metadata"]
    )


def test_dependent_with_missing_owner_is_collected(devcluster: DevCluster) -> None:
    ghost = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ghost", "uid": "00000000-0000-4000-8000-000000000000"},
    }
    devcluster.create(owned_by(ghost, cm("dangling")))
    devcluster.wait_for(lambda: not devcluster.exists("v1", "configmaps", "dangling"))


def test_owners_resolve_by_namespace_name_kind_and_uid(devcluster: DevCluster) -> None:
    """The real collector looks an owner up by kind, the dependent's namespace and name,
    then compares uids: a reference with the right uid but the wrong namespace, name or
    kind dangles, and its dependent is deleted (this is the bug that makes a real
    cluster loop through create and delete)."""
    devcluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    owner = devcluster.create(deployment("owner"))
    right = devcluster.create(owned_by(owner, cm("right")))
    wrong_ns = owned_by(owner, cm("wrong-ns"))
    wrong_ns["metadata"]["namespace"] = "other"
    devcluster.create(wrong_ns, namespace="other")
    wrong_name = owned_by(owner, cm("wrong-name"))
    wrong_name["metadata"]["ownerReferences"][0]["name"] = "not-the-owner"
    devcluster.create(wrong_name)
    wrong_kind = owned_by(owner, cm("wrong-kind"))
    wrong_kind["metadata"]["ownerReferences"][0].update(apiVersion="apps/v1", kind="ReplicaSet")
    devcluster.create(wrong_kind)
    devcluster.wait_for(
        lambda: (
            not any(
                devcluster.exists("v1", "configmaps", name, ns)
                for name, ns in (
                    ("wrong-ns", "other"),
                    ("wrong-name", "default"),
                    ("wrong-kind", "default"),
                )
            )
        )
    )
    assert (
        devcluster.get("v1", "configmaps", "right")["metadata"]["uid"] == right["metadata"]["uid"]
    )
    # One present owner keeps a dependent; its dangling reference is dropped.
    both = owned_by(owner, cm("both"))
    both["metadata"]["ownerReferences"].append(
        {**both["metadata"]["ownerReferences"][0], "name": "x", "uid": "u-2"}
    )
    devcluster.create(both)
    devcluster.wait_for(
        lambda: len(devcluster.get("v1", "configmaps", "both")["metadata"]["ownerReferences"]) == 1
    )
    # A namespaced dependent may have a cluster-scoped owner.
    namespace = devcluster.get("v1", "namespaces", "other", None)
    devcluster.create(owned_by(namespace, cm("ns-owned")))
    devcluster.delete("apps/v1", "deployments", "owner")
    devcluster.wait_for(lambda: not devcluster.exists("v1", "configmaps", "right"))
    assert devcluster.exists("v1", "configmaps", "ns-owned")


def test_a_dependent_with_an_unresolvable_owner_is_left_alone(devcluster: DevCluster) -> None:
    """An owner of a kind the server does not serve cannot be looked up: the collector
    leaves the dependent (and retries), it does not delete it."""
    ghost = {
        "apiVersion": "example.com/v1",
        "kind": "Unknown",
        "metadata": {"name": "u", "uid": "00000000-0000-4000-8000-000000000001"},
    }
    devcluster.create(owned_by(ghost, cm("kept")))
    devcluster.call(lambda: None)  # the loop ran the collector scheduled by the create
    assert devcluster.exists("v1", "configmaps", "kept")


def test_namespace_deletion_removes_its_contents(devcluster: DevCluster) -> None:
    devcluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tmp"}})
    devcluster.create(cm("a", namespace="tmp"))
    devcluster.delete("v1", "namespaces", "tmp", namespace=None)
    devcluster.wait_for(lambda: not devcluster.exists("v1", "namespaces", "tmp", None))
    assert devcluster.list("v1", "configmaps", "tmp") == []


def test_crd_is_served_and_discoverable_at_once(devcluster: DevCluster) -> None:
    devcluster.create(widget_crd())
    resources = devcluster.http.get(devcluster.url + "/apis/test.devcluster.io/v1").json()[
        "resources"
    ]
    main = next(r for r in resources if r["name"] == PLURAL)
    assert main["shortNames"] == ["wdg"]
    assert main["categories"] == ["all"]
    assert {r["name"] for r in resources} == {PLURAL, f"{PLURAL}/status"}
    groups = devcluster.http.get(devcluster.url + "/apis").json()["groups"]
    assert "test.devcluster.io" in {g["name"] for g in groups}
    created = devcluster.create(widget("w"))
    assert created["spec"] == {"size": 1}  # schema default
    devcluster.delete(
        "apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        f"{PLURAL}.test.devcluster.io",
        namespace=None,
    )
    devcluster.wait_for(
        lambda: (
            devcluster.http.get(devcluster.url + "/apis/test.devcluster.io/v1").status_code == 404
        )
    )


def test_crd_name_must_match_its_names(devcluster: DevCluster) -> None:
    crd = widget_crd()
    crd["metadata"]["name"] = "wrong.test.devcluster.io"
    with pytest.raises(ApiError) as err:
        devcluster.create(crd)
    assert err.value.code == 422


def test_user_reactions_override_semantics(devcluster: DevCluster) -> None:
    import kmock

    assert devcluster.server is not None
    devcluster.server[kmock.resource("", "v1", "configmaps"), "post"] << 503
    response = devcluster.http.post(
        devcluster.url + "/api/v1/namespaces/default/configmaps", json=cm("a")
    )
    assert response.status_code == 503
    assert (
        devcluster.http.get(devcluster.url + "/api/v1/namespaces/default/configmaps").status_code
        == 200
    )


def test_builtin_defaults(devcluster: DevCluster) -> None:
    body = deployment("d")
    del body["spec"]["replicas"]
    created = devcluster.create(body)
    assert created["spec"]["replicas"] == 1
    assert created["spec"]["strategy"]["type"] == "RollingUpdate"
    job = devcluster.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"template": {"spec": JOB_POD_SPEC}},
        }
    )
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"]["job-name"] == "j"
    assert job["spec"]["backoffLimit"] == 6
    svc = devcluster.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 80}]},
        }
    )
    assert svc["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert svc["spec"]["clusterIP"]


def test_builtin_validation_and_immutable_fields(devcluster: DevCluster) -> None:
    bad = deployment("bad")
    bad["spec"]["selector"]["matchLabels"] = {"app": "other"}
    with pytest.raises(ApiError) as mismatch:
        devcluster.create(bad)
    assert mismatch.value.code == 422
    devcluster.create(deployment("d"))
    with pytest.raises(ApiError) as selector:
        devcluster.patch(
            "apps/v1",
            "deployments",
            "d",
            {
                "spec": {
                    "selector": {"matchLabels": {"app": "x"}},
                    "template": {"metadata": {"labels": {"app": "x"}}},
                }
            },
        )
    assert "immutable" in selector.value.message
    devcluster.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"template": {"spec": JOB_POD_SPEC}},
        }
    )
    with pytest.raises(ApiError) as template:
        devcluster.patch(
            "batch/v1",
            "jobs",
            "j",
            {"spec": {"template": {"spec": {"containers": [{"name": "c2", "image": "i"}]}}}},
        )
    assert template.value.code == 422
    assert "field is immutable" in template.value.message
    devcluster.create(dict(cm("frozen"), immutable=True))
    with pytest.raises(ApiError):
        devcluster.patch("v1", "configmaps", "frozen", {"data": {"k": "changed"}})


def test_no_new_finalizers_while_deleting(devcluster: DevCluster) -> None:
    devcluster.create(cm("a", finalizers=["x/one"]))
    devcluster.delete("v1", "configmaps", "a")
    with pytest.raises(ApiError) as err:
        devcluster.patch("v1", "configmaps", "a", {"metadata": {"finalizers": ["x/one", "x/2"]}})
    assert err.value.code == 422


def test_custom_resources_are_validated_against_the_crd_schema(devcluster: DevCluster) -> None:
    devcluster.create(widget_crd())
    with pytest.raises(ApiError) as err:
        devcluster.create(widget("w", size="big"))
    assert err.value.code == 422
    assert "spec.size" in err.value.message
    devcluster.create(widget("w", size=2, image=None))  # null of a non-nullable field: pruned
    with pytest.raises(ApiError):
        devcluster.patch(API_VERSION, PLURAL, "w", {"spec": {"image": 5}})


def test_pod_logs_from_text_or_a_source(devcluster: DevCluster) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    devcluster.create(pod)
    url = devcluster.url + "/api/v1/namespaces/default/pods/p/log"
    assert devcluster.http.get(url).text == ""
    devcluster.set_pod_log("default", "p", "one\ntwo\n")
    assert devcluster.http.get(url, params={"tailLines": "1"}).text == "two\n"
    devcluster.set_log_source(lambda ns, name, container: f"{ns}/{name}/{container}\n")
    assert devcluster.http.get(url, params={"container": "c"}).text == "default/p/c\n"
    assert (
        devcluster.http.get(devcluster.url + "/api/v1/namespaces/default/pods/q/log").status_code
        == 404
    )


def test_foreground_deletion_keeps_the_owner_until_dependents_are_gone(
    devcluster: DevCluster,
) -> None:
    owner = devcluster.create(deployment("d"))
    devcluster.create(owned_by(owner, cm("child", finalizers=["x/hold"])))
    marked = devcluster.delete("apps/v1", "deployments", "d", propagation="Foreground")
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    devcluster.wait_for(
        lambda: devcluster.get("v1", "configmaps", "child")["metadata"].get("deletionTimestamp")
    )
    assert devcluster.exists("apps/v1", "deployments", "d")  # the child still holds it
    devcluster.patch("v1", "configmaps", "child", {"metadata": {"finalizers": None}})
    devcluster.wait_for(lambda: not devcluster.exists("apps/v1", "deployments", "d"))
