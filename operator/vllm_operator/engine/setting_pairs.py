"""One setting given twice through two spellings: refused where vLLM refuses, else said.

A command line can set one thing twice: a dedicated flag and the same key inside a JSON
option (``--attention-backend X`` with ``--attention-config '{"backend": "Y"}'``), or one
option under two spellings (``-tp 2 --tensor-parallel-size 4``, ``-cc '{...}'`` with
``--compilation-config.mode 0``). Per release and pair vLLM either refuses the pair at start
("... are mutually exclusive", raised while it builds its engine config, after the image
pull) or keeps one of the two values without a word. ``hack/vllm-flags/pairs_stage.py``
finds the pairs in each release's own code and records what vLLM did with each
(``engine/flags/pairs/vllm-X.Y.Z.json``, beside the release's table): this module refuses
the pairs vLLM refuses, with vLLM's words, both spellings and which one to keep, and
warns where one spelling wins silently, naming the winner. A release without a record
gets no check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from vllm_operator.engine import argv, flagdata
from vllm_operator.engine.flagdata import FlagTable
from vllm_operator.engine.version import Version
from vllm_operator.errors import SpecError

WINNERS = ("flag", "key")
_SHOWN = 120  # at most this many characters of a value the user wrote, in a message


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


@dataclass(frozen=True)
class Pair:
    """A dedicated flag and a key of a JSON option that set one field, in one release."""

    dest: str  # the flag's dest
    option: str  # the JSON option's dest
    key: str
    verdict: str  # refused | flag | key (which value ended in the config)
    message: str  # vLLM's words when refused
    default: Any  # the flag's own default value (None where it cannot be written)
    at_default: str  # the verdict with the flag at its default ("" where not recorded)
    argv: tuple[str, ...]  # the recorded form

    def verdict_for(self, value: Any) -> str:
        """The verdict for the flag given ``value``: at the flag's default vLLM may take it
        as unset (``if self.monokernel:``), so only what was recorded there counts."""
        if _same(value, self.default):
            return self.at_default
        return self.verdict


def _same(value: Any, default: Any) -> bool:
    """``value`` (as the operator's parser converted it) is the flag's recorded default."""
    if default is None or isinstance(default, bool):
        return value is default
    return value == default or str(value) == str(default)


@dataclass(frozen=True)
class Record:
    """What one release does with a setting given twice."""

    pairs: tuple[Pair, ...]
    spellings: tuple[dict[str, Any], ...]  # the recorded forms of one option given twice


def parse(doc: dict[str, Any]) -> Record:
    """The pairs of one recorded file (only those vLLM refuses or lets one win)."""
    pairs = []
    spellings = []
    for form in doc.get("forms", []):
        if form.get("kind") == "spellings":
            spellings.append(form)
            continue
        at = form.get("at_default") or {}
        pair = Pair(
            str(form["dest"]),
            str(form["option"]),
            str(form["key"]),
            str(form["verdict"]),
            str((form.get("both") or {}).get("message", "")),
            form.get("flag_default"),
            str(at.get("verdict", "")),
            tuple(form["argv"]),
        )
        if pair.verdict in ("refused", *WINNERS) or pair.at_default in ("refused", *WINNERS):
            pairs.append(pair)
    return Record(tuple(pairs), tuple(spellings))


@cache
def recorded(version: Version) -> Record | None:
    """The record of exactly ``version``; None where it was not recorded."""
    doc = flagdata.sibling_document("pairs", version)
    return None if doc is None else parse(doc)


def _flag(table: FlagTable, dest: str) -> str:
    option = table.by_dest.get(dest)
    return option.long_name if option is not None else "--" + dest.replace("_", "-")


@dataclass(frozen=True)
class Found:
    """What the command line says twice: the refusals and the warnings."""

    errors: tuple[SpecError, ...]
    warnings: tuple[str, ...]


def _pair_findings(
    table: FlagTable, record: Record, values: dict[str, Any]
) -> tuple[list[tuple[str, str]], list[str]]:
    refusals: list[tuple[str, str]] = []
    warnings: list[str] = []
    version = table.version
    for pair in record.pairs:
        config = values.get(pair.option)
        if pair.dest not in values or not isinstance(config, dict):
            continue
        if config.get(pair.key) is None:
            continue
        flag, option = _flag(table, pair.dest), _flag(table, pair.option)
        second = _short(json.dumps({pair.key: config[pair.key]}))
        given = f"{flag} {_short(repr(values[pair.dest]))} and {option} {second}"
        verdict = pair.verdict_for(values[pair.dest])
        if verdict == "refused":
            said = pair.message
            refusals.append(
                (
                    f"vLLM {version} would stop at start, after parsing its arguments, building "
                    f"its engine config (before loading the model): {given} set one setting "
                    f'twice ("{said}"); the pod would crash-loop',
                    f'give it once: keep {flag} and drop "{pair.key}" from {option}, or the '
                    "reverse",
                )
            )
        elif verdict in WINNERS:
            kept, lost = (flag, f'"{pair.key}" in {option}')[:: 1 if verdict == "flag" else -1]
            warnings.append(
                f"extraArgs {given} set one setting twice: vLLM {version} keeps {kept} and "
                f"ignores {lost} without a word; give it once"
            )
    return refusals, warnings


def _said(t: argv.Taken) -> str:
    """An option as written, with its value where it was a separate item."""
    return _short(t.written if t.value_inline else f"{t.written} {' '.join(t.values)}")


def _twice(taken: tuple[argv.Taken, ...]) -> list[str]:
    """One option given twice (any spellings) with different values: argparse keeps the
    last one; vLLM merges dotted keys of a JSON option before argparse sees them."""
    warnings = []
    by_dest: dict[str, list[argv.Taken]] = {}
    for t in taken:
        if t.option.takes_value:
            by_dest.setdefault(t.option.dest, []).append(t)
    for _, found in sorted(by_dest.items()):
        values = [json.dumps(t.value, sort_keys=True, default=str) for t in found]
        if len(set(values)) < 2:
            continue
        written = " and ".join(_said(t) for t in found)
        last = _said(found[-1])
        warnings.append(
            f"extraArgs {written} set {found[-1].option.long_name} more than once: vLLM keeps "
            f"only {last} (argparse keeps the last one; vLLM moves dotted keys such as "
            "-cc.mode behind the rest first) without a word; give it once"
        )
    return warnings


def check(table: FlagTable, parsed: argv.Parsed, start: int, field: str) -> Found:
    """The settings the command line gives twice: refused (as ``field``) where vLLM
    refuses the pair, else warned. ``start``: where the extra args begin (an option given
    twice is said only when the extra args give it)."""
    record = recorded(table.version) if parsed.accepted else None
    if record is None:
        return Found((), ())
    values = {t.option.dest: t.value for t in parsed.taken}
    mine = {t.option.dest for t in parsed.taken if t.index is not None and t.index >= start}
    refusals, warnings = _pair_findings(table, record, values)
    extra = tuple(t for t in parsed.taken if t.option.dest in mine)
    errors = tuple(SpecError(field, reason, fix) for reason, fix in refusals)
    return Found(errors, (*warnings, *_twice(extra)))
