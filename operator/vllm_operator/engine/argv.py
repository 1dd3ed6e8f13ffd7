"""Reading a `vllm serve` command line the way vLLM's own parser reads it.

This is the project's only argv tokenizer: the policy, the launch plan's key flags and the
simulator all call :func:`parse`. It replays, over a release's recorded table
(``flagdata``), the two stages a real `vllm serve` goes through:

1. vLLM's ``FlexibleArgumentParser.parse_args`` rewrite: ``--foo_bar`` -> ``--foo-bar``
   (the name only, up to the first ``.``), ``-O3``/``-O 3`` -> the optimization level
   (0.12+) or the compilation config's level/mode (before), ``-cc.mode=0`` and other dotted
   keys -> one JSON value appended at the end;
2. Python's argparse (3.11, the interpreter the tables were recorded with): exact option
   strings, ``--opt=value``, abbreviations (``allow_abbrev``), value counts (``nargs``),
   converters and choices, and "unrecognized arguments" collected by the top-level parser.

Stage 1 follows ``FlexibleArgumentParser.parse_args`` as released (``vllm/utils/__init__.py``
in 0.10.2-0.11.2, ``vllm/utils/argparse_utils.py`` from 0.12.0; read in the 0.10.2, 0.12.0
and 0.33.0 wheels); its per-release differences (what ``-O`` becomes, ``--model``) are read
from the rewrites the extractor recorded, not from version numbers.

The result says what vLLM would do: accept (with every option taken and its converted
value) or exit 2 with argparse's own message. ``hack/vllm-flags`` records the real
parser's verdicts, and a test holds this module to them for every committed release.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from vllm_operator.engine.argv_values import TypeMessage, convert_named, human_readable_int
from vllm_operator.engine.flagdata import FlagTable, Option

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_NAME_PART = re.compile(r"(?<=--)[^.]*")
_MAX_TOKENS = 4096  # a spec's extraArgs are bounded; this bounds any caller


class ConfigFile(ValueError):
    """``--config FILE``: vLLM reads more flags from the file before argparse."""


class ParseFailure(Exception):
    """argparse's error: ``prog: error: message`` and exit status 2."""

    def __init__(
        self,
        prog: str,
        message: str,
        index: int | None,
        exact: bool = True,
        taken: tuple[Taken, ...] = (),
    ) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message
        self.index = index
        self.exact = exact  # False: the text comes from vLLM code we only approximate
        self.taken = taken  # for "unrecognized arguments": what argparse did take


@dataclass(frozen=True)
class Taken:
    """One option as argparse applied it."""

    option: Option
    spelling: str  # the option string argparse matched (after vLLM's rewrite)
    written: str  # what the user wrote
    index: int | None  # position in the argv given to parse(); None if unknown
    values: tuple[str, ...]
    value: Any  # converted value (True/False for switches)

    @property
    def value_inline(self) -> bool:
        """The value is part of the written token (``--opt=v``, ``-O3``) or there is none."""
        glued = self.written.startswith("-O") and self.written != "-O" and "." not in self.written
        return "=" in self.written or glued or not self.values


def long_name(token: str) -> str:
    """The option a written token names, as vLLM's rewrite spells it: ``--max_model_len=8``
    and ``--max-model-len`` -> ``--max-model-len``; ``-cc.mode=0`` -> ``-cc``; ``-O3``
    stays as written (short options are not rewritten by name)."""
    name = token.split("=", 1)[0]
    if name.startswith("--"):
        return "--" + name[2:].split(".", 1)[0].replace("_", "-")
    return name.split(".", 1)[0]


@dataclass(frozen=True)
class Parsed:
    """vLLM's reading of one command line: the options taken, or the failure."""

    taken: tuple[Taken, ...]
    model: str | None
    failure: ParseFailure | None
    exception: str | None = None  # vLLM raised a Python error instead of argparse's

    @property
    def accepted(self) -> bool:
        return self.failure is None and self.exception is None

    def last(self, dest: str) -> Taken | None:
        found = [t for t in self.taken if t.option.dest == dest]
        return found[-1] if found else None

    def value(self, dest: str) -> Any:
        taken = self.last(dest)
        return None if taken is None else taken.value


