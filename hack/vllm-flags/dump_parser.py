"""Run inside a Python environment where one vLLM release imports: dump its `vllm serve` parser.

Called by ``extract.py`` (not by hand): ``python dump_parser.py FORMS.json > out.json``.
It builds the parser exactly the way ``vllm.entrypoints.cli.main.main()`` does, by running
``main()`` itself with ``sys.argv = ["vllm", "serve", "m"]`` and stopping it at the moment it
calls ``parse_args`` on the finished top-level parser. Then it

- lists every option of the ``serve`` subparser (every registered spelling, value arity,
  choices, type, negative forms, deprecation),
- records how vLLM's ``FlexibleArgumentParser.parse_args`` rewrites a few probe argv lists
  before argparse sees them (underscores, ``-O``, dotted ``-cc.mode=0``),
- parses every conformance form as ``vllm serve m <form>`` through that same top-level
  parser and records the verdict: accepted (with the settings that decide eager mode and
  the destinations the form changed) or the error argparse printed and the exit status;
- for every accepted form, what vLLM does next before it loads a model (``after``): the
  serve subcommand's ``validate(args)`` that ``main()`` calls right after ``parse_args``,
  then ``EngineArgs.from_cli_args`` and a ``VllmConfig`` built from the compilation settings
  (the part of ``create_engine_config`` that decides eager mode), with the platform's own
  adjustments switched off: the verdict (refused with vLLM's message, or eager or not);
- for the compilation config and the optimization level, vLLM's conversion of a corpus of
  values (``conversions``), the config classes' field types (``config_schema``: pydantic's
  JSON schema of each JSON-valued option's dataclass, and which fields vLLM validates with
  its own code), and vLLM's ``k``/``m``/``g`` expansion inside JSON values where it exists.

The output is plain JSON on stdout; ``extract.py`` adds the release and wheel hash and
writes it sorted. Nothing here depends on a GPU: the CPU platform is forced before import.
"""

# vLLM is imported inside functions on purpose: only after the CPU platform is forced.
# ruff: noqa: PLC0415
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the engine stage's models are local stand-ins
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


# Memory addresses in reprs (``<function loads at 0x7f...>``) differ between runs.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__("captured")
        self.parser = parser


class _Rewritten(Exception):
    def __init__(self, args: list[str]) -> None:
        super().__init__("rewritten")
        self.args_seen = args


def _force_cpu_platform() -> None:
    from vllm import platforms
    from vllm.platforms.cpu import CpuPlatform

    # The CPU kernels are not needed to build a parser, and 0.17's CPU platform probes a
    # torch function (torch._C._cpu._is_avx512_supported) that newer torch builds lack.
    CpuPlatform.import_kernels = classmethod(lambda cls: None)  # type: ignore[assignment]
    platforms._current_platform = CpuPlatform()  # type: ignore[attr-defined]


def _flexible_parser_class() -> type:
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser  # type: ignore[no-redef]
    return FlexibleArgumentParser  # type: ignore[no-any-return]


def build_top_parser() -> argparse.ArgumentParser:
    """The top-level `vllm` parser, built by vLLM's own ``main()``."""
    _force_cpu_platform()
    fap = _flexible_parser_class()
    import vllm.entrypoints.cli.main as cli_main

    original = fap.parse_args

    def capture(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        raise _Captured(self)

    fap.parse_args = capture
    sys.argv = ["vllm", "serve", "m"]
    try:
        cli_main.main()
    except _Captured as done:
        return done.parser
    finally:
        fap.parse_args = original
    raise SystemExit("vllm's main() never called parse_args")


def _serve_parser(top: argparse.ArgumentParser) -> argparse.ArgumentParser:
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices["serve"]  # type: ignore[no-any-return]
    raise SystemExit("no serve subcommand")


def _describe_type(fn: Any) -> str:
    """A stable name for an argparse ``type=``: ``int``, ``optional_type(int)``, ..."""
    if fn is None:
        return ""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    inner = [
        c.cell_contents
        for c in (getattr(fn, "__closure__", None) or ())
        if callable(c.cell_contents)
    ]
    if name.startswith("_") and inner and name.lstrip("_") in ("parse_type", "optional_type"):
        return f"{name.lstrip('_')}({_describe_type(inner[0])})"
    return str(name)


def _type_repr(fn: Any) -> str:
    """``repr`` of the converter inside ``parse_type`` (it appears in vLLM's error text)."""
    for cell in getattr(fn, "__closure__", None) or ():
        if callable(cell.cell_contents):
            inner = cell.cell_contents
            deeper = _type_repr(inner)
            return deeper or _ADDRESS.sub("", repr(inner))
    return ""


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(x) for x in value]
    return str(value)


