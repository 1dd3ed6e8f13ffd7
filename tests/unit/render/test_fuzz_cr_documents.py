"""Fuzzing VLLMDeployment documents: every input is rendered or refused by field, quickly.

Documents start from the shipped examples and are mutated the way a careless or hostile
author would: a value anywhere replaced by a deep nest, a huge or non-finite number, an odd
type, a long or exotic string; keys added or removed; the text itself cut short or given
bytes that are not UTF-8. Through ``parse_vllm_deployment`` (+ the flag policy and
rendering) and through the ``render`` CLI, every one must end in success or errors that
name a field (or a document position) - never another exception, never a traceback - and
within a per-example deadline.
"""

from __future__ import annotations

import copy
import io
import json
import math
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.commands.render import run
from vllm_operator.errors import SpecErrors
from vllm_operator.render import render_all
from vllm_operator.render.validate import check

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "examples").glob("*.yaml"))]
FIELD = re.compile(r"^(apiVersion|kind|metadata|spec|status)([.\[]|$)")
# A CLI refusal names a field ("spec.x: ...") or a position in the input ("line 3, ...",
# "not UTF-8", "not valid YAML", "document 2", a size limit).
CLI_PROBLEM = re.compile(
    r"^(apiVersion|kind|metadata|spec|status)([.\[].*?)?: |line \d+, column \d+|not UTF-8|"
    r"not valid YAML|document \d+ is not a mapping|no documents|bytes accepted|characters accepted"
)
FUZZ = settings(
    max_examples=1000,
    deadline=timedelta(seconds=3),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,  # the same examples on every run: CI stays reproducible
)


class Deep:
    """A list nested ``levels`` deep: built without recursion, written as brackets."""

    def __init__(self, levels: int) -> None:
        self.levels = levels

    def value(self) -> Any:
        out: Any = []
        for _ in range(self.levels):
            out = [out]
        return out

    def marker(self) -> str:
        return f"__deep_{self.levels}__"


huge_ints = st.one_of(
    st.integers(),
    st.integers(min_value=18, max_value=6000).map(lambda n: 10**n),
    st.integers(min_value=18, max_value=6000).map(lambda n: -(10**n)),
)
odd_scalars = st.one_of(
    st.none(),
    st.booleans(),
    huge_ints,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=40),
    st.integers(min_value=1000, max_value=200_000).map(lambda n: "x" * n),
    st.sampled_from(["..", "/etc/passwd", "memory", "--help", "$(HOME)", "\u202e", "a\nb"]),
)
hostile = st.recursive(
    odd_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=12), children, max_size=4),
    ),
    max_leaves=12,
) | st.integers(min_value=20, max_value=1500).map(Deep)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in ``doc`` (examples are shallow: recursion is fine here)."""
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found += _paths(value, (*prefix, i))
    return found


@st.composite
def documents(draw: st.DrawFn) -> tuple[dict[str, Any], list[Deep]]:
    """An example with a few mutations; the Deep values it holds are returned too."""
    doc = copy.deepcopy(draw(st.sampled_from(EXAMPLES)))
    deep: list[Deep] = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(_paths(doc)[1:]))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        leaf = path[-1]
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "delete" and isinstance(parent, dict):
            parent.pop(leaf, None)
            continue
        value = draw(hostile)
        if isinstance(value, Deep):
            deep.append(value)
        if action == "add" and isinstance(parent[leaf], dict):
            parent[leaf][draw(st.text(min_size=1, max_size=20))] = value
        else:
            parent[leaf] = value
    return doc, deep


def materialise(value: Any) -> Any:
    """``value`` with every ``Deep`` placeholder built (iteratively, so any depth)."""
    if isinstance(value, Deep):
        return value.value()
    if isinstance(value, dict):
        return {k: materialise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [materialise(v) for v in value]
    return value


def as_text(doc: dict[str, Any], deep: list[Deep]) -> str:
    """The document as YAML (JSON is YAML), deep values written as bare brackets."""

    def placeholder(value: Any) -> Any:
        if isinstance(value, Deep):
            return value.marker()
        if isinstance(value, float) and math.isnan(value):
            return "__nan__"
        if isinstance(value, float) and value in (float("inf"), float("-inf")):
            return "__inf__" if value > 0 else "__-inf__"
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**4000:
            return "__int__"
        if isinstance(value, dict):
            return {k: placeholder(v) for k, v in value.items()}
        if isinstance(value, list):
            return [placeholder(v) for v in value]
        return value

    text = json.dumps(placeholder(doc), ensure_ascii=False)
    for d in deep:
        text = text.replace(json.dumps(d.marker()), "[" * d.levels + "]" * d.levels)
    text = text.replace('"__nan__"', ".nan").replace('"__inf__"', ".inf")
    text = text.replace('"__-inf__"', "-.inf")
    return text.replace('"__int__"', "9" * 5000)


def assert_named(exc: SpecErrors) -> None:
    for error in exc.errors:
        assert FIELD.match(error.field), f"error without a field: {error}"
        assert error.message, error


@FUZZ
@given(documents())
def test_parse_and_render_end_in_a_result_or_named_errors(
    case: tuple[dict[str, Any], list[Deep]],
) -> None:
    doc, _ = case
    try:
        vd = parse_vllm_deployment(materialise(doc))
        check(vd)
        manifests = render_all(vd)
    except SpecErrors as exc:
        event("refused")
        assert_named(exc)
    else:
        event("rendered")
        assert [m["kind"] for m in manifests] == ["Deployment", "Service", "Service"]
        json.dumps(manifests)  # what the API gets must serialise


def _cli(data: bytes) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    code = run(["-f", "-"], "render", stdin, out, err)
    return code, out.getvalue(), err.getvalue()


def _assert_cli(code: int, out: str, err: str) -> None:
    assert "Traceback" not in err
    if code == 0:
        assert list(yaml.safe_load_all(out))
        return
    assert code == 2, err
    assert out == ""
    assert any(CLI_PROBLEM.search(line) for line in err.splitlines()), err


@settings(FUZZ, max_examples=300)
@given(documents())
def test_render_cli_on_mutated_documents(case: tuple[dict[str, Any], list[Deep]]) -> None:
    doc, deep = case
    _assert_cli(*_cli(as_text(doc, deep).encode()))


@settings(FUZZ, max_examples=300)
@given(
    st.sampled_from(EXAMPLES),
    st.integers(min_value=0, max_value=2000),
    st.binary(min_size=1, max_size=8),
    st.booleans(),
)
def test_render_cli_on_damaged_bytes(
    doc: dict[str, Any], at: int, junk: bytes, truncate: bool
) -> None:
    data = yaml.safe_dump(doc, allow_unicode=True).encode()
    at = min(at, len(data))
    data = data[:at] + junk + (b"" if truncate else data[at:])
    _assert_cli(*_cli(data))
