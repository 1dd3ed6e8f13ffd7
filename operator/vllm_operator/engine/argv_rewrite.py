"""Stage 1 of reading a `vllm serve` command line: vLLM's rewrite before argparse.

vLLM's ``FlexibleArgumentParser.parse_args`` rewrites the argument list before Python's
argparse sees it (``vllm/utils/__init__.py`` in 0.10.2-0.11.2,
``vllm/utils/argparse_utils.py`` from 0.12.0; read in the 0.10.2, 0.12.0 and 0.33.0
wheels): ``--foo_bar`` -> ``--foo-bar`` (the name only, up to the first ``.``), ``-O3``/
``-O 3`` -> the optimization level (0.12+) or the compilation config's level/mode (before),
``-cc.mode=0`` and other dotted keys -> one JSON value appended at the end, ``--model M``
moved to the positional (or refused, 0.10-0.11.0). Its per-release differences are read
from the rewrites the extractor recorded (``FlagTable.rewrite_of``), not from version
numbers. Kept apart from ``argv`` (stage 2, argparse) because the two are held to
different recordings: this one to ``rewrites``, that one to the forms' verdicts.
"""

from __future__ import annotations

import json
import re
from typing import Any

from vllm_operator.engine.argv_values import TypeMessage, human_readable_int
from vllm_operator.engine.flagdata import FlagTable
from vllm_operator.errors import VLLMOperatorError

_NAME_PART = re.compile(r"(?<=--)[^.]*")
_MAX_TOKENS = 4096  # a spec's extraArgs are bounded; this bounds any caller


class ConfigFile(VLLMOperatorError, ValueError):
    """``--config FILE``: vLLM reads more flags from the file before argparse."""


def _o_style(table: FlagTable) -> str:
    """How this release reads ``-O``: "level"/"mode" (a compilation-config key) or "optlevel"
    (``--optimization-level``, 0.12+); "optlevel-cc" when ``-O.x`` still meant ``-cc.x``."""
    to = table.rewrite_of(("-O3",))
    if isinstance(to, tuple) and to[:1] == ("--optimization-level",):
        dotted = table.rewrite_of(("-O.level=3",))
        return "optlevel-cc" if isinstance(dotted, tuple) and dotted[:1] == ("-cc",) else "optlevel"
    if isinstance(to, tuple) and len(to) == 2 and '"mode"' in to[1]:
        return "mode"
    return "level"


def _model_style(table: FlagTable) -> str:
    """ "refuse" (0.10-0.11.0 raise ValueError on ``--model``) or "move" (later)."""
    to = table.rewrite_of(("--model", "m2"))
    return "refuse" if isinstance(to, str) else "move"


def dotted_value(text: str, suffixes: bool = False) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        if suffixes:  # 0.22+: "-cc.max_cudagraph_capture_size=1k" is 1000
            try:
                return human_readable_int(text)
            except (ValueError, TypeMessage):
                return text
        return text


def dotted_suffixes(table: FlagTable) -> bool:
    """Whether the release reads ``1k`` in a dotted value as 1000 (recorded rewrite)."""
    to = table.rewrite_of(("-cc.a=1k",))
    if to is None:  # not probed when the table was recorded: read leniently
        return True
    return isinstance(to, tuple) and to == ("-cc", '{"a": 1000}')


def _merge(original: dict[str, Any], update: dict[str, Any]) -> None:
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(original.get(k), dict):
            _merge(original[k], v)
        elif isinstance(v, list) and isinstance(original.get(k), list):
            original[k] += v
        else:
            original[k] = v


def rewrite(table: FlagTable, args: list[str]) -> tuple[list[str], list[int | None]]:
    """vLLM's pre-argparse rewrite of ``args`` (everything after ``serve``).

    Returns the rewritten list and, for each item, the index in ``args`` it came from.
    Raises ``ValueError`` where vLLM raises one (``--model`` on 0.10/0.11.0).
    """
    _refuse(table, args)
    style = _o_style(table)
    args, origin = _move_model(table, args)
    out: list[str] = []
    src: list[int | None] = []
    for i, arg in enumerate(args):
        following = args[i + 1] if i + 1 < len(args) else None
        items = [_dash_name(arg)] if arg.startswith("--") else _o_option(arg, following, style)
        out += items
        src += [origin[i]] * len(items)
    return _fold_dotted(table, out, src)