# -- stage 1: vLLM's rewrite ----------------------------------------------------------------


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


def _dotted_value(text: str, suffixes: bool = False) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        if suffixes:  # 0.22+: "-cc.max_cudagraph_capture_size=1k" is 1000
            try:
                return human_readable_int(text)
            except (ValueError, TypeMessage):
                return text
        return text


def _dotted_suffixes(table: FlagTable) -> bool:
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
    suffixes = _dotted_suffixes(table)
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
            nested: Any = _dotted_value(value_str, suffixes)
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


# -- stage 2: argparse ---------------------------------------------------------------------


def _option_tuples(table: FlagTable, arg: str) -> list[tuple[Option, str, str | None]]:
    """argparse 3.11 ``_get_option_tuples``: prefix matches of ``arg``."""
    found: list[tuple[Option, str, str | None]] = []
    if len(arg) > 1 and arg[1] == "-":
        if table.allow_abbrev:
            prefix, _, explicit = arg.partition("=")
            explicit_arg = explicit if "=" in arg else None
            found = [
                (o, s, explicit_arg) for s, o in table.by_spelling.items() if s.startswith(prefix)
            ]
    else:
        short, short_explicit = arg[:2], arg[2:]
        for s, o in table.by_spelling.items():
            if s == short:
                found.append((o, s, short_explicit))
            elif s.startswith(arg):
                found.append((o, s, None))
    return found


def _classify(
    table: FlagTable, arg: str, index: int | None
) -> tuple[Option | None, str, str | None] | None:
    """argparse 3.11 ``_parse_optional``: None for a positional, else (option, string, explicit)."""
    if not arg or arg[0] != "-":
        return None
    if arg in table.by_spelling:
        return table.by_spelling[arg], arg, None
    if len(arg) == 1:
        return None
    if "=" in arg:
        name, explicit = arg.split("=", 1)
        if name in table.by_spelling:
            return table.by_spelling[name], name, explicit
    tuples = _option_tuples(table, arg)
    if len(tuples) > 1:
        matches = ", ".join(s for _, s, _ in tuples)
        raise ParseFailure(table.prog, f"ambiguous option: {arg} could match {matches}", index)
    if len(tuples) == 1:
        return tuples[0]
    if _NEGATIVE_NUMBER.match(arg):
        return None
    if " " in arg:
        return None
    return None, arg, None


def _convert(table: FlagTable, option: Option, text: str, index: int | None) -> Any:
    try:
        value = convert_named(option.type, option, text, table)
    except TypeMessage as e:
        raise ParseFailure(table.prog, f"argument {option.display}: {e}", index, exact=False) from e
    except (ValueError, TypeError, RecursionError) as e:
        name = option.type or "str"
        raise ParseFailure(
            table.prog, f"argument {option.display}: invalid {name} value: {text!r}", index
        ) from e
    if option.choices is not None and value not in option.choices:
        choices = ", ".join(repr(c) for c in option.choices)
        raise ParseFailure(
            table.prog,
            f"argument {option.display}: invalid choice: {value!r} (choose from {choices})",
            index,
        )
    return value


def _apply(
    table: FlagTable, option: Option, string: str, values: list[str], index: int | None
) -> Any:
    """argparse ``_get_values`` + the action: the value the option stores."""
    if option.nargs == 0:
        if option.action in ("boolean_optional", "enable_disable"):
            return string not in option.negative
        return option.action != "store_false"
    if option.nargs in (None, "?"):
        if not values:
            return True  # nargs="?" with no value stores its const (True in vLLM)
        return _convert(table, option, values[0], index)
    return [_convert(table, option, v, index) for v in values]


