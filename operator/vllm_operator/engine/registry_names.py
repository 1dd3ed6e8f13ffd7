"""Names vLLM looks up in a registry when it starts: refused where the release lacks them.

``--reasoning-parser``, ``--attention-backend``, ``--quantization``, ``--load-format``,
``--tool-call-parser`` (with ``--enable-auto-tool-choice``) and names inside JSON-valued
options (``--kv-transfer-config``'s ``kv_connector``, ``--attention-config``'s ``backend``,
``--structured-outputs-config``'s ``reasoning_parser``) are plain strings to argparse;
`vllm serve` looks each one up in a registry of that release before it serves, and an
unknown name stops the pod after the image pull (issue 43). Which names exist, and where a
command line gives them (the registry's ``places``), differ per release.
``hack/vllm-flags/classes_stage.py`` records, per release, each registry's names, places
and the verdict of vLLM's own lookup function on valid names and near misses
(``engine/flags/names/vllm-X.Y.Z.json``, beside the release's table). This module reads
that record and refuses a name the way the lookup does: a registered name, a recorded
accepted extra (``auto`` where the release maps it), and another case only where the
release's lookup folds case (recorded: the other case of a valid name was accepted). The
refusal names the flag, the release, vLLM's words, the closest names ("did you mean") and
the valid ones. A release without such a record gets no check.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from vllm_operator.engine import flagdata
from vllm_operator.engine.version import Version

# registry -> the words for one of its names, and the switch without which vLLM never
# looks the name up ("" where it always does)
OPTIONS: dict[str, tuple[str, str]] = {
    "attention_backend": ("attention backend", ""),
    "kv_connector": ("KV connector", ""),
    "load_format": ("load format", ""),
    "quantization": ("quantization method", ""),
    "reasoning_parser": ("reasoning parser", ""),
    "tool_call_parser": ("tool call parser", "enable_auto_tool_choice"),
}
# a place whose name vLLM may import from elsewhere at start (a plugin file, a module
# path): not checked when that is given. "dest" or "dest.key" inside a JSON option.
PLUGINS = {
    "reasoning_parser": "reasoning_parser_plugin",
    "structured_outputs_config.reasoning_parser": (
        "structured_outputs_config.reasoning_parser_plugin"
    ),
    "tool_call_parser": "tool_parser_plugin",
    "kv_transfer_config.kv_connector": "kv_transfer_config.kv_connector_module_path",
}
# create_engine_config copies ``--reasoning-parser`` over the JSON key when the flag is
# given (EngineArgs, 0.11.1-0.33): the JSON key is looked up only without the flag
OVERRIDDEN_BY = {"structured_outputs_config.reasoning_parser": "reasoning_parser"}
# what a JSON option needs besides the name for vLLM to build its config (argv_of)
_JSON_WITH = {"kv_transfer_config": {"kv_role": "kv_both"}}
_LISTED = 60  # at most this many valid names in a message


def value_at(values: dict[str, Any], place: str) -> object:
    """The value a command line gives ``place`` (``dest`` or ``dest.key`` of a JSON option)."""
    dest, _, key = place.partition(".")
    value = values.get(dest)
    if not key:
        return value
    return value.get(key) if isinstance(value, dict) else None


def flag_of(place: str) -> str:
    """``--load-format`` or ``--kv-transfer-config's "kv_connector"``: how a message names
    the place."""
    dest, _, key = place.partition(".")
    flag = "--" + dest.replace("_", "-")
    return f'{flag}\'s "{key}"' if key else flag


@dataclass(frozen=True)
class NameForm:
    """One name run through the release's own lookup, and its verdict."""

    registry: str
    name: str
    accepted: bool
    message: str


@dataclass(frozen=True)
class Registry:
    """One registry of one release: its names and how its lookup treats others."""

    key: str
    names: frozenset[str]
    check: str  # vLLM's function that looks the name up
    fold_case: bool
    extra: frozenset[str]  # accepted although not a name (recorded: "auto" on some)
    forms: tuple[NameForm, ...]
    places: tuple[str, ...] = ()  # where a command line gives it a name

    def accepts(self, name: str) -> bool:
        if name in self.names or name in self.extra:
            return True
        return self.fold_case and name.upper() in {n.upper() for n in self.names}


def parse(doc: dict[str, Any]) -> dict[str, Registry]:
    """The registries of one recorded names file."""
    forms = [
        NameForm(
            str(f["registry"]),
            str(f["name"]),
            f.get("verdict") == "accepted",
            str(f.get("message", "")),
        )
        for f in doc.get("forms", [])
    ]
    out: dict[str, Registry] = {}
    for key, row in sorted(doc.get("registries", {}).items()):
        names = frozenset(str(n) for n in row.get("names", []))
        mine = tuple(f for f in forms if f.registry == key)
        folded = [f for f in mine if f.name not in names and f.name.upper() in _upper(names)]
        extra = frozenset(
            f.name for f in mine if f.accepted and f.name.upper() not in _upper(names)
        )
        out[key] = Registry(
            key,
            names,
            str(row.get("check", "")),
            fold_case=bool(folded) and all(f.accepted for f in folded),
            extra=extra,
            forms=mine,
            places=tuple(str(p) for p in row.get("places", [key])),  # format 1: the flag
        )
    return out