def _refuse(table: FlagTable, args: list[str]) -> None:
    """What vLLM (or this reading of it) refuses before any rewrite: ``--config FILE``
    (flags read from a file) and, on 0.10-0.11.0, ``--model``."""
    if len(args) > _MAX_TOKENS:
        raise ValueError(f"more than {_MAX_TOKENS} arguments")
    if "--config" in args and "config" in table.by_dest:
        raise ConfigFile("--config FILE: vLLM reads flags from the file before argparse")
    if args and any(a == "--model" for a in args) and _model_style(table) == "refuse":
        raise ValueError(
            "With `vllm serve`, you should provide the model as a positional argument or in "
            "a config file instead of via the `--model` option."
        )


def _move_model(table: FlagTable, args: list[str]) -> tuple[list[str], list[int | None]]:
    """Later releases: the first ``--model M`` (or ``--model=M``) becomes the positional
    model, moved to the front. Returns the list and each item's index in ``args``."""
    origin: list[int | None] = list(range(len(args)))
    if _model_style(table) != "move":
        return args, origin
    for i, a in enumerate(args):
        if a == "--model" or a.startswith("--model="):
            if a == "--model":
                if i + 1 >= len(args):
                    raise IndexError("list index out of range")
                tag, rest = args[i + 1], i + 2
            else:
                tag, rest = a.removeprefix("--model="), i + 1
            return [tag, *args[:i], *args[rest:]], [i, *origin[:i], *origin[rest:]]
    return args, origin


def _dash_name(arg: str) -> str:
    """``--foo_bar`` -> ``--foo-bar``: the name only, up to the first ``.`` or ``=``."""
    if "=" in arg:
        key, value = arg.split("=", 1)
        return _NAME_PART.sub(lambda m: m.group(0).replace("_", "-"), key, 1) + "=" + value
    return _NAME_PART.sub(lambda m: m.group(0).replace("_", "-"), arg, 1)


def _o_option(arg: str, following: str | None, style: str) -> list[str]:
    """``-O3``, ``-O=3`` and ``-O 3`` -> the optimization level (``style`` "optlevel*") or
    the compilation config's level/mode; "optlevel-cc": ``-O.x`` -> ``-cc.x``. Any other
    short token stays as written."""
    if arg.startswith("-O") and arg != "-O" and (style == "optlevel" or arg[2] != "."):
        level = arg[3:] if arg[2] == "=" else arg[2:]
        if style in ("optlevel", "optlevel-cc"):
            return ["--optimization-level", level]
        return [f"-O.{style}={level}"]
    if arg == "-O" and following in {"0", "1", "2", "3"}:
        return ["--optimization-level" if style.startswith("optlevel") else f"-O.{style}"]
    if style == "optlevel-cc" and arg.startswith("-O."):
        return [arg.replace("-O", "-cc", 1)]
    return [arg]


def _fold_dotted(
    table: FlagTable, out: list[str], src: list[int | None]
) -> tuple[list[str], list[int | None]]:
    """Dotted keys (-cc.mode=0, --hf-overrides.a.b 1) become one JSON value per option,
    appended at the end; ``key+`` takes a comma-separated list."""
    suffixes = dotted_suffixes(table)
    delete: set[int] = set()
    merged: dict[str, dict[str, Any]] = {}
    merged_src: dict[str, int | None] = {}
    for i, item in enumerate(out):
        if i in delete:
            continue
        if item.startswith("-") and "." in item:
            arg = item
            if "=" in arg:
                arg, value_str = arg.split("=", 1)
                if "." not in arg:
                    continue
            else:
                if i + 1 >= len(out):
                    raise IndexError("list index out of range")
                value_str = out[i + 1]
                delete.add(i + 1)
            if arg.endswith("+"):
                arg = arg[:-1]
                value_str = json.dumps(list(value_str.split(",")))
            key, *keys = arg.split(".")
            nested: Any = dotted_value(value_str, suffixes)
            for k in reversed(keys):
                nested = {k: nested}
            _merge(merged.setdefault(key, {}), nested)
            merged_src.setdefault(key, src[i])
            delete.add(i)
    final = [a for i, a in enumerate(out) if i not in delete]
    final_src = [s for i, s in enumerate(src) if i not in delete]
    for name, merged_value in merged.items():
        final += [name, json.dumps(merged_value)]
        final_src += [merged_src[name], merged_src[name]]
    return final, final_src
