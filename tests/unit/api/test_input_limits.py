"""Hostile resources: depth, size, numbers and YAML tricks end in named errors, fast.

Each limit is tested at its boundary: the largest accepted value passes and one more is
refused, so moving a limit fails a test.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import builders
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.api.limits import INT_MAX, INT_MIN, MAX_DEPTH, MAX_STRING, MAX_VALUES, check_raw
from vllm_operator.api.resource import parse_spec
from vllm_operator.api.yaml_input import (
    MAX_DOCUMENTS,
    MAX_INPUT_BYTES,
    MAX_INT_DIGITS,
    YAMLInputError,
    load_documents,
)
from vllm_operator.engine.policy import plan_launch
from vllm_operator.errors import SpecErrors
from vllm_operator.render import render_all
from vllm_operator.render.revision import revision_hash


def resource(affinity: Any = None) -> dict[str, Any]:
    raw = builders.resource()
    if affinity is not None:
        raw["spec"]["scheduling"] = {"affinity": affinity}
    return raw


def nested(levels: int) -> dict[str, Any]:
    """A map chain whose innermost map sits ``levels`` levels below its outermost one."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        value = {"a": value}
    return value


# spec is depth 2, scheduling 3, affinity 4: a chain of n extra maps reaches 4 + n.
DEEPEST_OK = MAX_DEPTH - 4


def errors_of(raw: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SpecErrors) as info:
        parse_vllm_deployment(raw)
    return [(e.field, f"{e.message} {e.fix}") for e in info.value.errors]


def test_deepest_accepted_nest_passes_the_bounds() -> None:
    raw = resource(nested(DEEPEST_OK))
    assert check_raw(raw["spec"], "spec") == []
    # What is left is the affinity's shape, not its depth.
    assert errors_of(raw) == [
        (
            "spec.scheduling.affinity.a",
            "is not a field of Affinity remove it or check it against "
            "`kubectl explain pod.spec.affinity`",
        )
    ]


def test_a_real_affinity_parses_hashes_and_renders() -> None:
    term = {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}
    pod_term = {
        "labelSelector": {"matchLabels": {"app": "vllm"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": term}
            ],
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": pod_term}
            ]
        },
    }
    vd = parse_vllm_deployment(resource(affinity))
    assert revision_hash(vd.spec, plan_launch(vd.spec))
    (deployment, *_) = render_all(vd)
    assert deployment["spec"]["template"]["spec"]["affinity"] == affinity


@pytest.mark.parametrize("levels", [DEEPEST_OK + 1, 300, 1000, 100_000])
def test_deeper_affinity_names_the_field(levels: int) -> None:
    started = time.perf_counter()
    found = errors_of(resource(nested(levels)))
    assert time.perf_counter() - started < 2.0
    assert len(found) == 1
    field, text = found[0]
    assert field == "spec.scheduling.affinity" + ".a" * (DEEPEST_OK + 1)
    assert f"deeper than {MAX_DEPTH}" in text


def test_deep_lists_are_refused_like_maps() -> None:
    value: Any = 1
    for _ in range(500):
        value = [value]
    (field, text), *_ = errors_of(resource({"x": value}))
    assert field.startswith("spec.scheduling.affinity.x[0]")
    assert "flatten" in text


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (INT_MAX, True),
        (INT_MIN, True),
        (INT_MAX + 1, False),
        (INT_MIN - 1, False),
        (10**4000, False),
    ],
)
def test_integers_must_fit_in_int64(value: int, ok: bool) -> None:
    raw = resource({"nodeAffinity": {"weight": value}})
    if ok:
        assert check_raw(raw["spec"], "spec") == []
        return
    assert errors_of(raw) == [
        (
            "spec.scheduling.affinity.nodeAffinity.weight",
            "is an integer outside the 64-bit range Kubernetes stores "
            f"use a value between {INT_MIN} and {INT_MAX}",
        )
    ]


def test_huge_integer_in_a_typed_field_is_named() -> None:
    raw = resource()
    raw["spec"]["replicas"] = 10**100
    assert errors_of(raw)[0][0] == "spec.replicas"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_refused(value: float) -> None:
    raw = resource()
    raw["spec"]["gate"] = {"thresholds": {"latencyMs": {"short": value}}}
    (field, text), *_ = errors_of(raw)
    assert field == "spec.gate.thresholds.latencyMs.short"
    assert "finite" in text


def test_strings_longer_than_the_limit_are_refused() -> None:
    assert check_raw({"k": "x" * MAX_STRING}, "spec") == []
    (error,) = check_raw({"k": "x" * (MAX_STRING + 1)}, "spec")
    assert error.field == "spec.k"


def test_non_json_values_and_keys_are_named() -> None:
    import datetime

    found = check_raw({"a": datetime.date(2024, 1, 1), 1: "x", "b": {1, 2}}, "spec")
    fields = sorted(e.field for e in found)
    assert fields == ["spec.a", "spec.b", "spec[1]"]