def _action_kind(action: argparse.Action) -> str:
    kinds = {
        "_StoreAction": "store",
        "_StoreTrueAction": "store_true",
        "_StoreFalseAction": "store_false",
        "_StoreConstAction": "store_const",
        "_AppendAction": "append",
        "_AppendConstAction": "append_const",
        "_CountAction": "count",
        "_HelpAction": "help",
        "_VersionAction": "version",
        "BooleanOptionalAction": "boolean_optional",
        "EnableDisableAction": "enable_disable",
    }
    return kinds.get(type(action).__name__, type(action).__name__)


def dump_options(serve: argparse.ArgumentParser) -> list[dict[str, Any]]:
    deprecated: set[argparse.Action] = set(getattr(serve, "_deprecated", set()))
    fap = _flexible_parser_class()
    deprecated |= set(getattr(fap, "_deprecated", set()) or set())
    spellings: dict[int, list[str]] = {}
    by_id: dict[int, argparse.Action] = {}
    for spelling, action in serve._option_string_actions.items():
        spellings.setdefault(id(action), []).append(spelling)
        by_id[id(action)] = action
    out = []
    for key, action in by_id.items():
        negative = getattr(action, "negative_option_strings", None)
        if negative is None and _action_kind(action) == "boolean_optional":
            negative = {s for s in spellings[key] if s.startswith("--no-")}
        row: dict[str, Any] = {
            "spellings": sorted(spellings[key]),
            "display": "/".join(action.option_strings),
            "dest": action.dest,
            "action": _action_kind(action),
            "nargs": action.nargs,
            "type": _describe_type(action.type),
            "deprecated": bool(getattr(action, "deprecated", False)) or action in deprecated,
            "hidden": action.help == argparse.SUPPRESS,
        }
        if action.choices is not None:
            row["choices"] = [_jsonable(c) for c in action.choices]
        if _type_repr(action.type):
            row["type_repr"] = _type_repr(action.type)
        if negative:
            row["negative"] = sorted(negative)
        out.append(row)
    return sorted(out, key=lambda r: r["spellings"][0])


