"""What a release's `vllm serve` does after argparse, recorded from its own code.

Imported by ``dump_parser.py`` inside the release's environment (CPU platform already
forced, parser already built). argparse is not the last word on a command line:

- ``vllm.entrypoints.cli.main.main()`` calls the serve subcommand's ``validate(args)``
  right after ``parse_args`` (``--enable-log-outputs`` without ``--enable-log-requests``,
  ``--enable-auto-tool-choice`` without ``--tool-call-parser`` raise there);
- ``EngineArgs`` keeps ``--optimization-level`` as the string it was given, and
  ``VllmConfig`` (a pydantic dataclass) converts it; the compilation config's ``mode`` is
  converted by its own validator (enum names, any case) and pydantic's lax rules;
  ``VllmConfig.__post_init__`` then derives the compilation mode from the optimization level
  when the config leaves it unset.

:func:`with_after` adds to each accepted form what happens there (``after``): refused (the
stage and vLLM's message) or ok with whether the engine runs eager. The ``VllmConfig`` is
built from the compilation settings alone, the way ``EngineArgs.create_engine_config``
passes them (a deep copy of the compilation config, the optimization level, the
performance mode); a model cannot be loaded here. The platform's own adjustments are
switched off while it is built: the CPU platform rewrites the compilation mode, and CUDA's
``check_and_update_config`` does not touch ``mode``/``level`` in any recorded release (read
in ``vllm/platforms/cuda.py``). ``--enforce-eager`` lives on the model config, which is not
built: it counts as eager, as ``VllmConfig.__post_init__`` makes it (mode NONE from 0.12,
level NO_COMPILATION before). In 0.10/0.11, where the level is unset, the default needs a
model (PIECEWISE under V1): recorded as not eager.

:func:`conversions` runs vLLM's conversion of a corpus of optimization levels and
compilation modes (``forms.CORPUS``) and :func:`suffix_probes` its ``k``/``m``/``g``
expansion inside JSON values (0.22+), so the policy can be held to them value by value.
:func:`record_schemas` adds each JSON-valued option's dataclass schema (pydantic's JSON
schema, descriptions dropped) and the fields vLLM validates with its own code.
"""

# ruff: noqa: PLC0415
from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import io
import json
import re
from collections.abc import Callable
from typing import Any

import engine_stage

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_DROP = {"description", "title", "default", "examples"}


def _message(exc: BaseException) -> str:
    text = _ADDRESS.sub("", f"{type(exc).__name__}: {exc}")
    lines = [ln for ln in text.splitlines() if "errors.pydantic.dev" not in ln]
    return "\n".join(lines)[:600]


def _no_platform_hooks() -> contextlib.AbstractContextManager[None]:
    from vllm import platforms

    cls = type(platforms._current_platform)  # type: ignore[attr-defined]

    @contextlib.contextmanager
    def patched() -> Any:
        saved = {n: cls.__dict__.get(n) for n in ("check_and_update_config",
                                                  "apply_config_platform_defaults")}  # fmt: skip
        for name in saved:
            setattr(cls, name, classmethod(lambda c, config: None))
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    delattr(cls, name)
                else:
                    setattr(cls, name, value)

    return patched()


def _serve_validate(ns: argparse.Namespace) -> None:
    from vllm.entrypoints.cli import serve

    for cmd in serve.cmd_init():
        if cmd.name == "serve":
            cmd.validate(ns)


def _vllm_config_fields() -> set[str]:
    from vllm.config import VllmConfig

    return {f.name for f in dataclasses.fields(VllmConfig)}


def _build(compilation_config: Any, optimization_level: Any, performance_mode: Any = None) -> Any:
    """``VllmConfig`` from the compilation settings, as create_engine_config passes them."""
    from vllm.config import VllmConfig

    kwargs: dict[str, Any] = {"compilation_config": copy.deepcopy(compilation_config)}
    fields = _vllm_config_fields()
    if "optimization_level" in fields and optimization_level is not None:
        kwargs["optimization_level"] = optimization_level
    if "performance_mode" in fields and performance_mode is not None:
        kwargs["performance_mode"] = performance_mode
    with _no_platform_hooks():
        return VllmConfig(**kwargs)


def _mode_of(cc: Any) -> int | None:
    for key in ("mode", "level"):
        value = getattr(cc, key, None)
        if value is not None:
            return int(value)
    return None


def _after(ns: argparse.Namespace) -> dict[str, Any]:
    """The first stage that refuses ``ns`` (validate, api_server, config, engine), or ok
    with eager or not; a refusal that depends on what the stand-in cannot have (the
    model, the image's files, a GPU) is ``left_to_vllm`` and stops the stages after it."""
    left: dict[str, Any] | None = None
    try:
        _serve_validate(ns)
    except Exception as exc:
        refusal = {"verdict": "refused", "stage": "validate", "message": _message(exc)}
        left = engine_stage.left_to_vllm(refusal)
        if left is None:
            return refusal
    if left is None:
        refused = engine_stage.api_server(ns, _message)
        if refused is not None and refused["verdict"] == "refused":
            left = engine_stage.left_to_vllm(refused)
            if left is None:
                return refused
    verdict = _config_stage(ns)
    if verdict["verdict"] != "ok":
        return verdict
    if left is None:
        found = engine_stage.engine(ns, _message, _no_platform_hooks)
        if found is None:
            return verdict
        left = engine_stage.left_to_vllm(found)
        if left is None:
            return found
    return {**verdict, "left_to_vllm": left}


