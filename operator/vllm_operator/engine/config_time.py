"""What vLLM does with a parsed `vllm serve` command line before it loads a model.

argparse accepting a command line is not the end of it. Before any weights load, vLLM

1. calls the serve subcommand's ``validate(args)`` (``validate_parsed_serve_args``): some
   options require another (``catalog.REQUIRES``), or it raises and the pod crash-loops;
2. builds ``VllmConfig`` (a pydantic dataclass): ``--optimization-level`` was kept as the
   string argparse got, and is converted there (pydantic's lax integer reading into the
   ``OptimizationLevel`` enum: ``-O00``, ``-O+0``, ``-O0.0`` are level 0, ``-O4`` stops it);
3. derives the compilation mode: the ``-cc`` value's ``mode`` (converted at argparse time by
   ``CompilationConfig``'s validator: enum names in any case, ``false`` is 0, ``0.0`` is 0),
   else its ``level`` where the release maps it, else NONE at optimization level 0 and
   compiled above it; ``--enforce-eager`` forces NONE.

Every rule is data or logic held to the release's own code: ``hack/vllm-flags`` records,
per release, what vLLM did after argparse for each conformance form (``after``) and its
conversion of a corpus of levels and modes (``conversions``); the tests hold this module
to both. A release recorded without them (an older extractor run) is read with the
conversions of the nearest release that has them, leniently: what that data would refuse
is let through (vLLM decides at start), so another release's data never refuses a spec.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vllm_operator.engine import catalog, engine_checks, flagdata, registry_names
from vllm_operator.engine.config_schema import lax_int
from vllm_operator.engine.flagdata import FlagTable
from vllm_operator.engine.version import Version

_BRACKET = re.compile(r"\s*\[type=[^\]]*\]\s*$")
_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


@dataclass(frozen=True)
class Refusal:
    """vLLM would stop after argparse: at ``stage`` (validate | api_server | config |
    engine), for ``reason``."""

    stage: str
    reason: str
    name: bool = False  # a name the release's registry lacks (a newer release may have it)


def _nearest(table: FlagTable, wanted: Callable[[FlagTable], bool]) -> FlagTable:
    """``table`` if it has what is ``wanted``, else the nearest release that has (older
    first); ``table`` itself when none has."""
    if wanted(table):
        return table
    having = [r for r in flagdata.releases() if wanted(flagdata.table(r))]
    older = [r for r in having if r <= table.version]
    newer = [r for r in having if r > table.version]
    pick = older[-1] if older else (newer[0] if newer else None)
    return flagdata.table(pick) if pick is not None else table


def _with_conversions(table: FlagTable) -> FlagTable:
    """``table``, or the nearest recorded release with conversions."""
    return _nearest(table, lambda t: t.records_after_parse)


def _recorded(table: FlagTable, key: str) -> tuple[tuple[Any, Any], ...]:
    return _with_conversions(table).conversions.get(key, ())


def _reason(result: Any) -> str:
    """vLLM's message for a recorded failure, without pydantic's [type=...] tail."""
    text = str(result.get("error", "")) if isinstance(result, dict) else str(result)
    field, _, rest = text.partition(" / ")
    return f"{field.strip()}: {_BRACKET.sub('', rest).strip()}" if rest else text


def _failure(recorded: tuple[tuple[Any, Any], ...]) -> str:
    for _, result in recorded:
        if isinstance(result, dict):
            return _reason(result)
    return "invalid value"


def optimization_level(table: FlagTable, text: str) -> int | Refusal:
    """``--optimization-level TEXT`` as ``VllmConfig`` reads it: the level, or vLLM's reason."""
    recorded = _recorded(table, "optimization_level")
    allowed = {r for _, r in recorded if isinstance(r, int)} or {0, 1, 2, 3}
    value = lax_int(text)
    if value is None or value not in allowed:
        if not table.records_after_parse:
            return Refusal("unknown", "")
        return Refusal("config", f"1 validation error for VllmConfig: {_failure(recorded)}")
    return value


def _names_in(table: FlagTable) -> dict[str, int]:
    return {
        v: r
        for v, r in table.conversions.get("compilation_mode", ())
        if isinstance(v, str) and _NAME.match(v) and isinstance(r, int)
    }


def _mode_names(table: FlagTable) -> dict[str, int]:
    """The compilation mode names the release's validator accepts (recorded conversions).

    A release recorded without conversions borrows the nearest release's names, only to
    see eager mode (``{"mode": "NONE"}``): an unknown name is then let through, not refused.
    """
    if table.records_after_parse:
        return _names_in(table)
    return _names_in(_nearest(table, lambda t: bool(_names_in(t))))