def _rewrite(top: argparse.ArgumentParser, argv: list[str]) -> list[str] | str:
    """What vLLM's parse_args hands to argparse for ``vllm serve m <argv>``."""
    fap = _flexible_parser_class()
    base = fap.__mro__[1]
    original = base.parse_args

    def seen(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        raise _Rewritten(list(args))

    base.parse_args = seen
    try:
        fap.parse_args(top, ["serve", "m", *argv])
    except _Rewritten as done:
        return done.args_seen[2:]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        base.parse_args = original
    return "no rewrite seen"


def _compile_level(config: Any) -> Any:
    if config is None:
        return None
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return config
    for key in ("mode", "level"):
        if isinstance(config, dict) and config.get(key) is not None:
            return _jsonable(config[key])
        value = getattr(config, key, None)
        if value is not None:
            return int(value) if not isinstance(value, str) else value
    return None


def _verdict(
    top: argparse.ArgumentParser, serve: argparse.ArgumentParser, argv: list[str]
) -> dict[str, Any]:
    taken: list[str] = []
    original = serve._get_values

    def record(action: argparse.Action, strings: list[str]) -> Any:
        taken.append(action.dest)
        return original(action, strings)

    serve._get_values = record  # type: ignore[method-assign]
    err = io.StringIO()
    out = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            ns = top.parse_args(["serve", "m", *argv])
    except SystemExit as exc:
        serve._get_values = original  # type: ignore[method-assign]
        lines = [ln for ln in err.getvalue().splitlines() if ": error: " in ln]
        message = lines[0] if lines else err.getvalue().strip()[-300:]
        return {"verdict": "error", "exit": exc.code, "message": _ADDRESS.sub("", message)}
    except Exception as exc:
        serve._get_values = original  # type: ignore[method-assign]
        message = _ADDRESS.sub("", f"{type(exc).__name__}: {exc}")
        return {"verdict": "exception", "message": message.splitlines()[0][:300]}
    serve._get_values = original  # type: ignore[method-assign]
    values = vars(ns)
    return {
        "verdict": "accepted",
        "model": values.get("model_tag"),
        "set": sorted(set(taken) - {"model_tag"}),
        "enforce_eager": values.get("enforce_eager"),
        "optimization_level": _jsonable(values.get("optimization_level")),
        "compilation_level": _compile_level(values.get("compilation_config")),
    }


def _config_class(fn: Any) -> Any:
    """The dataclass a ``parse_dataclass`` converter validates against, if any."""
    if fn is None:
        return None
    for candidate in list(getattr(fn, "__defaults__", None) or ()) + [
        c.cell_contents for c in (getattr(fn, "__closure__", None) or ())
    ]:
        if isinstance(candidate, type):
            return candidate
        if callable(candidate) and candidate is not fn:
            found = _config_class(candidate)
            if found is not None:
                return found
    return None


def _config_keys(cls: Any) -> list[str]:
    import dataclasses

    if dataclasses.is_dataclass(cls):
        return sorted(f.name for f in dataclasses.fields(cls))
    fields = getattr(cls, "model_fields", None) or getattr(cls, "__pydantic_fields__", None)
    return sorted(fields) if fields else []


def probe_configs(
    top: argparse.ArgumentParser, serve: argparse.ArgumentParser, options: list[dict[str, Any]]
) -> None:
    """For options that take a config dataclass as JSON: its keys, and whether the parser
    refuses a key the dataclass does not have; for the compilation config also which
    ``mode``/``level`` values the parser accepts (they decide eager mode)."""
    actions = {a.dest: a for a in serve._actions}
    for row in options:
        action = actions[row["dest"]]
        spelling = row["spellings"][-1]
        if "parse_dataclass" in row["type"]:
            cls = _config_class(action.type)
            row["config_keys"] = _config_keys(cls) if cls is not None else []
            unknown = _verdict(top, serve, [spelling, '{"vllm_flags_no_such_key": 1}'])
            row["config_strict"] = unknown["verdict"] != "accepted"
        if row["dest"] == "compilation_config":
            values: dict[str, list[int]] = {}
            effective: dict[str, bool] = {}
            for key in ("level", "mode"):
                seen = [
                    (n, _verdict(top, serve, [spelling, json.dumps({key: n})])) for n in range(5)
                ]
                ok = [(n, v) for n, v in seen if v["verdict"] == "accepted"]
                values[key] = [n for n, _ in ok]
                effective[key] = bool(ok) and all(v["compilation_level"] == n for n, v in ok)
            row["config_values"] = values
            row["config_effective"] = effective


def main() -> None:
    # vLLM's logger writes to stdout (a config file it cannot read, for one): the JSON goes
    # to the real stdout, everything else to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    with open(sys.argv[1]) as fh:
        forms: list[list[str]] = json.load(fh)
    with open(sys.argv[2]) as fh:
        probes: list[list[str]] = json.load(fh)
    with open(sys.argv[3]) as fh:
        corpus: dict[str, list[Any]] = json.load(fh)
    import engine_stage

    engine_stage.write_standins(Path.cwd())
    top = build_top_parser()
    serve = _serve_parser(top)
    options = dump_options(serve)
    probe_configs(top, serve, options)
    import after_parse

    after_parse.record_schemas(serve, options, _config_class)
    engine_stage.engine_fields(
        options, after_parse._strip, after_parse._custom_fields, after_parse._message
    )
    result = {
        "python": ".".join(map(str, sys.version_info[:3])),
        "parser": {
            "prog": serve.prog,
            "top_prog": top.prog,
            "allow_abbrev": serve.allow_abbrev,
            "top_allow_abbrev": top.allow_abbrev,
            "prefix_chars": serve.prefix_chars,
            "class": type(serve).__name__,
            # argparse lists ambiguous matches in registration order
            "registration_order": list(serve._option_string_actions),
        },
        "positionals": [
            {"dest": a.dest, "nargs": a.nargs} for a in serve._actions if not a.option_strings
        ],
        "options": options,
        "rewrites": [{"argv": p, "to": _rewrite(top, p)} for p in probes],
        "forms": [after_parse.with_after(top, f, _verdict(top, serve, f)) for f in forms],
        "conversions": after_parse.conversions(corpus),
        "json_number_suffixes": after_parse.suffix_probes(corpus),
        "registries": engine_stage.registries(),
    }
    json.dump(result, out)
    out.flush()


if __name__ == "__main__":
    main()
