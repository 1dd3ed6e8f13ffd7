"""Derived names stay valid Kubernetes names and never collide between resources."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_operator.render import names

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
REV = "0123456789"


def test_contract_formats() -> None:
    assert names.deployment_name("q", REV) == "q--0123456789"
    assert names.serving_service_name("q") == "q"
    assert names.candidate_service_name("q") == "q--candidate"
    assert names.twin_deployment_name("q", REV) == "q--twin-0123456789"
    assert names.twin_service_name("q") == "q--twin"
    assert names.job_name("q", REV, 1) == "q--gate-0123456789-1"
    with pytest.raises(ValueError, match="from 1"):
        names.job_name("q", REV, 0)


def test_longest_accepted_name_keeps_every_derived_name_valid() -> None:
    name = "a" * names.MAX_NAME_LENGTH
    assert names.check_name(name) == []
    derived = [
        names.deployment_name(name, "f" * 10),
        names.candidate_service_name(name),
        names.twin_deployment_name(name, "f" * 10),
        names.twin_service_name(name),
        names.job_name(name, "f" * 10, 999),
    ]
    for child in derived:
        assert len(child) <= 63
        assert DNS1123_LABEL.match(child)
    assert max(len(c) for c in derived) == 63  # the limit is tight, not generous
    (error,) = names.check_name(name + "a")
    assert error.field == "metadata.name"
    assert f"at most {names.MAX_NAME_LENGTH}" in error.fix


@pytest.mark.parametrize("bad", ["9b", "vllm", "a_b", "-a", "beta--candidate", "a--b", "a---b"])
def test_invalid_stems(bad: str) -> None:
    assert names.check_name(bad)


def test_double_dash_error_says_what_to_write() -> None:
    (error,) = names.check_name("beta--candidate")
    assert "'--'" in error.message
    assert "'beta-candidate'" in error.fix


def test_the_issue_10_collision_is_gone() -> None:
    # A resource named like beta's old candidate Service gets its own, distinct, children.
    assert names.check_name("beta-candidate") == []
    assert names.serving_service_name("beta-candidate") != names.candidate_service_name("beta")


_NAME = st.from_regex(r"[a-z]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True).filter(
    lambda n: names.check_name(n) == []
)
_REV = st.from_regex(r"[0-9a-f]{10}", fullmatch=True)


def _children(name: str, rev: str, attempt: int) -> dict[str, set[str]]:
    """Every object name one resource may use, by kind (names are unique per kind)."""
    return {
        "Service": {names.serving_service_name(name), names.candidate_service_name(name)},
        "Deployment": {names.deployment_name(name, rev)},
        "Job": {names.job_name(name, rev, attempt)},
    }


_RESOURCE = st.tuples(_NAME, _REV, st.integers(1, 999))


@given(_RESOURCE, _RESOURCE)
def test_two_resources_never_derive_the_same_child_name(
    a: tuple[str, str, int], b: tuple[str, str, int]
) -> None:
    if a[0] == b[0]:
        return
    mine, theirs = _children(*a), _children(*b)
    for kind, used in mine.items():
        assert not used & theirs[kind], (kind, a, b)


@given(
    _RESOURCE,
    st.sampled_from(["candidate", "gate", "0123456789", "gate-0123456789-1", "twin"]),
    _REV,
    st.integers(1, 999),
)
def test_a_resource_named_like_anothers_child_gets_distinct_children(
    a: tuple[str, str, int], tail: str, rev: str, attempt: int
) -> None:
    neighbour = f"{a[0]}-{tail}"
    if names.check_name(neighbour):
        return
    mine, theirs = _children(*a), _children(neighbour, rev, attempt)
    for kind, used in mine.items():
        assert not used & theirs[kind], (kind, a, neighbour)
