"""What `vllm serve` refuses after ``validate`` and before the GPU: API server and engine config.

Once argparse and the serve subcommand's ``validate`` passed, `vllm serve` still stops a
pod before it serves (and after the image pull) in two places:

- **api_server**: ``setup_server`` runs ``validate_api_server_args`` before binding the
  port: with ``--enable-auto-tool-choice`` the ``--tool-call-parser`` must be a registered
  parser;
- **engine**: ``create_engine_config`` builds every config class (``SchedulerConfig``,
  ``CacheConfig``, ``ModelConfig``, ...). Their pydantic fields refuse values of the wrong
  type or out of range (``--max-num-seqs -5``: "Input should be greater than or equal to
  1"; ``--hf-overrides -1``: "Input should be a valid dictionary"), and vLLM's own checks
  refuse unknown names (a quantization method, a KV connector) and some combinations.

Everything here is data recorded from each release by ``hack/vllm-flags/engine_stage.py``
(run on a config-only stand-in model): each option's config field schema
(``Option.engine_field``), the registered names (``FlagTable.registries``) and, for the
checks written below, a probe form whose recorded verdict says whether the release makes
the check at all and gives vLLM's own words. A check whose probe the release did not
refuse at that stage is not made. What depends on the model (a ``--max-model-len`` beyond
its context, a quantization method its checkpoint lacks, a reasoning parser's tokenizer)
is recorded as such and left to vLLM. Tables recorded without these stages get none.
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vllm_operator.engine.config_schema import SchemaMismatch, check_bounds, check_value
from vllm_operator.engine.flagdata import FlagTable

_BRACKET = re.compile(r"\s*\[type=[^\]]*\]")
_HEADER = re.compile(r"^\w+: \d+ validation errors? for (\w+)$")


@dataclass(frozen=True)
class Rule:
    """One check of vLLM's own code, made where ``probe`` is refused at ``stage``.

    ``applies`` gets the parsed values (by dest) and the release's registries; ``subs``
    turns the probe's recorded message into this command line's: (text in the probe's
    message, dest whose value replaces it, format).
    """

    probe: tuple[str, ...]
    stage: str  # api_server | engine
    applies: Callable[[dict[str, Any], dict[str, frozenset[str]]], bool]
    subs: tuple[tuple[str, str, str], ...]
    source: str


def _unknown(
    dest: str, registry: str
) -> Callable[[dict[str, Any], dict[str, frozenset[str]]], bool]:
    def applies(values: dict[str, Any], names: dict[str, frozenset[str]]) -> bool:
        value = values.get(dest)
        return isinstance(value, str) and registry in names and value not in names[registry]

    return applies


def _tool_parser(values: dict[str, Any], names: dict[str, frozenset[str]]) -> bool:
    parser = values.get("tool_call_parser")  # unset: serve's validate refused it already
    known = names.get("tool_call_parser")
    on = bool(values.get("enable_auto_tool_choice"))
    return on and known is not None and parser is not None and parser not in known


def _lora_slots(values: dict[str, Any], names: dict[str, frozenset[str]]) -> bool:
    loras = values.get("max_loras")
    return bool(values.get("enable_lora")) and isinstance(loras, int) and loras < 1


def _kv_connector(values: dict[str, Any], names: dict[str, frozenset[str]]) -> bool:
    config = values.get("kv_transfer_config")
    if not isinstance(config, dict) or "kv_connector" not in names:
        return False
    connector = config.get("kv_connector")
    if config.get("kv_connector_module_path"):
        return False  # an external module: vLLM imports it, nothing to check here
    return isinstance(connector, str) and connector not in names["kv_connector"]


def _batched_below_seqs(values: dict[str, Any], names: dict[str, frozenset[str]]) -> bool:
    """Below ``--max-num-seqs``, or below 1 (under any default of it) when that is unset."""
    batched, seqs = values.get("max_num_batched_tokens"), values.get("max_num_seqs")
    if not isinstance(batched, int) or isinstance(batched, bool):
        return False
    if isinstance(seqs, int) and not isinstance(seqs, bool):
        return seqs >= 1 and batched < seqs
    return seqs is None and batched < 1


def _set(dest: str) -> Callable[[dict[str, Any], dict[str, frozenset[str]]], bool]:
    def applies(values: dict[str, Any], names: dict[str, frozenset[str]]) -> bool:
        return values.get(dest) not in (None, "", False)

    return applies


RULES: tuple[Rule, ...] = (
    Rule(
        ("--enable-auto-tool-choice", "--tool-call-parser", "bogus"),
        "api_server",
        _tool_parser,
        (("bogus", "tool_call_parser", "{}"),),
        "validate_api_server_args (vllm/entrypoints/openai/api_server.py)",
    ),
    Rule(
        ("--reasoning-parser", "bogus"),
        "engine",
        _unknown("reasoning_parser", "reasoning_parser"),
        (("bogus", "reasoning_parser", "{}"),),
        "StructuredOutputsConfig's check of the reasoning parser (VllmConfig)",
    ),
    Rule(
        ("--kv-cache-dtype", "bogus"),
        "engine",
        _unknown("kv_cache_dtype", "kv_cache_dtype"),
        (("'bogus'", "kv_cache_dtype", "{!r}"),),
        "CacheConfig's check of cache_dtype (0.33: no argparse choices)",
    ),
    Rule(
        ("--quantization", "bogus"),
        "engine",
        _unknown("quantization", "quantization"),
        (("method: bogus", "quantization", "method: {}"),),
        "ModelConfig._verify_quantization",
    ),
    Rule(
        ("--kv-transfer-config", '{"kv_connector": "X", "kv_role": "kv_both"}'),
        "engine",
        _kv_connector,
        ((": X", "kv_transfer_config", ": {}"),),
        "KVConnectorFactory (vllm/distributed/kv_transfer/kv_connector/factory.py)",
    ),
    Rule(
        ("--max-num-batched-tokens", "8", "--max-num-seqs", "16"),
        "engine",
        _batched_below_seqs,
        (("(8)", "max_num_batched_tokens", "({})"), ("(16)", "max_num_seqs", "({})")),
        "SchedulerConfig's check of max_num_batched_tokens against max_num_seqs",
    ),
    Rule(
        ("--max-num-batched-tokens", "0"),
        "engine",
        _batched_below_seqs,
        (("(0)", "max_num_batched_tokens", "({})"),),
        "SchedulerConfig's check of max_num_batched_tokens against the default max_num_seqs",
    ),
    Rule(
        ("--enable-lora", "--max-loras", "0"),
        "engine",
        _lora_slots,
        (("(0)", "max_loras", "({})"),),
        "LoRAConfig: max_loras must be >= 1",
    ),
    Rule(
        ("--preemption-mode", "swap"),
        "engine",
        _set("preemption_mode"),
        (),
        "EngineArgs: V1 does not support --preemption-mode (0.10.2)",
    ),
    Rule(
        ("--logits-processor-pattern", "x"),
        "engine",
        _set("logits_processor_pattern"),
        (),
        "EngineArgs: V1 does not support --logits-processor-pattern (0.11.0)",
    ),
)


@dataclass(frozen=True)
class Found:
    """vLLM stops at ``stage`` for ``reason`` (its own words, this command line's values)."""

    stage: str
    reason: str
    dest: str = ""  # the option whose value the check read, where it is one


def concise(message: str) -> str:
    """A recorded vLLM message on one line: pydantic's header, its errors, no ``[type=...]``."""
    lines = [_BRACKET.sub("", ln).strip() for ln in message.splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return message
    head = _HEADER.match(lines[0])
    if head is None:
        return " ".join(lines)
    rest = " ".join(lines[1:]).replace("Value error, ", "")
    return f"{lines[0].split(': ', 1)[1]}: {rest}"


def _stage_message(table: FlagTable, rule: Rule) -> str | None:
    form = table.form(rule.probe)
    if form is None:
        return None
    after = form.record.get("after") or {}
    if after.get("verdict") != "refused" or after.get("stage") != rule.stage:
        return None
    return str(after.get("message", ""))


def _substitute(message: str, rule: Rule, values: dict[str, Any]) -> str:
    for seen, dest, fmt in rule.subs:
        value = values.get(dest)
        if dest == "kv_transfer_config" and isinstance(value, dict):
            value = value.get("kv_connector")
        message = message.replace(seen, fmt.format(value), 1)
    return message


# Config classes create_engine_config builds only when a switch is on: their fields are
# not checked otherwise (``--max-loras 0`` without ``--enable-lora`` starts).
_BUILT_WHEN = {"LoRAConfig": "enable_lora"}


def _field_errors(table: FlagTable, values: dict[str, Any]) -> list[Found]:
    found = []
    for dest, value in values.items():
        option = table.by_dest.get(dest)
        field = option.engine_field if option is not None else None
        if field is None or value is None:
            continue
        switch = _BUILT_WHEN.get(str(field.get("class")))
        if switch is not None and not values.get(switch):
            continue
        try:
            if field.get("converted_first"):
                # vLLM's validator converts first (None -> a default, ...): only a number's
                # bounds are checked, which the converted value still meets or fails
                check_bounds(field["schema"], value, dest)
            else:
                check_value(field["schema"], value, dest)
        except SchemaMismatch as e:
            found.append(Found("engine", f"1 validation error for {field['class']}: {e}"))
    return found


_VALID_VALUES = re.compile(r"Valid values are: (\[[^\]]*\])")
_CHOSE_FROM = re.compile(r"\(chose from \{ ?([^}]*?) ?\}\)")


def _registries(table: FlagTable) -> dict[str, frozenset[str]]:
    """The recorded registries; where the tool call parsers were not listed (their
    manager lived elsewhere), the names vLLM itself listed refusing the probe."""
    names = dict(table.registries)
    for key, rule in (("tool_call_parser", RULES[0]), ("reasoning_parser", RULES[1])):
        if key in names:
            continue
        m = _CHOSE_FROM.search(_probe_message(table, rule))
        if m is not None:
            names[key] = frozenset(n for n in m.group(1).split(",") if n)
    m = _VALID_VALUES.search(_probe_message(table, RULES[2]))
    if m is not None:
        with contextlib.suppress(ValueError, SyntaxError):
            listed = ast.literal_eval(m.group(1))
            if isinstance(listed, list):
                names["kv_cache_dtype"] = frozenset(str(n) for n in listed)
    return names


def _probe_message(table: FlagTable, rule: Rule) -> str:
    form = table.form(rule.probe)
    after = (form.record.get("after") or {}) if form is not None else {}
    return str(after.get("message", ""))


def refusals(table: FlagTable, values: dict[str, Any]) -> list[Found]:
    """What the API server's checks and the engine config refuse in ``values`` (the last
    value of each option the command line set, by dest)."""
    if not table.records_engine:
        return []
    found: list[Found] = []
    names = _registries(table)
    for rule in RULES:
        message = _stage_message(table, rule)
        if message is not None and rule.applies(values, names):
            dest = rule.subs[0][1] if rule.subs else ""
            found.append(Found(rule.stage, concise(_substitute(message, rule, values)), dest))
    found += _field_errors(table, values)
    return found
