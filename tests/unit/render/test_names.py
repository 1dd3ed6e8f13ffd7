"""Derived names stay valid Kubernetes names for every accepted VLLMDeployment name."""

from __future__ import annotations

import re

import pytest

from vllm_operator.render import names

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def test_contract_formats() -> None:
    assert names.deployment_name("q", "0123456789") == "q-0123456789"
    assert names.serving_service_name("q") == "q"
    assert names.candidate_service_name("q") == "q-candidate"
    assert names.twin_deployment_name("q", "0123456789") == "q-twin-0123456789"
    assert names.twin_service_name("q") == "q-twin"
    assert names.job_name("q", "0123456789", 1) == "q-gate-0123456789-1"
    with pytest.raises(ValueError, match="from 1"):
        names.job_name("q", "0123456789", 0)


def test_longest_accepted_name_keeps_every_derived_name_valid() -> None:
    name = "a" * names.MAX_NAME_LENGTH
    assert names.check_name(name) == []
    for derived in (
        names.deployment_name(name, "f" * 10),
        names.candidate_service_name(name),
        names.twin_deployment_name(name, "f" * 10),
        names.twin_service_name(name),
        names.job_name(name, "f" * 10, 999),
    ):
        assert len(derived) <= 63
        assert DNS1123_LABEL.match(derived)
    (error,) = names.check_name(name + "a")
    assert error.field == "metadata.name"
    assert f"at most {names.MAX_NAME_LENGTH}" in error.fix


@pytest.mark.parametrize("bad", ["9b", "vllm", "a_b", "-a"])
def test_invalid_stems(bad: str) -> None:
    assert names.check_name(bad)
