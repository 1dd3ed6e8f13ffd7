"""The two checks `vllm serve` runs after ``validate`` and before it touches a GPU.

Imported by ``after_parse.py`` inside the release's environment. After argparse and the
serve subcommand's ``validate``, ``vllm serve`` (``ServeSubcommand.cmd`` ->
``run_server``):

1. **api_server**: ``setup_server`` imports the tool/reasoning parser plugins named on
   the command line and calls ``validate_api_server_args`` (the tool call parser must be a
   registered one when ``--enable-auto-tool-choice`` is set, the reasoning parser must be
   registered), before it binds the port;
2. **engine**: ``AsyncEngineArgs.from_cli_args(args).create_engine_config()`` builds every
   config class (``ModelConfig``, ``CacheConfig``, ``SchedulerConfig``, ...) with their
   pydantic field checks and vLLM's own cross-checks. It needs the model's
   ``config.json`` only: a config-only stand-in model (``STANDIN``, written into the
   working directory, so messages that name it are the same on every run) is enough.

Where a refusal depends on the model (a ``--max-model-len`` beyond the model's context),
the form is re-run on a second stand-in with a much larger model; a form refused on one
and accepted on the other is recorded as ``model`` (left to vLLM, which sees the real
model). The platform's own adjustments are switched off as in ``after_parse`` (the CPU
platform's would refuse GPU-only settings; CUDA's cannot run here).
"""

# ruff: noqa: PLC0415
from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
from pathlib import Path
from typing import Any

STANDIN = "standin-model"
LARGE = "standin-model-large"

_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
}
_LARGE = {
    **_CONFIG,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "num_hidden_layers": 80,
    "max_position_embeddings": 1048576,
}


def write_standins(where: Path) -> None:
    """The config-only models (no weights, no tokenizer: create_engine_config reads only
    ``config.json``)."""
    for name, config in ((STANDIN, _CONFIG), (LARGE, _LARGE)):
        (where / name).mkdir(exist_ok=True)
        (where / name / "config.json").write_text(json.dumps(config, sort_keys=True))


def api_server(ns: argparse.Namespace, message: Any) -> dict[str, Any] | None:
    """vLLM's ``setup_server`` checks on ``ns``: None when they pass, else the refusal."""
    try:
        from vllm.entrypoints.openai import api_server as server
    except Exception as exc:  # the module itself does not import here: nothing checked
        return {"verdict": "skipped", "message": message(exc)}
    args = copy.deepcopy(ns)
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    try:
        for attr, manager in (
            ("tool_parser_plugin", "ToolParserManager"),
            ("reasoning_parser_plugin", "ReasoningParserManager"),
        ):
            plugin = getattr(args, attr, None)
            found = getattr(server, manager, None)
            if plugin and len(plugin) > 3 and found is not None:
                importer = getattr(found, "import_tool_parser", None) or getattr(
                    found, "import_reasoning_parser", None
                )
                if importer is not None:
                    importer(plugin)
        check = getattr(server, "validate_api_server_args", None)
        if check is not None:
            check(args)
    except Exception as exc:
        return {"verdict": "refused", "stage": "api_server", "message": message(exc)}
    return None


