"""The `vllm serve` options of each vLLM release, as recorded from vLLM's own parser.

The files ``engine/flags/vllm-X.Y.Z.json`` are written by ``hack/vllm-flags/extract.py``,
which builds the real parser of each PyPI release (see docs/engine-policy.md); nothing in
them is typed by hand. This module only loads them: which releases exist, the table of one
release (or of the nearest older one for a release newer than the data), and lookups.
Hand-written knowledge about flags (why one went away, what replaces it) lives in
``catalog`` as annotations over these tables.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from vllm_operator.engine.version import Version

_FILE_RE = re.compile(r"^vllm-(\d+\.\d+\.\d+)\.json$")


@dataclass(frozen=True)
class Option:
    """One option of `vllm serve` in one release (every spelling argparse registered)."""

    spellings: tuple[str, ...]
    display: str  # how argparse names it in errors: "--tensor-parallel-size/-tp"
    dest: str
    action: str  # store, store_true, boolean_optional, enable_disable, append, ...
    nargs: int | str | None
    type: str  # converter name: int, float, optional_type(int), parse_dataclass, ...
    type_repr: str = ""
    choices: tuple[Any, ...] | None = None
    negative: frozenset[str] = frozenset()
    deprecated: bool = False
    config_keys: frozenset[str] = frozenset()
    config_strict: bool = False
    config_values: dict[str, tuple[int, ...]] = field(default_factory=dict)
    config_effective: frozenset[str] = frozenset()  # keys whose value sets the compile mode
    # pydantic's JSON schema of the config dataclass (descriptions dropped) and the fields
    # vLLM's own "before"/"plain" validators convert first ("*": a model validator sees
    # the whole object); None where not recorded
    config_schema: dict[str, Any] | None = field(default=None, compare=False)
    config_custom: frozenset[str] = frozenset()
    config_wrapped: frozenset[str] = frozenset()  # fields a "wrap" validator also sees
    # vLLM expands 1k/2M/... inside this option's JSON (0.22+); None: not recorded
    json_suffixes: bool | None = False
    # the config class field the value reaches in create_engine_config: {"class", "schema"
    # (pydantic's JSON schema of the field, constraints kept), "converted_first"}
    engine_field: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def takes_value(self) -> bool:
        return self.nargs != 0

    @property
    def long_name(self) -> str:
        """The canonical ``--name`` spelling (the first long one argparse shows)."""
        longs = [s for s in self.display.split("/") if s.startswith("--")]
        return longs[0] if longs else self.spellings[0]


@dataclass(frozen=True)
class Form:
    """One recorded conformance case: ``vllm serve m <argv>`` and what vLLM said."""

    argv: tuple[str, ...]
    verdict: str  # accepted | error | exception
    message: str
    record: dict[str, Any]


@dataclass(frozen=True)
class FlagTable:
    """Everything recorded about one release's `vllm serve` parser."""

    version: Version
    wheel: str
    wheel_sha256: str
    python: str
    prog: str
    top_prog: str
    allow_abbrev: bool
    options: tuple[Option, ...]
    rewrites: tuple[tuple[tuple[str, ...], tuple[str, ...] | str], ...]
    forms: tuple[Form, ...]
    by_spelling: dict[str, Option] = field(repr=False, compare=False)
    by_dest: dict[str, Option] = field(repr=False, compare=False)
    # vLLM's own conversion of recorded values after argparse: key -> ((value, result), ...)
    # where result is the integer vLLM ends up with, None, or {"error": text}
    conversions: dict[str, tuple[tuple[Any, Any], ...]] = field(
        default_factory=dict, repr=False, compare=False
    )
    suffix_probes: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)
    # names vLLM checks values against after argparse (quantization, kv_connector,
    # tool_call_parser, reasoning_parser); empty where not recorded
    registries: dict[str, frozenset[str]] = field(default_factory=dict, repr=False, compare=False)
    # recorded with the API-server and engine-config stages (hack/vllm-flags/engine_stage.py)
    records_engine: bool = False

    def form(self, argv: tuple[str, ...]) -> Form | None:
        """The recorded form ``argv``, if this release was asked about it."""
        for recorded in self.forms:
            if recorded.argv == argv:
                return recorded
        return None

    @property
    def records_after_parse(self) -> bool:
        """Whether this release was recorded with what vLLM does after argparse."""
        return bool(self.conversions)

    def rewrite_of(self, argv: tuple[str, ...]) -> tuple[str, ...] | str | None:
        for seen, to in self.rewrites:
            if seen == argv:
                return to
        return None


def _converted_first(custom: Any) -> frozenset[str]:
    """Fields a "before"/"plain" validator of vLLM's converts before pydantic's type check
    ("wrap" validators in the recorded releases hand the value on unchanged)."""
    if isinstance(custom, list):  # recorded without the modes: treat every one so
        return frozenset(custom)
    return frozenset(k for k, modes in custom.items() if {"before", "plain"} & set(modes)
                     or k == "*")  # fmt: skip


def _wrapped(custom: Any) -> frozenset[str]:
    """Fields a "wrap" validator of vLLM's sees (it may decide a value itself)."""
    if not isinstance(custom, dict):
        return frozenset()
    return frozenset(k for k, modes in custom.items() if "wrap" in modes)


