"""``api.fixes.first_error``: the one formatter of pydantic's first error for the CLIs.

bench, judge, the report page and the suite loader each once wrote this by hand; the field,
the message and the fix they print come from here now.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, ValidationError, field_validator

from vllm_operator.api.fixes import first_error


class _Inner(BaseModel):
    count: int = Field(ge=1)


class _Outer(BaseModel):
    items: list[_Inner]
    name: str = "x"

    @field_validator("name")
    @classmethod
    def _no_spaces(cls, value: str) -> str:
        if " " in value:
            raise ValueError("no spaces in a name")
        return value


def _error(data: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Outer.model_validate(data)
    return caught.value


def test_the_field_is_the_dotted_location_after_where() -> None:
    error = first_error(
        _error({"items": [{"count": 1}, {"count": 0}]}), "--workload", docs="--help"
    )
    assert error.field == "--workload: items.1.count"
    assert error.message == "Input should be greater than or equal to 1"
    assert error.fix == "use a value of at least 1"


def test_a_whole_value_error_is_the_top_level() -> None:
    assert first_error(_error([1]), "report.json").field == "report.json: (top level)"


def test_an_option_of_one_value_is_named_alone() -> None:
    error = first_error(_error({"items": [{"count": 0}]}), "--name", dotted=False)
    assert error.field == "--name"


def test_value_error_prefix_is_dropped_and_the_hint_appended() -> None:
    error = first_error(_error({"items": [], "name": "a b"}), "s", fix="", hint="(see x)")
    assert error.message == "no spaces in a name (see x)"
    assert error.fix == ""
    assert str(error) == "s: name: no spaces in a name (see x)"


def test_a_missing_field_gets_a_fix_naming_the_docs() -> None:
    error = first_error(_error({}), "--workload-json", docs="`bench --help`")
    assert error.field == "--workload-json: items"
    assert error.fix == "add it (`bench --help`)"