def _count(option: Option, available: int, table: FlagTable, index: int | None) -> int:
    """How many following values the option takes (argparse ``_match_argument``)."""
    nargs = option.nargs
    if nargs is None:
        if available < 1:
            raise ParseFailure(
                table.prog, f"argument {option.display}: expected one argument", index
            )
        return 1
    if nargs == "?":
        return min(available, 1)
    if nargs == "*":
        return available
    if nargs == "+":
        if available < 1:
            raise ParseFailure(
                table.prog, f"argument {option.display}: expected at least one argument", index
            )
        return available
    if isinstance(nargs, int):
        if available < nargs:
            raise ParseFailure(
                table.prog, f"argument {option.display}: expected {nargs} argument(s)", index
            )
        return nargs
    return available


def parse(table: FlagTable, args: list[str]) -> Parsed:
    """vLLM's verdict on ``vllm serve <args>`` (``args`` starts with the model)."""
    try:
        items, origin = rewrite(table, list(args))
    except RecursionError:
        # vLLM would build (and json.dumps) the same nesting: it fails the same way
        return Parsed((), None, None, "RecursionError: maximum recursion depth exceeded")
    except (ValueError, IndexError) as e:
        return Parsed((), None, None, f"{type(e).__name__}: {e}")
    try:
        return _parse_items(table, items, origin, list(args))
    except ParseFailure as failure:
        return Parsed(failure.taken, None, failure)


def _parse_items(
    table: FlagTable, items: list[str], origin: list[int | None], written: list[str]
) -> Parsed:
    kinds: list[tuple[Option | None, str, str | None] | None] = []
    after_dashes = False
    for item, o in zip(items, origin, strict=True):
        if after_dashes or item == "--":
            after_dashes = True
            kinds.append(None)
            continue
        kinds.append(_classify(table, item, o))
    taken: list[Taken] = []
    extras: list[str] = []
    model: str | None = None
    model_pending = True
    i = 0

    def text_at(k: int) -> str:
        o = origin[k]
        return written[o] if o is not None and o < len(written) else items[k]

    dashes = items.index("--") if "--" in items else -1
    while i < len(items):
        kind = kinds[i]
        if kind is None:
            if i == dashes and (model_pending or (i == 1 and not taken)):
                # argparse 3.11 drops a "--" only inside the model positional's match
                # ("m --", "-- m"); anywhere else it is left over: "unrecognized
                # arguments: --" (recorded forms)
                i += 1
                continue
            if model_pending:
                model, model_pending = items[i], False
            else:
                extras.append(items[i])
            i += 1
            continue
        option, string, explicit = kind
        if option is None:
            extras.append(items[i])
            i += 1
            continue
        if explicit is not None:
            if option.nargs == 0:
                # argparse would try "-xy" as "-x -y" for one-letter switches; vLLM's only
                # one is -h, and "-x" is none, so the message is the same either way
                raise ParseFailure(
                    table.prog,
                    f"argument {option.display}: ignored explicit argument {explicit!r}",
                    origin[i],
                )
            values = [explicit]
            nxt = i + 1
        else:
            available = 0
            while (
                i + 1 + available < len(items)
                and kinds[i + 1 + available] is None
                and items[i + 1 + available] != "--"
            ):
                available += 1
            n = _count(option, available, table, origin[i])
            values = items[i + 1 : i + 1 + n]
            nxt = i + 1 + n
        value = _apply(table, option, string, values, origin[i])
        taken.append(Taken(option, string, text_at(i), origin[i], tuple(values), value))
        i = nxt
    if extras:
        raise ParseFailure(
            table.top_prog,
            f"unrecognized arguments: {' '.join(extras)}",
            _first_extra(items, origin, extras),
            taken=tuple(taken),
        )
    return Parsed(tuple(taken), model, None)


def _first_extra(items: list[str], origin: list[int | None], extras: list[str]) -> int | None:
    for item, o in zip(items, origin, strict=True):
        if item == extras[0]:
            return o
    return None