def _option(row: dict[str, Any], suffixes: bool | None) -> Option:
    choices = row.get("choices")
    schema: dict[str, Any] = row.get("config_schema") or {}
    recorded = "schema" in schema
    return Option(
        spellings=tuple(row["spellings"]),
        display=row["display"],
        dest=row["dest"],
        action=row["action"],
        nargs=row["nargs"],
        type=row["type"],
        type_repr=row.get("type_repr", ""),
        choices=tuple(choices) if choices is not None else None,
        negative=frozenset(row.get("negative", ())),
        deprecated=bool(row.get("deprecated")),
        config_keys=frozenset(row.get("config_keys", ())),
        config_strict=bool(row.get("config_strict")),
        config_values={k: tuple(v) for k, v in row.get("config_values", {}).items()},
        config_effective=frozenset(k for k, v in row.get("config_effective", {}).items() if v),
        config_schema=schema["schema"] if recorded else None,
        config_custom=_converted_first(schema.get("custom", {})) if recorded else frozenset(),
        config_wrapped=_wrapped(schema.get("custom", {})) if recorded else frozenset(),
        json_suffixes=suffixes if "parse_dataclass" in row["type"] else False,
        engine_field=row.get("engine_field"),
    )


def parse_table(doc: dict[str, Any]) -> FlagTable:
    """A table from the JSON document the extractor wrote."""
    suffix_probes = tuple((str(a), str(b)) for a, b in doc.get("json_number_suffixes", ()))
    # a table recorded before the expansion was probed: unknown (None), read leniently
    suffixes = bool(suffix_probes) if "json_number_suffixes" in doc else None
    options = tuple(_option(r, suffixes) for r in doc["options"])
    rewrites = tuple(
        (tuple(r["argv"]), tuple(r["to"]) if isinstance(r["to"], list) else str(r["to"]))
        for r in doc["rewrites"]
    )
    forms = tuple(
        Form(tuple(f["argv"]), f["verdict"], f.get("message", ""), dict(f)) for f in doc["forms"]
    )
    parser = doc["parser"]
    by_spelling = {s: o for o in options for s in o.spellings}
    order = [s for s in parser.get("registration_order", ()) if s in by_spelling]
    by_spelling = {s: by_spelling[s] for s in [*order, *sorted(set(by_spelling) - set(order))]}
    return FlagTable(
        version=Version.parse(doc["vllm"]),
        wheel=doc["wheel"],
        wheel_sha256=doc["wheel_sha256"],
        python=doc["python"],
        prog=parser["prog"],
        top_prog=parser["top_prog"],
        allow_abbrev=bool(parser["allow_abbrev"]),
        options=options,
        rewrites=rewrites,
        forms=forms,
        by_spelling=by_spelling,
        by_dest={o.dest: o for o in options},
        conversions={
            k: tuple((v, r) for v, r in rows) for k, rows in doc.get("conversions", {}).items()
        },
        suffix_probes=suffix_probes,
        registries={k: frozenset(v) for k, v in doc.get("registries", {}).items()},
        records_engine="registries" in doc,
    )


@cache
def releases() -> tuple[Version, ...]:
    """Every release with a committed table, oldest first."""
    found = []
    for entry in resources.files("vllm_operator.engine.flags").iterdir():
        m = _FILE_RE.match(entry.name)
        if m:
            found.append(Version.parse(m.group(1)))
    return tuple(sorted(found))


def _file_name(version: Version) -> str:
    return f"vllm-{version.major}.{version.minor}.{version.patch}.json"


def _document(version: Version) -> dict[str, Any]:
    text = resources.files("vllm_operator.engine.flags").joinpath(_file_name(version))
    doc: dict[str, Any] = json.loads(text.read_text("utf-8"))
    return doc


def sibling_document(stage: str, version: Version) -> dict[str, Any] | None:
    """The file a recording stage of its own wrote for exactly ``version`` beside the main
    tables (``flags/<stage>/vllm-X.Y.Z.json``: names, keys, pairs); None where it has none."""
    entry = resources.files(f"vllm_operator.engine.flags.{stage}").joinpath(_file_name(version))
    if not entry.is_file():
        return None
    doc: dict[str, Any] = json.loads(entry.read_text("utf-8"))
    return doc


@cache
def table(version: Version) -> FlagTable:
    """The table of exactly ``version`` (which must be in :func:`releases`)."""
    return parse_table(_document(version))


@cache
def spellings(version: Version) -> frozenset[str]:
    """Every option string of ``version`` (without keeping its whole table in memory)."""
    return frozenset(s for row in _document(version)["options"] for s in row["spellings"])


def table_for(version: Version) -> FlagTable | None:
    """The table for ``version``: its own, else the nearest older release's; ``None``
    when ``version`` is older than every recorded release."""
    older = [r for r in releases() if r <= version]
    return table(older[-1]) if older else None


def oldest() -> Version:
    return releases()[0]


def newest() -> Version:
    return releases()[-1]


def removed_in(spelling: str, version: Version) -> Version | None:
    """The release at or before ``version`` where ``spelling`` last disappeared, if any.

    A flag can come back (0.33 revived ``--disable-log-requests``): only the most recent
    removal up to ``version`` counts.
    """
    gone: Version | None = None
    previous = False
    for release in releases():
        if release > version:
            break
        present = spelling in spellings(release)
        if previous and not present:
            gone = release
        if present:
            gone = None
        previous = present
    return gone


def added_in(spelling: str, version: Version) -> Version | None:
    """The first release after ``version`` that has ``spelling``, if any."""
    for release in releases():
        if release > version and spelling in spellings(release):
            return release
    return None
