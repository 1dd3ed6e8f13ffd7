"""The JSON-Schema subset agrees with the reference implementation where both apply."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.bench.quality.jsonschema_lite import SchemaUnsupported, check_schema, errors

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer", "minimum": 0}}},
    {
        "type": "array",
        "minItems": 1,
        "maxItems": 2,
        "items": {"type": "string", "pattern": "^[a-z]+$"},
    },
    {"enum": [1, "x", None, True]},
    {"const": {"k": [1, 2.0]}},
    {"type": ["string", "null"], "minLength": 2, "maxLength": 3},
    {"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 5},
    {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    {"allOf": [{"type": "object"}, {"not": {"required": ["b"]}}]},
    {"type": "object", "additionalProperties": False, "properties": {"a": True}},
    {"type": "object", "additionalProperties": {"type": "boolean"}},
]

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(-5, 5, allow_nan=False)
    | st.text("abcB", max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner, max_size=2)
    ),
    max_leaves=6,
)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_schemas_are_supported(schema: dict[str, Any]) -> None:
    check_schema(schema)


@settings(max_examples=100, deadline=None)
@given(schema=st.sampled_from(SCHEMAS), value=JSON)
def test_agrees_with_jsonschema(schema: dict[str, Any], value: Any) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    reference = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert (not errors(value, schema)) is reference


@pytest.mark.parametrize(
    "schema",
    [
        {"patternProperties": {}},
        {"type": "decimal"},
        {"pattern": "("},
        {"properties": {"a": {"$ref": "#"}}},
        [],
    ],
)
def test_unsupported_schemas_are_refused(schema: Any) -> None:
    with pytest.raises(SchemaUnsupported):
        check_schema(schema)


def test_errors_name_the_path() -> None:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
    }
    assert errors({"items": [1, "x"]}, schema) == ["$.items[1]: expected integer, got string"]