def _upper(names: frozenset[str]) -> set[str]:
    return {n.upper() for n in names}


@cache
def recorded(version: Version) -> dict[str, Registry] | None:
    """The recorded registries of exactly ``version``; None where it was not recorded."""
    doc = flagdata.sibling_document("names", version)
    return None if doc is None else parse(doc)


def _vllm_words(registry: Registry, name: str) -> str:
    """The recorded refusal of ``bogus`` with ``name`` in its place (vLLM's own words)."""
    if registry.fold_case and all(n == n.lower() for n in registry.names):
        name = name.lower()  # the lookup lower-cased it first (LoadConfig)
    for form in registry.forms:
        if form.name == "bogus" and not form.accepted:
            if "'BOGUS'" in form.message:  # the lookup upper-cased the name first
                return form.message.replace("'BOGUS'", repr(name.upper()), 1)
            return form.message.replace("bogus", name, 1)
    return ""


def hint(registry: Registry, name: str) -> str:
    """``did you mean ...? valid names: ...`` for ``name`` in ``registry``."""
    ordered = sorted(registry.names | registry.extra)
    close = difflib.get_close_matches(name, ordered, n=3, cutoff=0.6)
    if not close:
        lowered = {n.lower(): n for n in ordered}
        close = [lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), n=3)]
    listed = ", ".join(ordered[:_LISTED]) + (", ..." if len(ordered) > _LISTED else "")
    mean = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return f"{mean}valid names in this release: {listed}"


def checked(registry: Registry, values: dict[str, Any]) -> list[tuple[str, str]]:
    """``(place, name)`` for each name the command line gives ``registry`` that vLLM looks
    up at start (its switch on, no plugin that may register it, not overridden)."""
    switch = OPTIONS.get(registry.key, ("", ""))[1]
    if switch and not values.get(switch):
        return []
    out = []
    for place in registry.places:
        name = value_at(values, place)
        if not isinstance(name, str) or not name or value_at(values, PLUGINS.get(place, "")):
            continue
        if place in OVERRIDDEN_BY and value_at(values, OVERRIDDEN_BY[place]):
            continue
        out.append((place, name))
    return out


def refusals(
    version: Version, values: dict[str, Any], already: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """``(dest, reason)`` for each registry-checked value ``version`` would refuse.

    ``values``: the last value of each option the command line set (by dest); ``already``:
    dests another check refused already (they get no second refusal).
    """
    out = []
    for key, registry in (recorded(version) or {}).items():
        words = OPTIONS.get(key, (key.replace("_", " "), ""))[0]
        for place, value in checked(registry, values):
            dest = place.partition(".")[0]
            if dest in already or registry.accepts(value):
                continue
            said = _vllm_words(registry, value)
            vllm = f" ({registry.check}: {said})" if said else f" ({registry.check})"
            out.append(
                (
                    dest,
                    f"{flag_of(place)} {value!r}: vLLM {version} registers no {words} of that "
                    f"name{vllm}; " + hint(registry, value),
                )
            )
    return out


def argv_of(place: str, name: str) -> list[str]:
    """The `vllm serve` arguments that make vLLM look ``name`` up at ``place``."""
    dest, _, key = place.partition(".")
    flag = "--" + dest.replace("_", "-")
    if key:
        return [flag, json.dumps({key: name, **_JSON_WITH.get(dest, {})})]
    switch = next((o[1] for k, o in OPTIONS.items() if k == place and o[1]), "")
    return [*(["--" + switch.replace("_", "-")] if switch else []), flag, name]


def lookup_refused(version: Version, values: dict[str, Any]) -> bool:
    """Whether the release's lookup, as recorded, refused one of the names ``values``
    carries where vLLM looks it up: what the main recording's stages could not see
    (issue 43). A name not run through the lookup is read against the recorded names
    (``--kv-transfer-config '{"kv_connector": "X"}'`` of the main table)."""
    for registry in (recorded(version) or {}).values():
        verdicts = {f.name: f.accepted for f in registry.forms}
        for _, name in checked(registry, values):
            if not verdicts.get(name, registry.accepts(name)):
                return True
    return False


def dests() -> tuple[str, ...]:
    """The options whose values a registry may check, and those that switch it on or off
    (a registry's key is its flag's dest, except the KV connector's: a JSON key only)."""
    places = {*PLUGINS, *PLUGINS.values(), *OPTIONS, "attention_config.backend"}
    out = {p.partition(".")[0] for p in places} | {o[1] for o in OPTIONS.values() if o[1]}
    return tuple(sorted(out - {"kv_connector"}))
