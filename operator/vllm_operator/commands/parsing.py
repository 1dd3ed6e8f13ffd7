"""argparse for every subcommand: a misspelt flag answered with "did you mean", not a wall.

argparse's own answer to ``--thresold-json`` is the whole usage (28 lines for ``bench``)
and "unrecognized arguments", with no hint of the flag meant. ``Parser`` remembers the
command line it parsed so that whatever argparse complains about (an unknown flag, a
missing required one, a value outside the choices), each ``--flag`` it does not know gets
the closest spellings it does know (``api.text.did_you_mean``, the helper CR fields,
workload keys and ``extraArgs`` use), and its error is that one line plus where ``--help``
is. Commands that turn the error into their own (bench writes a summary, judge and report a
``SpecError``) call ``explain``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<known>.*)\)")


def known_flags(parser: argparse.ArgumentParser) -> list[str]:
    """Every long option string of ``parser`` (``--x``), in the order they were added."""
    return [s for action in parser._actions for s in action.option_strings if s.startswith("--")]


def unknown_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """The ``--flag`` tokens of ``argv`` that name no option of ``parser`` (an
    unambiguous abbreviation, which argparse accepts, counts as known)."""
    flags = known_flags(parser)
    found = []
    for token in argv:
        if token == "--":
            break
        if not token.startswith("--") or len(token) < 3:
            continue
        name = token.split("=", 1)[0]
        if name in flags:
            continue
        if parser.allow_abbrev and sum(f.startswith(name) for f in flags) == 1:
            continue
        found.append(name)
    return found


def explain(parser: argparse.ArgumentParser, message: str, argv: Sequence[str]) -> str:
    """argparse's ``message`` with a "did you mean" for each unknown flag of ``argv`` and
    for a value outside an option's choices; control characters escaped."""
    # Imported on this error path only: ``vllm_operator.api`` builds every pydantic model
    # (about 0.25 CPU s), which the simulator's start (every simulated pod) never needs.
    from vllm_operator.api.text import did_you_mean, printable  # noqa: PLC0415

    hints = []
    flags = known_flags(parser)
    for name in unknown_flags(parser, argv):
        close = did_you_mean(name, flags, n=1)
        hints.append(f"{name}: {close}" if close else f"{name} is not an option")
    choice = _CHOICE.search(message)
    if choice is not None:
        known = re.findall(r"'([^']*)'", choice.group("known"))
        close = did_you_mean(choice.group("given"), known, quote=True)
        if close:
            hints.append(close)
    text = "; ".join([message, *hints])
    return printable(text, newlines=False)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose error is one line with "did you mean" (exit 2)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.argv: list[str] = []

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(self.argv, namespace)

    def explained(self, message: str) -> str:
        """``message`` with the hints of ``explain`` for the command line being parsed."""
        return explain(self, message, self.argv)

    def error(self, message: str) -> NoReturn:
        self.exit(
            2,
            f"{self.prog}: error: {self.explained(message)}\n"
            f"(`{self.prog} --help` lists every option)\n",
        )
