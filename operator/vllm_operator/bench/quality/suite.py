"""Quality suites as data: the schema of a suite file and how it is loaded.

A suite is a YAML (or JSON) file: the built-in default one ships in ``bench/data``, users
bring their own as a file or a ConfigMap mounted into the Job. The schema is strict
(unknown keys, duplicate ids, unsupported JSON-Schema keywords and bad regexes are errors
at load time, naming the test and field) so a typo cannot turn a check into a silent pass.

Assertion vocabulary (``type``): equals, contains, regex, is-json, json-schema,
number-close, word-count, python-tests (a function the answer defines, called with each
case's arguments in a sandbox; bench compares the outputs with the case's expected value),
and ``not`` wrapping any of them. A test passes
when every one of its assertions passes. docs/bench.md documents each field.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from vllm_operator.api.fixes import first_error
from vllm_operator.bench.local_files import read_regular
from vllm_operator.bench.quality import jsonschema_lite
from vllm_operator.bench.sandbox.run import json_depth
from vllm_operator.errors import SpecError

SUITE_SCHEMA = "vllm-operator.dev/quality-suite/v1"
MAX_SUITE_BYTES = 1 << 20
"""Largest suite file (the Job mounts it from a ConfigMap, which holds at most 1 MiB); a
regular file only, UTF-8 (a FIFO or /dev/zero named as --suite would block or never end)."""


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"bad regular expression {pattern!r}: {exc}") from exc


class Equals(_Model):
    """The whole answer (trimmed) equals ``value``."""

    type: Literal["equals"]
    value: str
    ignore_case: bool = False


class Contains(_Model):
    """The answer contains every string in ``value``."""

    type: Literal["contains"]
    value: str | list[str]
    ignore_case: bool = False


class Regex(_Model):
    """``pattern`` is found somewhere in the answer (``re.search``)."""

    type: Literal["regex"]
    pattern: str
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        _compile(pattern)
        return pattern


class IsJson(_Model):
    """The answer (or its first fenced code block) parses as JSON."""

    type: Literal["is-json"]


class JsonSchema(_Model):
    """The answer's JSON validates against ``schema`` (the subset in ``jsonschema_lite``)."""

    type: Literal["json-schema"]
    schema_: dict[str, Any] = Field(alias="schema")

    @field_validator("schema_")
    @classmethod
    def _supported(cls, schema: dict[str, Any]) -> dict[str, Any]:
        jsonschema_lite.check_schema(schema)
        return schema


class NumberClose(_Model):
    """A number in the answer is within ``tolerance`` of ``value``.

    The number is the first group of ``pattern`` when given, else the last number in the
    answer; ``$`` and thousands separators are ignored.
    """

    type: Literal["number-close"]
    value: float
    tolerance: float = Field(default=0.0, ge=0)
    pattern: str | None = None

    @field_validator("pattern")
    @classmethod
    def _one_group(cls, pattern: str | None) -> str | None:
        if pattern is not None and _compile(pattern).groups < 1:
            raise ValueError("pattern needs a capturing group around the number")
        return pattern


class WordCount(_Model):
    """The answer has between ``min`` and ``max`` whitespace-separated words (inclusive)."""

    type: Literal["word-count"]
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)


MAX_CASES = 100
"""Cases of one python-tests check (``bench.sandbox.run.MAX_CALLS``)."""
OLD_PYTHON_TESTS = (
    "the field 'tests' (Python test code run in the answer's own process) is no longer "
    "supported: the answer could read whatever that code knew and forge its own pass "
    "(issue 38). Write the checks as data instead: 'function' (the name the answer must "
    "define) and 'cases', a list of {args: [...], kwargs: {...}, expect: VALUE} or "
    "{args: [...], raises: ExceptionName}; e.g. `assert f(2) == 4` becomes "
    "{args: [2], expect: 4} (docs/bench.md, 'python-tests')"
)