@contextlib.contextmanager
def _fresh_env() -> Any:
    """Each form as in a fresh process: 0.10's create_engine_config writes VLLM_USE_V1 into
    the environment (``envs.set_vllm_use_v1``), and a set VLLM_USE_V1 turns its fallback to
    V0 for a V1-unsupported flag into a refusal."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _engine_once(ns: argparse.Namespace, model: str, hooks: Any) -> str | None:
    from vllm.engine.arg_utils import AsyncEngineArgs

    args = copy.deepcopy(ns)
    args.model = model
    if hasattr(args, "model_tag"):
        args.model_tag = model
    sink = io.StringIO()
    with hooks(), contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink), _fresh_env():
        engine_args = AsyncEngineArgs.from_cli_args(args)
        try:
            from vllm.usage.usage_lib import UsageContext

            engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
        except TypeError as exc:
            if "usage_context" not in str(exc):
                raise
            engine_args.create_engine_config()
    return None


# Refusals that come from what the recording cannot have, by what they depend on: the
# model (the stand-in has no tokenizer files, no quantization config, a context of its
# own), the image's files (a chat template or plugin path), the GPU (the CPU platform
# answers is_kv_cache_dtype_supported for itself).
DEPENDS_ON = (
    ("model", "tokenizer"),
    ("model", "Cannot find the config file for"),
    ("model", "derived max_model_len"),
    ("files", "appears path-like, but doesn't exist"),
    ("files", "No such file or directory"),
    ("platform", "is not supported with --kv-cache-dtype"),
)


def left_to_vllm(refusal: dict[str, Any]) -> dict[str, Any] | None:
    """``{"stage", "depends_on", "message"}`` where a refusal depends on more than the
    command line (vLLM decides it on the real model, image and GPU); None otherwise."""
    depends = refusal.get("depends_on")
    if refusal.get("verdict") == "skipped":
        depends = "model"
    for what, marker in DEPENDS_ON:
        if depends is None and marker in refusal.get("message", ""):
            depends = what
    if depends is None:
        return None
    stage = refusal.get("stage", "engine")
    return {"stage": stage, "depends_on": depends, "message": refusal.get("message", "")}


def engine(ns: argparse.Namespace, message: Any, hooks: Any) -> dict[str, Any] | None:
    """``create_engine_config`` on the stand-in model: None when it passes, else the
    refusal (with ``depends_on`` "model" where the larger stand-in passes)."""
    if getattr(ns, "model_tag", "m") not in ("m", None):
        return {"verdict": "skipped", "stage": "engine", "message": "the form names another model"}
    try:
        _engine_once(ns, STANDIN, hooks)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        refusal = {"verdict": "refused", "stage": "engine", "message": message(exc)}
        if left_to_vllm(refusal) is not None:
            return refusal
        try:
            _engine_once(ns, LARGE, hooks)
        except BaseException as other:
            if isinstance(other, KeyboardInterrupt):
                raise
            return refusal
        return {**refusal, "depends_on": "model"}
    return None


def offline() -> None:
    """No hub look-ups: the stand-ins are local directories."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def registries() -> dict[str, list[str]]:
    """The names vLLM checks values against after argparse: quantization methods, KV
    connectors, tool call and reasoning parsers (empty where the release has none)."""
    out: dict[str, list[str]] = {}
    with contextlib.suppress(Exception):
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

        out["quantization"] = sorted(QUANTIZATION_METHODS)
    with contextlib.suppress(Exception):
        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

        out["kv_connector"] = sorted(KVConnectorFactory._registry)
    with contextlib.suppress(Exception):
        from vllm.entrypoints.openai import api_server as server

        for key, manager in (
            ("tool_call_parser", "ToolParserManager"),
            ("reasoning_parser", "ReasoningParserManager"),
        ):
            found = getattr(server, manager, None)
            if found is not None:
                out[key] = sorted(found.list_registered())
    return out


def _config_classes() -> list[Any]:
    import dataclasses
    import typing

    from vllm import config as vc

    classes: dict[str, Any] = {}
    vllm_config = vc.VllmConfig
    try:
        hints = typing.get_type_hints(vllm_config, include_extras=False)
    except Exception:  # unresolvable forward references: the annotations as written
        hints = {f.name: f.type for f in dataclasses.fields(vllm_config)}
    for f in dataclasses.fields(vllm_config):
        for cls in (hints.get(f.name), *typing.get_args(hints.get(f.name))):
            if isinstance(cls, type) and dataclasses.is_dataclass(cls):
                classes[cls.__name__] = cls
    extra = getattr(vc, "MultiModalConfig", None)
    if extra is not None:
        classes[extra.__name__] = extra
    return [classes[k] for k in sorted(classes)]


# EngineArgs fields that reach a config class under another name (create_engine_config:
# ``CacheConfig(cache_dtype=self.kv_cache_dtype, ...)``).
_FIELD_OF = {"kv_cache_dtype": "cache_dtype"}


def engine_fields(
    options: list[dict[str, Any]], strip: Any, custom_fields: Any, message: Any
) -> None:
    """``engine_field`` on every option whose dest is a field of exactly one config class
    ``create_engine_config`` builds: that field's pydantic JSON schema (constraints such as
    ``minimum`` kept) and whether vLLM's own validators convert it first."""
    from pydantic import TypeAdapter
    from pydantic.json_schema import GenerateJsonSchema

    class _Lenient(GenerateJsonSchema):
        """Types without a JSON schema: a callable is never a command-line value; any
        other is left open (never a refusal)."""

        def callable_schema(self, schema: Any) -> Any:
            return {"type": "callable"}

        def handle_invalid_for_json_schema(self, schema: Any, error_info: Any) -> Any:
            return {}

    found: dict[str, list[dict[str, Any]]] = {}
    for cls in _config_classes():
        try:
            schema = TypeAdapter(cls).json_schema(schema_generator=_Lenient)
        except Exception:
            continue
        custom = custom_fields(cls)
        defs = schema.get("$defs", {})
        for name, prop in (schema.get("properties") or {}).items():
            found.setdefault(name, []).append(
                {
                    "class": cls.__name__,
                    "schema": strip(_with_defs(prop, defs)),
                    "converted_first": name in custom or "*" in custom,
                }
            )
    for row in options:
        rows = found.get(_FIELD_OF.get(row["dest"], row["dest"]), [])
        if len({json.dumps(r, sort_keys=True) for r in rows}) == 1:
            row["engine_field"] = rows[0]


def _with_defs(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``prop`` with the ``$defs`` it refers to (transitively), none where it refers none."""
    wanted: dict[str, Any] = {}
    todo = [prop]
    while todo:
        text = json.dumps(todo.pop())
        for name, schema in defs.items():
            if f'"#/$defs/{name}"' in text and name not in wanted:
                wanted[name] = schema
                todo.append(schema)
    return {"$defs": dict(sorted(wanted.items())), **prop} if wanted else prop
