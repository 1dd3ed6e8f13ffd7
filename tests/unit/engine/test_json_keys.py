"""Keys and value types inside JSON-valued flags: the policy's verdict equals vLLM's converter's.

``engine/flags/keys/vllm-X.Y.Z.json`` holds, per release, forms generated from each JSON
option's config class (``hack/vllm-flags/keys_stage.py``): each field with its default, a
near-miss key, a wrong-typed value, an unknown key, and the verdict of the option's own
argparse converter (``parse_dataclass``). Each form goes through the policy's whole entry
(``extra_args.check``): a form vLLM refused must be refused as argparse's error on that
flag, one it accepted must draw no such error. Left out, and counted: a value a vLLM
validator decides itself before pydantic's type check (a name it looks up, a mode name) and
the values of a class whose schema could not be recorded (``quantization_config`` 0.33:
a plain validator) -- vLLM decides those at start.
"""

from __future__ import annotations

import json

import pytest

from vllm_operator.engine import extra_args, flagdata, json_keys
from vllm_operator.engine.flagdata import FlagTable
from vllm_operator.engine.version import Version

RECORDED = [r for r in flagdata.releases() if json_keys.recorded(r) is not None]


def test_every_release_with_an_engine_record_has_its_keys_recorded() -> None:
    engine = [r for r in flagdata.releases() if flagdata.table(r).records_engine]
    assert engine == RECORDED
    assert len(RECORDED) == 36


def _refusal(table: FlagTable, form: json_keys.KeyForm) -> str | None:
    """The policy's argparse refusal of ``flag value`` on that flag, if any."""
    option = table.by_dest[form.option]
    report = extra_args.check(["m"], [form.flag, form.value], table, "balanced")
    for error in report.errors:
        if "would exit at start" in error.message and f"argument {option.display}:" in (
            error.message
        ):
            return error.message
    return None


def decided_by_vllm(table: FlagTable, form: json_keys.KeyForm) -> bool:
    """A wrong-typed value the policy leaves to vLLM (``json_keys.decided_by_vllm``)."""
    if form.kind != "wrong_type":
        return False
    value = json.loads(form.value)[form.key]
    return json_keys.decided_by_vllm(table.by_dest[form.option], form.key, value, table.version)


def _disagreements(release: Version) -> tuple[list[str], int, int]:
    table = flagdata.table(release)
    record = json_keys.recorded(release)
    assert record is not None
    wrong: list[str] = []
    count = left = 0
    for form in record.forms:
        if decided_by_vllm(table, form):
            left += 1
            continue
        count += 1
        said = _refusal(table, form)
        if form.accepted and said:
            wrong.append(f"{form.flag} {form.value}: vLLM accepts it, the policy says {said}")
        if not form.accepted and not said:
            wrong.append(f"{form.flag} {form.value}: vLLM refuses ({form.message}), policy not")
    return wrong, count, left


@pytest.mark.parametrize("release", RECORDED, ids=str)
def test_policy_refuses_exactly_the_keys_and_types_vllm_refuses(release: Version) -> None:
    wrong, count, left = _disagreements(release)
    assert count >= 100
    assert left <= count // 10  # what is left to vLLM stays the exception
    assert wrong == []


@pytest.mark.parametrize("release", RECORDED, ids=str)
def test_an_unknown_key_says_flag_release_did_you_mean_and_the_valid_keys(
    release: Version,
) -> None:
    table = flagdata.table(release)
    record = json_keys.recorded(release)
    assert record is not None
    refused = [f for f in record.forms if f.kind == "near_miss" and not f.accepted]
    for form in refused:
        text = _refusal(table, form)
        assert text is not None, form
        assert f"vLLM {release}" in text, text
        assert form.flag in text, text
        assert f"unknown key {next(iter(json.loads(form.value)))!r}" in text, text
        assert "did you mean" in text, text
        assert f"'{form.key}'" in text, text
        assert "valid keys: " in text, text


def test_a_plain_dataclass_ignores_an_unknown_key_and_so_does_the_policy() -> None:
    """0.10.2's config classes were plain dataclasses: pydantic ignores a key they lack."""
    release = Version.parse("0.10.2")
    table = flagdata.table(release)
    record = json_keys.recorded(release)
    assert record is not None
    extra = [f for f in record.forms if f.kind == "extra"]
    assert extra
    assert all(f.accepted for f in extra)
    assert all(_refusal(table, f) is None for f in extra)


def test_converted_first_comes_from_the_recorded_validators() -> None:
    """A field validator that handed a JSON type on unchanged leaves values of that type to
    the schema; other types are the validator's; a model validator that converts makes
    every key the validator's."""
    doc = {
        "options": {
            "a_config": {
                "flag": "--a-config",
                "class": "A",
                "keys": ["mode", "x"],
                "converted_first": {"mode": ["integer", "null"]},
                "model_validators": {"check": True},
            },
            "b_config": {
                "flag": "--b-config",
                "class": "B",
                "keys": ["y"],
                "converted_first": {},
                "model_validators": {"convert": False},
            },
        },
        "forms": [],
    }
    record = json_keys.parse(doc)
    assert record.handed_on["a_config"] == {"mode": frozenset({"integer", "null"})}
    assert record.handed_on["b_config"] is None
