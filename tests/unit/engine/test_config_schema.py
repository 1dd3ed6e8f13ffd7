"""The JSON-schema walk over vLLM's config classes: refuses only what pydantic surely refuses."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest

from vllm_operator.engine import flagdata
from vllm_operator.engine.config_schema import SchemaMismatch, check

CC = flagdata.table(flagdata.Version.parse("0.33.0")).by_dest["compilation_config"]


def test_compilation_config_schema_is_recorded_with_vllms_own_validators() -> None:
    assert CC.config_schema is not None
    assert {"mode", "cudagraph_mode"} <= CC.config_custom  # "before" validators convert them
    assert "max_cudagraph_capture_size" not in CC.config_custom  # only a None-skipping wrap


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"backend": 3}, "backend"),
        ({"cudagraph_capture_sizes": [1, "x"]}, "cudagraph_capture_sizes.1"),
        ({"pass_config": {"bogus": True}}, "pass_config.bogus"),
        ({"use_inductor_graph_partition": "maybe"}, "use_inductor_graph_partition"),
    ],
)
def test_wrong_types_name_the_field(value: dict[str, Any], path: str) -> None:
    assert CC.config_schema is not None
    with pytest.raises(SchemaMismatch) as info:
        check(CC.config_schema, value, CC.config_custom)
    assert info.value.path == path


@pytest.mark.parametrize(
    "value",
    [
        {"backend": "inductor", "custom_ops": ["none"]},
        {"cudagraph_capture_sizes": [1, "2", 4.0]},  # pydantic's lax integers
        {"use_inductor_graph_partition": "yes"},
        {"mode": "none", "cudagraph_mode": "FULL"},  # vLLM's validators read these first
        {"pass_config": {"eliminate_noops": False}},
    ],
)
def test_valid_configs_pass(value: dict[str, Any]) -> None:
    assert CC.config_schema is not None
    check(CC.config_schema, value, CC.config_custom)


def test_alternatives_over_deep_values_stay_bounded() -> None:
    branch = {"type": "array", "items": {"$ref": "#/$defs/T"}}
    schema = {
        "$defs": {"T": {"anyOf": [branch, branch, {"type": "integer"}]}},
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/T"}},
    }
    value: Any = "s"
    for _ in range(30):
        value = [value]
    started = time.monotonic()
    with contextlib.suppress(SchemaMismatch):
        check(schema, {"x": value}, frozenset())
    assert time.monotonic() - started < 5
