"""The value converters of vLLM's `serve` options, by the name the extractor recorded.

argparse calls an option's ``type=`` on each value; vLLM's converters (``int``,
``human_readable_int``, ``optional_type(...)``, ``parse_type(...)``, ``parse_dataclass`` for
JSON configs, ...) are named in each recorded option (``flagdata.Option.type``). This
module re-implements those whose verdict matters before a pod starts; a converter it does
not know passes the string on, as argparse does for ``str``. Config dataclasses are
checked as far as the recording goes: vLLM's ``k``/``m``/``g`` expansion inside the JSON
(0.22+), keys (when vLLM refuses unknown ones), value types against the class's recorded
schema (``config_schema``) and the compilation config's mode/level conversion
(``config_time``).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from vllm_operator.engine import config_time, json_keys
from vllm_operator.engine.config_schema import SchemaMismatch, check
from vllm_operator.engine.flagdata import FlagTable, Option
from vllm_operator.errors import VLLMOperatorError

_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_JSON_OBJECT = re.compile(r"(?s)^\s*{.*}\s*$")
_QUOTED = re.compile(r'("(?:[^"\\]|\\.)*")')
_SUFFIXED = re.compile(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b")


class TypeMessage(VLLMOperatorError):
    """An ``argparse.ArgumentTypeError`` raised by one of vLLM's converters."""


def human_readable_int(value: str) -> int:
    """vLLM's ``human_readable_int``: 1k, 2M, 25.6k; ValueError otherwise."""
    value = value.strip()
    m = _HUMAN_INT.fullmatch(value)
    if m:
        number, suffix = m.groups()
        decimal = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        if "." in number:
            raise TypeMessage(
                f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean "
                f"to use {number}{suffix.lower()} instead?"
            )
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    return int(value)


def expand_number_suffixes(text: str) -> str:
    """vLLM's ``_expand_json_human_readable_numbers`` (0.22+): ``1k`` -> ``1000`` outside
    JSON strings, by ``human_readable_int``. Held to the release's recorded probes."""
    parts = _QUOTED.split(text)
    for i in range(0, len(parts), 2):
        parts[i] = _SUFFIXED.sub(lambda m: str(human_readable_int(m.group())), parts[i])
    return "".join(parts)


def convert_named(name: str, option: Option, text: str, table: FlagTable) -> Any:
    if name.startswith("optional_type(") and name.endswith(")"):
        if text in ("", "None"):
            return None
        return convert_named(f"parse_type({name[14:-1]})", option, text, table)
    if name.startswith("parse_type(") and name.endswith(")"):
        try:
            return convert_named(name[11:-1], option, text, table)
        except (ValueError, TypeError) as e:
            what = option.type_repr or name[11:-1]
            raise TypeMessage(f"Value {text} cannot be converted to {what}.") from e
    if name == "int":
        return int(text)
    if name == "float":
        return float(text)
    if name == "loads":
        return json.loads(text)
    if name == "human_readable_int":
        return human_readable_int(text)
    if name == "human_readable_int_or_auto":
        if text.strip() == "-1" or text.strip().lower() == "auto":
            return -1
        return human_readable_int(text)
    if name == "union_dict_and_str":
        if not _JSON_OBJECT.match(text):
            return text
        return convert_named("optional_type(loads)", option, text, table)
    if name == "parse_dataclass":
        return _config(option, text, table)
    return text  # str, bool-free converters we do not model: argparse passes the string on


def _config(option: Option, text: str, table: FlagTable) -> Any:
    """A config dataclass given as JSON, read as ``TypeAdapter(cls).validate_json`` would."""
    if option.json_suffixes:
        try:
            text = expand_number_suffixes(text)
        except TypeMessage as e:
            raise TypeMessage(f"invalid JSON for {option.display}: {e}") from e
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as e:
        if option.json_suffixes is None:  # not recorded: the release may expand 1k
            return _config(replace(option, json_suffixes=True), text, table)
        raise TypeMessage(f"invalid JSON for {option.display}") from e
    if not isinstance(value, dict):
        raise TypeMessage(f"{option.display} takes a JSON object")
    if option.config_strict and option.config_keys:
        unknown = sorted(set(value) - option.config_keys)
        if unknown:  # the first, worded with "did you mean" and the valid keys
            raise TypeMessage(json_keys.unknown_key(option, unknown[0], table.version))
    for key, allowed in option.config_values.items():
        if key in value and not allowed and option.config_strict:
            raise TypeMessage(f"unknown key {key}")
    if option.config_schema is not None:
        try:
            check(
                option.config_schema, value, json_keys.converted_first(option, value, table.version)
            )
        except SchemaMismatch as e:
            hint = ""
            if e.reason == "Unexpected keyword argument":
                hint = f"; {json_keys.unknown_key(option, e.path, table.version)}"
            raise TypeMessage(f"1 validation error: {e}{hint}") from e
    if option.dest == "kv_transfer_config" and _role_missing(value, table):
        raise TypeMessage(
            "1 validation error for KVTransferConfig: Please specify kv_role when kv_connector "
            "is set"
        )
    if option.dest == "compilation_config":
        for key in ("mode", "level"):
            if key in value and option.config_values.get(key):
                converted = config_time.compilation_value(table, key, value[key])
                if isinstance(converted, config_time.Refusal):
                    raise TypeMessage(f"1 validation error: {converted.reason}")
    return value


_ROLE_PROBE = ("--kv-transfer-config", '{"kv_connector": "X"}')


def _role_missing(value: dict[str, Any], table: FlagTable) -> bool:
    """A connector without ``kv_role``: ``KVTransferConfig.__post_init__`` raises at argparse
    time, where the release's recorded probe says so."""
    if value.get("kv_connector") is None or value.get("kv_role") is not None:
        return False
    form = table.form(_ROLE_PROBE)
    return form is not None and form.verdict == "error"
