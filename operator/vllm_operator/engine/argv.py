"""Reading a `vllm serve` command line the way vLLM's own parser reads it.

This is the project's only argv tokenizer: the policy, the launch plan's key flags and the
simulator all call :func:`parse`. It replays, over a release's recorded table
(``flagdata``), the two stages a real `vllm serve` goes through:

1. vLLM's ``FlexibleArgumentParser.parse_args`` rewrite (``argv_rewrite``: underscores,
   ``-O``, dotted keys, ``--model``);
2. Python's argparse (3.11, the interpreter the tables were recorded with): exact option
   strings, ``--opt=value``, abbreviations (``allow_abbrev``), value counts (``nargs``),
   converters and choices, and "unrecognized arguments" collected by the top-level parser.

The result says what vLLM would do: accept (with every option taken and its converted
value) or exit 2 with argparse's own message. ``hack/vllm-flags`` records the real
parser's verdicts, and a test holds this module to them for every committed release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from vllm_operator.engine.argv_rewrite import (
    ConfigFile,
    dotted_suffixes,
    dotted_value,
    rewrite,
)
from vllm_operator.engine.argv_values import TypeMessage, convert_named
from vllm_operator.engine.flagdata import FlagTable, Option
from vllm_operator.errors import VLLMOperatorError

__all__ = [
    "ConfigFile",
    "ParseFailure",
    "Parsed",
    "Taken",
    "dotted_suffixes",
    "dotted_value",
    "long_name",
    "parse",
    "rewrite",
]

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


class ParseFailure(VLLMOperatorError):
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
