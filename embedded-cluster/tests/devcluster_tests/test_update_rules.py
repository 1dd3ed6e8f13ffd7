"""Smaller rules a real server enforces on writes: dryRun values, unconditional updates of
custom resources, generateName's length, immutable ConfigMaps and Secrets, Lease specs."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster import ApiError, DevCluster

from .crd import API_VERSION, PLURAL, widget, widget_crd


def cm(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **fields}


def test_dry_run_accepts_only_all(devcluster: DevCluster) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    refused = devcluster.http.post(path, params={"dryRun": "true"}, json=cm("a"))
    assert refused.status_code == 422
    assert refused.json()["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value:'
        ' []string{"true"}: supported values: "All"'
    )
    assert not devcluster.exists("v1", "configmaps", "a")
    dry = devcluster.http.post(path, params={"dryRun": "All"}, json=cm("a"))
    assert dry.status_code == 201
    assert not devcluster.exists("v1", "configmaps", "a")
    devcluster.create(cm("b"))
    deleting = devcluster.http.delete(f"{path}/b", params={"dryRun": ""})
    assert deleting.status_code == 422
    assert deleting.json()["message"].startswith('DeleteOptions.meta.k8s.io "" is invalid')
    assert devcluster.exists("v1", "configmaps", "b")


def test_a_custom_resource_update_needs_a_resource_version(devcluster: DevCluster) -> None:
    devcluster.create(widget_crd())
    created = devcluster.create(widget("w", size=1))
    body = widget("w", size=2)
    with pytest.raises(ApiError) as caught:
        devcluster.replace(body)
    assert caught.value.code == 422
    assert str(caught.value) == (
        f'{PLURAL}.test.devcluster.io "w" is invalid: metadata.resourceVersion: Invalid value:'
        " 0x0: must be specified for an update"
    )
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    assert devcluster.replace(body)["spec"]["size"] == 2
    # Built-in kinds allow an unconditional update, as on a real server.
    devcluster.create(cm("c", data={"k": "1"}))
    assert devcluster.replace(cm("c", data={"k": "2"}))["data"] == {"k": "2"}
    assert devcluster.get(API_VERSION, PLURAL, "w")["spec"]["size"] == 2


def test_generate_name_is_cut_to_fit_63(devcluster: DevCluster) -> None:
    created = devcluster.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "p" * 70}}
    )
    name = created["metadata"]["name"]
    assert len(name) == 63
    assert name.startswith("p" * 58)
    assert not name[58:].startswith("p")


def test_an_immutable_config_map_stays_immutable(devcluster: DevCluster) -> None:
    devcluster.create(cm("frozen", data={"k": "v"}, immutable=True))
    for patch, field in (
        ({"immutable": False}, "immutable"),
        ({"data": {"k": "other"}}, "data"),
    ):
        with pytest.raises(ApiError) as caught:
            devcluster.patch("v1", "configmaps", "frozen", patch)
        assert caught.value.code == 422
        assert f"{field}: Forbidden: field is immutable when `immutable` is set" in str(
            caught.value
        )
    devcluster.patch("v1", "configmaps", "frozen", {"metadata": {"labels": {"a": "b"}}})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "immutable": True}
    devcluster.create({**secret, "data": {"k": "dg=="}})
    with pytest.raises(ApiError, match="data: Forbidden: field is immutable"):
        devcluster.patch("v1", "secrets", "s", {"data": {"k": "dw=="}})


def test_a_lease_duration_must_be_positive(devcluster: DevCluster) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 0},
    }
    with pytest.raises(ApiError) as caught:
        devcluster.create(lease)
    assert caught.value.code == 422
    assert (
        'Lease.coordination.k8s.io "l" is invalid: spec.leaseDurationSeconds: Invalid value:'
        in str(caught.value)
    )
    assert "0: must be greater than 0" in str(caught.value)
    lease["spec"]["leaseDurationSeconds"] = 15
    devcluster.create(lease)