def _config_stage(ns: argparse.Namespace) -> dict[str, Any]:
    """The compilation settings alone through ``VllmConfig``: refused, or eager or not."""
    from vllm.engine.arg_utils import EngineArgs

    local = copy.copy(ns)
    local.model = engine_stage.STANDIN  # offline: the default model would be looked up
    try:
        engine_args = EngineArgs.from_cli_args(local)
        cc = engine_args.compilation_config
        explicit = _mode_of(cc) is not None
        config = _build(
            cc,
            getattr(engine_args, "optimization_level", None),
            getattr(engine_args, "performance_mode", None),
        )
    except Exception as exc:
        return {"verdict": "refused", "stage": "config", "message": _message(exc)}
    mode = _mode_of(config.compilation_config)
    if not explicit and "optimization_level" not in _vllm_config_fields():
        mode = None  # 0.10/0.11: the default needs the model (compiled under V1)
    return {
        "verdict": "ok",
        "compilation_mode": mode,
        "eager": bool(getattr(ns, "enforce_eager", False)) or mode == 0,
    }


def with_after(
    top: argparse.ArgumentParser, argv: list[str], verdict: dict[str, Any]
) -> dict[str, Any]:
    """The form's record, with ``after`` when argparse accepted it."""
    row = {"argv": argv, **verdict}
    if verdict["verdict"] != "accepted":
        return row
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        ns = top.parse_args(["serve", "m", *argv])
        row["after"] = _after(ns)
    return row


def _converted(fn: Callable[[], Any]) -> Any:
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            value = fn()
    except Exception as exc:
        first = _message(exc).splitlines()
        return {"error": " / ".join(first[1:3]).strip() if len(first) > 1 else first[0]}
    return None if value is None else int(value)


def conversions(corpus: dict[str, list[Any]]) -> dict[str, Any]:
    """vLLM's reading of each corpus value: the integer it becomes, or its error."""
    from pydantic import TypeAdapter
    from vllm.config import CompilationConfig

    out: dict[str, Any] = {}
    if "optimization_level" in _vllm_config_fields():
        cc = CompilationConfig()
        out["optimization_level"] = [
            [text, _converted(lambda t=text: _build(cc, t).optimization_level)]
            for text in corpus["optimization_level"]
        ]
    adapter = TypeAdapter(CompilationConfig)
    for key in ("mode", "level"):
        out[f"compilation_{key}"] = [
            [
                value,
                _converted(
                    lambda v=value, k=key: _mode_of(adapter.validate_json(json.dumps({k: v})))
                ),
            ]
            for value in corpus["compilation_mode"]
        ]
    return out


def suffix_probes(corpus: dict[str, list[Any]]) -> list[list[str]]:
    """``[json_in, json_out]`` through vLLM's ``_expand_json_human_readable_numbers``;
    empty where the release has no such expansion."""
    from vllm.engine import arg_utils

    expand = getattr(arg_utils, "_expand_json_human_readable_numbers", None)
    if expand is None:
        return []
    out = []
    for text in corpus["json_suffixes"]:
        try:
            out.append([text, expand(text)])
        except Exception as exc:
            out.append([text, _message(exc).splitlines()[0]])
    return out


def _strip(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip(v) for k, v in schema.items() if k not in _DROP}
    if isinstance(schema, list):
        return [_strip(v) for v in schema]
    return schema


def _custom_fields(cls: Any) -> dict[str, list[str]]:
    """Fields whose value vLLM's own validators see (field -> the validators' modes;
    "*": a model validator that sees the whole input first)."""
    decorators = getattr(cls, "__pydantic_decorators__", None)
    if decorators is None:
        return {}
    found: dict[str, set[str]] = {}
    for dec in decorators.field_validators.values():
        if dec.info.mode in ("before", "wrap", "plain"):
            for name in dec.info.fields:
                found.setdefault(name, set()).add(dec.info.mode)
    for dec in decorators.model_validators.values():
        if dec.info.mode in ("before", "wrap"):
            found.setdefault("*", set()).add(dec.info.mode)
    return {k: sorted(v) for k, v in sorted(found.items())}


def record_schemas(
    serve: argparse.ArgumentParser, options: list[dict[str, Any]], find_class: Callable[[Any], Any]
) -> None:
    """``config_schema`` on every option whose value is a config dataclass as JSON."""
    from pydantic import TypeAdapter

    actions = {a.dest: a for a in serve._actions}
    for row in options:
        if "parse_dataclass" not in row["type"]:
            continue
        cls = find_class(actions[row["dest"]].type)
        if cls is None:
            continue
        try:
            schema = _strip(TypeAdapter(cls).json_schema())
        except Exception as exc:
            row["config_schema"] = {"error": _message(exc).splitlines()[0]}
            continue
        row["config_schema"] = {
            "class": cls.__name__,
            "schema": schema,
            "custom": _custom_fields(cls),
        }