class Case(_Model):
    """One call of the answer's function and what it must give back.

    ``args`` and ``kwargs`` are what the sandboxed answer receives; ``expect`` (the value
    the call must return, compared as JSON: ``true`` is not ``1``, a tuple is a list) or
    ``raises`` (the name of the exception class it must raise) stay with bench, which
    compares: the process that runs the answer never holds them.
    """

    args: list[JsonValue] = Field(default_factory=list)
    kwargs: dict[str, JsonValue] = Field(default_factory=dict)
    expect: JsonValue = None
    raises: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")

    @model_validator(mode="after")
    def _one_expectation(self) -> Case:
        if ("expect" in self.model_fields_set) == (self.raises is not None):
            raise ValueError("give exactly one of 'expect' (the value) or 'raises'")
        if max(json_depth(self.args), json_depth(self.kwargs), json_depth(self.expect)) > 30:
            raise ValueError("values nest deeper than 30 lists or objects")
        return self


class PythonTests(_Model):
    """The answer's code (first fenced block, else all) defines ``function``; each case
    calls it in a sandbox apart from bench, and bench compares what it gave back."""

    type: Literal["python-tests"]
    function: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    cases: list[Case] = Field(min_length=1, max_length=MAX_CASES)
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)

    @model_validator(mode="before")
    @classmethod
    def _old_form(cls, data: object) -> object:
        if isinstance(data, dict) and "tests" in data:
            raise ValueError(OLD_PYTHON_TESTS)
        return data


class Not(_Model):
    """Passes when the wrapped assertion fails."""

    type: Literal["not"]
    assert_: Assertion = Field(alias="assert")


Assertion = Annotated[
    Equals | Contains | Regex | IsJson | JsonSchema | NumberClose | WordCount | PythonTests | Not,
    Field(discriminator="type"),
]
Not.model_rebuild()


class QualityTest(_Model):
    """One prompt and the checks its answer must pass."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,62}$")
    category: str
    prompt: str = Field(min_length=1)
    system: str | None = None
    max_tokens: int = Field(default=512, ge=1, le=32768)
    assert_: list[Assertion] = Field(alias="assert", min_length=1)


class Suite(_Model):
    """A named list of quality tests."""

    schema_: Literal["vllm-operator.dev/quality-suite/v1"] = Field(
        default="vllm-operator.dev/quality-suite/v1", alias="schema"
    )
    name: str = Field(min_length=1, max_length=63)
    description: str = ""
    tests: list[QualityTest] = Field(default_factory=list)

    @field_validator("tests")
    @classmethod
    def _unique_ids(cls, tests: list[QualityTest]) -> list[QualityTest]:
        seen: set[str] = set()
        for test in tests:
            if test.id in seen:
                raise ValueError(f"test id {test.id!r} appears twice")
            seen.add(test.id)
        return tests

    @property
    def ids(self) -> list[str]:
        return [t.id for t in self.tests]


EMPTY_SUITE = Suite(name="none")


def parse_suite(text: str, origin: str) -> Suite:
    """Parse suite text (YAML or JSON); ``SpecError`` names the origin and the bad field."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(origin, f"not YAML/JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise SpecError(origin, "a suite is a mapping with 'name' and 'tests'")
    try:
        return Suite.model_validate(raw)
    except ValidationError as exc:
        raise first_error(exc, origin, fix="") from exc


def load_suite(ref: str) -> Suite:
    """``builtin:default``, ``builtin:none`` or a path to a suite file."""
    if ref == "builtin:none":
        return EMPTY_SUITE
    if ref == "builtin:default":
        packaged = resources.files("vllm_operator.bench.quality").joinpath(
            "data/default_suite.yaml"
        )
        return parse_suite(packaged.read_text(encoding="utf-8"), "builtin:default")
    if ref.startswith("builtin:"):
        raise SpecError("--suite", f"unknown built-in suite {ref!r}", "builtin:default or none")
    try:
        data = read_regular(ref, MAX_SUITE_BYTES)
    except OSError as exc:
        raise SpecError("--suite", f"cannot read {ref}: {exc.strerror or exc}") from exc
    if len(data) > MAX_SUITE_BYTES:
        raise SpecError("--suite", f"{ref} is larger than {MAX_SUITE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            "--suite", f"{ref} is not UTF-8 ({exc.reason})", "save it as UTF-8"
        ) from exc
    return parse_suite(text, ref)


def suite_json(suite: Suite) -> str:
    """The suite in its wire form (camelCase), e.g. for a ConfigMap."""
    return json.dumps(suite.model_dump(mode="json", by_alias=True, exclude_defaults=True))
