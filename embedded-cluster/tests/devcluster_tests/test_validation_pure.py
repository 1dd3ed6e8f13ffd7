"""Pure pieces of the API-server rules: name formats, quantities, strategic merge, errors.

Each test names the Kubernetes source it mirrors; the boundaries (63/253/15 characters,
port 0/1/65535/65536, ``1500m`` == ``1.5``) are where a copy usually goes wrong.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from devcluster import fielderrors as fe
from devcluster.patches import PatchMalformed
from devcluster.strategic import keys_for, strategic_merge_patch
from devcluster.validation import names
from devcluster.validation.quantity import (
    FORMAT_WRONG,
    NUMERIC,
    SUFFIX,
    QuantityError,
    parse_quantity,
)


def test_dns1123_label_and_subdomain_boundaries() -> None:
    """apimachinery util/validation IsDNS1123Label / IsDNS1123Subdomain."""
    assert names.dns1123_label("a" * 63) == []
    assert names.dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert names.dns1123_label("a.b") == ["must not contain dots"]
    assert names.dns1123_label("-a")[0].startswith("a lowercase RFC 1123 label")
    assert names.dns1123_label("A") != []
    assert names.dns1123_subdomain("a." * 126 + "a") == []  # 253 characters
    assert names.dns1123_subdomain("a" * 254) == ["must be no more than 253 characters"]
    assert names.dns1123_subdomain("a..b") != []
    assert names.dns1035_label("1abc") != []  # must start with a letter
    assert names.dns1035_label("abc-1") == []


def test_label_keys_and_values() -> None:
    """content.IsLabelKey / IsLabelValue."""
    assert names.label_key("app.kubernetes.io/name") == []
    assert names.label_key("a/b/c")[0].startswith("a valid label key")
    assert names.label_key("/x") == ["prefix part must be non-empty"]
    assert names.label_key("x/" + "n" * 64) == ["name part must be no more than 63 characters"]
    assert names.label_key("Bad_Prefix/x")[0].startswith("prefix part a lowercase RFC 1123")
    assert names.label_value("") == []
    assert names.label_value("v" * 63) == []
    assert names.label_value("v" * 64) == ["must be no more than 63 characters"]
    assert names.label_value("-v")[0].startswith("a valid label must be an empty string")


@pytest.mark.parametrize(
    ("name", "problems"),
    [
        ("http", []),
        ("h" * 15, []),
        ("h" * 16, ["must be no more than 15 characters"]),
        ("8080", ["must contain at least one letter (a-z)"]),
        ("a--b", ["must not contain consecutive hyphens"]),
        ("-ab", ["must not begin or end with a hyphen"]),
        (
            "HTTP",
            [
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "must contain at least one letter (a-z)",
            ],
        ),
    ],
)
def test_port_names_are_iana_service_names(name: str, problems: list[str]) -> None:
    """util/validation IsValidPortName."""
    assert names.port_name(name) == problems


def test_port_numbers_and_keys() -> None:
    assert names.port_number(1) == names.port_number(65535) == []
    assert (
        names.port_number(0)
        == names.port_number(65536)
        == ["must be between 1 and 65535, inclusive"]
    )
    assert names.config_map_key("suite.yaml") == []
    assert names.config_map_key("..x") == ["must not start with '..'"]
    assert names.config_map_key("a/b") != []
    assert names.env_var_name("1.weird-but_ok") == []  # relaxed since 1.34
    assert names.env_var_name("A=B") != []
    assert names.env_var_name("") == ["environment variable name must be non-empty"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Fraction(1)),
        ("1500m", Fraction(3, 2)),
        ("1.5", Fraction(3, 2)),
        ("2Gi", Fraction(2 * 2**30)),
        ("2G", Fraction(2 * 10**9)),
        ("1e3", Fraction(1000)),
        ("+.5", Fraction(1, 2)),
        ("-1", Fraction(-1)),
        (4, Fraction(4)),
    ],
)
def test_quantities_parse_exactly(text: Any, value: Fraction) -> None:
    """api/resource ParseQuantity."""
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2GB", FORMAT_WRONG),
        ("", FORMAT_WRONG),
        ("lots", FORMAT_WRONG),
        ("1.2.3", NUMERIC),
        ("2Gk", SUFFIX),
        ("1" * 300, FORMAT_WRONG),
        (True, FORMAT_WRONG),
        ([1], FORMAT_WRONG),
    ],
)
def test_quantities_that_do_not_parse(text: Any, message: str) -> None:
    with pytest.raises(QuantityError) as refused:
        parse_quantity(text)
    assert str(refused.value) == message


def test_error_bodies_as_apimachinery_renders_them() -> None:
    """util/validation/field/errors.go ErrorBody."""
    assert fe.required("spec.x").body() == "Required value"
    assert fe.invalid("f", "s", "bad").body() == 'Invalid value: "s": bad'
    assert fe.invalid("f", 3, "bad").body() == "Invalid value: 3: bad"
    assert fe.invalid("f", None, "bad").body() == "Invalid value: null: bad"
    assert fe.forbidden("f", "no").body() == "Forbidden: no"
    assert fe.too_many("f", 3, 2).body() == "Too many: 3: must have at most 2 items"
    assert fe.not_supported("f", "x", ["a", "b"]).body() == (
        'Unsupported value: "x": supported values: "a", "b"'
    )
    error = fe.invalid_error("Pod", "", "p", [fe.required("a"), fe.required("a"), fe.required("b")])
    assert error.message == 'Pod "p" is invalid: [a: Required value, b: Required value]'
    assert error.details == {
        "name": "p",
        "kind": "Pod",
        "causes": [
            {"reason": "FieldValueRequired", "message": "Required value", "field": "a"},
            {"reason": "FieldValueRequired", "message": "Required value", "field": "b"},
        ],
    }


DEPLOY = keys_for(("apps", "deployments"))


def _deployment(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": list(containers)}}}}


def test_strategic_merge_merges_containers_env_and_ports_by_key() -> None:
    """strategicpatch: patchMergeKey name / containerPort on PodSpec and Container."""
    stored = _deployment(
        {
            "name": "a",
            "image": "1",
            "args": ["x"],
            "env": [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}],
            "ports": [{"containerPort": 80, "name": "http"}],
        },
        {"name": "b", "image": "1"},
    )
    patch = _deployment(
        {
            "name": "a",
            "image": "2",
            "env": [{"name": "F", "value": "3"}, {"name": "E", "$patch": "delete"}],
            "ports": [{"containerPort": 81}],
        }
    )
    merged = strategic_merge_patch(stored, patch, DEPLOY)
    a, b = merged["spec"]["template"]["spec"]["containers"]
    assert a == {
        "name": "a",
        "image": "2",
        "args": ["x"],
        "env": [{"name": "F", "value": "3"}],
        "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 81}],
    }
    assert b == {"name": "b", "image": "1"}
    assert stored["spec"]["template"]["spec"]["containers"][0]["image"] == "1"  # not mutated


def test_strategic_merge_directives() -> None:
    stored = _deployment({"name": "a", "image": "1"}, {"name": "b", "image": "1"})
    order = strategic_merge_patch(
        stored,
        {
            "spec": {
                "template": {
                    "spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}
                }
            }
        },
        DEPLOY,
    )
    assert [c["name"] for c in order["spec"]["template"]["spec"]["containers"]] == ["b", "a"]
    replaced = strategic_merge_patch(
        stored,
        _deployment({"$patch": "replace"}, {"name": "c", "image": "2"}),
        DEPLOY,
    )
    assert replaced["spec"]["template"]["spec"]["containers"] == [{"name": "c", "image": "2"}]
    other_lists = strategic_merge_patch(
        {"spec": {"template": {"spec": {"tolerations": [{"key": "a"}]}}}},
        {"spec": {"template": {"spec": {"tolerations": [{"key": "b"}]}}}},
        DEPLOY,
    )
    assert other_lists["spec"]["template"]["spec"]["tolerations"] == [{"key": "b"}]  # replaced
    finalizers = strategic_merge_patch(
        {"metadata": {"finalizers": ["a", "b"]}},
        {"metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"]}},
        DEPLOY,
    )
    assert finalizers["metadata"]["finalizers"] == ["b", "c"]
    deleted_map = strategic_merge_patch(
        {"spec": {"strategy": {"type": "Recreate"}}},
        {"spec": {"strategy": {"$patch": "delete"}}},
        DEPLOY,
    )
    assert "strategy" not in deleted_map["spec"]
    retained = strategic_merge_patch(
        {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}},
        {"spec": {"strategy": {"type": "Recreate", "$retainKeys": ["type"]}}},
        DEPLOY,
    )
    assert retained["spec"]["strategy"] == {"type": "Recreate"}


def test_strategic_merge_refuses_items_without_their_key() -> None:
    with pytest.raises(PatchMalformed):
        strategic_merge_patch(_deployment({"name": "a"}), _deployment({"image": "x"}), DEPLOY)
    with pytest.raises(PatchMalformed):
        strategic_merge_patch({}, {"spec": {"$patch": "explode"}}, DEPLOY)