def test_value_count_boundary() -> None:
    # The walked map itself counts as one value.
    assert check_raw({"k": ["x"] * (MAX_VALUES - 2)}, "spec") == []
    (error,) = check_raw({"k": ["x"] * (MAX_VALUES - 1)}, "spec")
    assert error.field == "spec"
    assert f"more than {MAX_VALUES}" in error.message


def test_parse_spec_applies_the_same_limits() -> None:
    spec = copy.deepcopy(resource(nested(300))["spec"])
    with pytest.raises(SpecErrors) as info:
        parse_spec(spec)
    assert info.value.errors[0].field.startswith("spec.scheduling.affinity.a")


def test_status_is_bounded_too() -> None:
    raw = resource()
    raw["status"] = nested(100)
    assert errors_of(raw)[0][0].startswith("status.a")


# --- the YAML reader ---------------------------------------------------------------------


def test_aliases_are_refused_with_their_position() -> None:
    text = "a: &x [1, 2]\nb: *x\n"
    with pytest.raises(YAMLInputError, match=r"line 2, column 4: alias \*x"):
        load_documents(text)


def test_billion_laughs_is_refused_at_once() -> None:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    started = time.perf_counter()
    with pytest.raises(YAMLInputError, match="alias"):
        load_documents("\n".join(lines))
    assert time.perf_counter() - started < 1.0


def test_yaml_depth_boundary() -> None:
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert load_documents(ok)
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    with pytest.raises(YAMLInputError, match=rf"column {MAX_DEPTH + 1}: nested deeper"):
        load_documents(deep)


def test_yaml_depth_matches_the_resource_walk() -> None:
    # The same affinity is accepted (or refused) by the reader and by the resource check.
    for levels, ok in ((DEEPEST_OK, True), (DEEPEST_OK + 1, False)):
        text = yaml.safe_dump(resource(nested(levels)))
        if ok:
            (doc,) = load_documents(text)
            assert check_raw(doc["spec"], "spec") == []
        else:
            with pytest.raises(YAMLInputError):
                load_documents(text)


def test_integer_digit_boundary() -> None:
    assert load_documents("n: " + "9" * MAX_INT_DIGITS) == [{"n": int("9" * MAX_INT_DIGITS)}]
    with pytest.raises(YAMLInputError, match=f"{MAX_INT_DIGITS + 1} digits"):
        load_documents("n: " + "9" * (MAX_INT_DIGITS + 1))
    with pytest.raises(YAMLInputError, match="5000 digits"):
        load_documents("n: " + "9" * 5000)
    # Quoted, it is a string and stays one.
    assert load_documents('n: "' + "9" * 5000 + '"')[0]["n"] == "9" * 5000


def test_size_boundary() -> None:
    filler = b"# " + b"x" * (MAX_INPUT_BYTES - 8) + b"\na: 1\n"
    assert len(filler) == MAX_INPUT_BYTES
    assert load_documents(filler) == [{"a": 1}]
    with pytest.raises(YAMLInputError, match=f"more than the {MAX_INPUT_BYTES} bytes"):
        load_documents(filler + b"\n")


def test_invalid_utf8_names_the_byte_and_line() -> None:
    with pytest.raises(YAMLInputError, match=r"not UTF-8: byte 9 \(line 2\)"):
        load_documents(b'a: 1\nb: "\xff"\n')


def test_document_count_boundary() -> None:
    assert len(load_documents("---\na: 1\n" * MAX_DOCUMENTS)) == MAX_DOCUMENTS
    with pytest.raises(YAMLInputError, match=f"more than {MAX_DOCUMENTS} documents"):
        load_documents("---\na: 1\n" * (MAX_DOCUMENTS + 1))


def test_value_count_is_bounded_while_reading() -> None:
    text = "a: [" + ", ".join(["1"] * MAX_VALUES) + "]"
    with pytest.raises(YAMLInputError, match=f"more than {MAX_VALUES} values"):
        load_documents(text)


def test_a_key_given_twice_is_refused_with_both_lines() -> None:
    """PyYAML keeps the last of two equal keys; the render would silently use it."""
    text = (
        "spec:\n  engine:\n    performanceMode: throughput\n    image: x\n"
        "    performanceMode: eager\n"
    )
    with pytest.raises(
        YAMLInputError,
        match=r"line 5, column 5: the key 'performanceMode' appears again .*first at line 3",
    ):
        load_documents(text)
    # Equal values in lists, and equal keys in different mappings, stay fine.
    assert load_documents("a: {x: 1}\nb: {x: 1}\nc: [1, 1]\n") == [
        {"a": {"x": 1}, "b": {"x": 1}, "c": [1, 1]}
    ]


def test_the_render_command_names_the_duplicate_key() -> None:
    import io

    from vllm_operator.commands.render import run

    example = (Path(__file__).resolve().parents[3] / "examples").glob("*.yaml")
    text = next(iter(sorted(example))).read_text(encoding="utf-8")
    doubled = text.replace("spec:\n", "spec:\n  replicas: 1\n  replicas: 3\n", 1)
    out, err = io.StringIO(), io.StringIO()
    code = run(["-f", "-"], "render", io.StringIO(doubled), out, err)
    assert code != 0
    assert "the key 'replicas' appears again" in err.getvalue()
    assert out.getvalue() == ""