def compilation_value(table: FlagTable, key: str, value: Any) -> int | Refusal | None:
    """The ``mode``/``level`` inside ``-cc`` as ``CompilationConfig`` reads it.

    ``None`` stays unset. A string is a mode name (any case, ``str.upper`` as vLLM does)
    where the release has the mode validator, else a lax integer; integers must be among
    the values the release's parser accepted (``config_values``, recorded per option for
    every release). What only another release's conversions would refuse is let through.
    """
    option = table.by_dest.get("compilation_config")
    allowed = option.config_values.get(key, ()) if option is not None else ()
    strict = option is not None and option.config_strict and key in option.config_values
    if strict and not allowed:  # the release refuses the key (0.22+: level)
        return Refusal("parse", f"{key}: Unexpected keyword argument")
    if value is None:
        return None
    own = table.records_after_parse
    recorded = _recorded(table, f"compilation_{key}")
    if own and recorded and all(r is None for _, r in recorded):
        return None  # the release ignores this key (0.11.0: mode)
    names = _mode_names(table) if key == "mode" else {}
    if isinstance(value, str) and names:
        if value.upper() in names:
            return names[value.upper()]
        if not own:
            return None
        valid = ", ".join(names)
        return Refusal(
            "parse", f"{key}: Invalid compilation mode: {value}. Valid modes are: {valid}"
        )
    number = None if isinstance(value, (list, dict)) else lax_int(value)
    if number is None:
        if not own:
            return None
        return Refusal("parse", _failure(recorded) if recorded else f"{key}: invalid value")
    if allowed and number not in allowed and not _open_ended(allowed):
        shown = [str(a) for a in allowed]
        listed = f"{', '.join(shown[:-1])} or {shown[-1]}" if len(shown) > 1 else shown[0]
        return Refusal("parse", f"{key}: Input should be {listed}")
    return number


def _open_ended(allowed: tuple[int, ...]) -> bool:
    """The parser took every probed integer 0-4: a plain ``int`` field, any value goes."""
    return set(range(5)) <= set(allowed)


def compile_mode(table: FlagTable, config: dict[str, Any] | None) -> int | None:
    """The compilation mode the ``-cc`` value sets explicitly (``mode``, else ``level``
    where the release gives it effect), converted; None when it sets none."""
    if not isinstance(config, dict):
        return None
    option = table.by_dest.get("compilation_config")
    effective = option.config_effective if option is not None else frozenset()
    effective = effective or frozenset({"mode", "level"})
    for key in ("mode", "level"):
        if key not in effective:
            continue
        value = compilation_value(table, key, config.get(key))
        if isinstance(value, int):
            return value
    return None


@dataclass(frozen=True)
class AfterParse:
    """vLLM's reading of an accepted command line: refused, or eager or not (and why)."""

    refusals: tuple[Refusal, ...]
    eager_reasons: tuple[str, ...]

    @property
    def eager(self) -> bool:
        return bool(self.eager_reasons)


def _validates(table: FlagTable, rule: catalog.Requires) -> bool:
    """Whether the release's ``validate`` makes the check: its recorded form of the option
    alone was refused there (0.10.2 lets ``--enable-log-outputs`` alone through). A table
    recorded without that form is read as making it."""
    form = table.form((f"--{rule.dest.replace('_', '-')}",))
    after = (form.record.get("after") or {}) if form is not None else None
    if after is None or not table.records_after_parse:
        return True
    return after.get("verdict") == "refused" and after.get("stage") == "validate"


def read(table: FlagTable, values: dict[str, Any], taken: set[str]) -> AfterParse:
    """What vLLM does after argparse accepted a command line.

    ``values``: the last value of each option argparse took (by dest); ``taken``: the dests
    the command line set. Defaults are vLLM's (optimization level 2).
    """
    refusals: list[Refusal] = []
    for rule in catalog.REQUIRES:
        present = rule.dest in table.by_dest and rule.needs in table.by_dest
        if (
            present
            and _validates(table, rule)
            and values.get(rule.dest)
            and not values.get(rule.needs)
        ):
            refusals.append(Refusal("validate", rule.message))
    level: int | None = 2 if "optimization_level" in table.by_dest else None
    if "optimization_level" in taken:
        converted = optimization_level(table, str(values["optimization_level"]))
        if isinstance(converted, Refusal):
            if converted.stage != "unknown":
                refusals.append(converted)
            level = None
        else:
            level = converted
    refusals += _named_refusals(table, values)
    if refusals:
        return AfterParse(tuple(refusals), ())
    reasons = []
    if values.get("enforce_eager") is True:
        reasons.append("--enforce-eager")
    mode = compile_mode(table, values.get("compilation_config"))
    if mode is not None:
        if mode == 0:
            reasons.append("compilation mode 0 / NONE (-cc/--compilation-config)")
    elif level == 0:
        reasons.append("optimization level 0 (-O0 / --optimization-level 0)")
    return AfterParse((), tuple(reasons))


def _named_refusals(table: FlagTable, values: dict[str, Any]) -> list[Refusal]:
    """The API server's and engine config's checks, then the names vLLM looks up in a
    registry at start (``registry_names``): a name an engine check refused already gets
    the registry's "did you mean" added, not a second refusal. Each refusal of a name says
    so (``name``): a release newer than the data may have added it (``extra_args``)."""
    found = engine_checks.refusals(table, values)
    named = registry_names.recorded(table.version) if table.records_engine else None
    out = []
    for f in found:
        hint = ""
        for registry in (named or {}).values():
            for place, value in registry_names.checked(registry, values):
                if place.partition(".")[0] == f.dest and not registry.accepts(value):
                    flag = registry_names.flag_of(place)
                    hint = f"; {flag} {value!r}: {registry_names.hint(registry, value)}"
        out.append(Refusal(f.stage, f.reason + hint, name=bool(hint)))
    if named is not None:
        already = frozenset(f.dest for f in found)
        out += [
            Refusal("names", reason, name=True)
            for _, reason in registry_names.refusals(table.version, values, already)
        ]
    return out


def newer_name_note(requested: Version, checked_against: Version, reason: str) -> str:
    """The warning for a name the nearest older recorded release lacks, where the pods run
    a newer release (which may have added it): vLLM decides at start."""
    return (
        f"extraArgs: vLLM {checked_against}, the nearest older recorded release, registers "
        f"no such name ({reason}); vLLM {requested} may have added it, else the pod stops at "
        "start and crash-loops"
    )
