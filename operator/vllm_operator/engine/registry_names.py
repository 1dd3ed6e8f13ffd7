"""Names vLLM looks up in a registry when it starts: refused where the release lacks them.

``--reasoning-parser``, ``--attention-backend``, ``--quantization`` and
``--tool-call-parser`` (with ``--enable-auto-tool-choice``) are plain strings to argparse;
`vllm serve` looks each one up in a registry of that release before it serves, and an
unknown name stops the pod after the image pull (issue 43). Which names exist differs per
release. ``hack/vllm-flags/classes_stage.py`` records, per release, each registry's names
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
from importlib import resources
from typing import Any

from vllm_operator.engine.version import Version

# registry -> the option whose value it checks, the words for one of its names, and the
# switch without which vLLM never looks the name up ("" where it always does)
OPTIONS: dict[str, tuple[str, str, str]] = {
    "attention_backend": ("attention_backend", "attention backend", ""),
    "quantization": ("quantization", "quantization method", ""),
    "reasoning_parser": ("reasoning_parser", "reasoning parser", ""),
    "tool_call_parser": ("tool_call_parser", "tool call parser", "enable_auto_tool_choice"),
}
# a plugin file vLLM imports at start may register more names: not checked then
PLUGINS = {"reasoning_parser": "reasoning_parser_plugin", "tool_call_parser": "tool_parser_plugin"}
_LISTED = 60  # at most this many valid names in a message


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
        )
    return out


def _upper(names: frozenset[str]) -> set[str]:
    return {n.upper() for n in names}


@cache
def recorded(version: Version) -> dict[str, Registry] | None:
    """The recorded registries of exactly ``version``; None where it was not recorded."""
    name = f"vllm-{version.major}.{version.minor}.{version.patch}.json"
    where = resources.files("vllm_operator.engine.flags.names").joinpath(name)
    if not where.is_file():
        return None
    doc: dict[str, Any] = json.loads(where.read_text("utf-8"))
    return parse(doc)


def _vllm_words(registry: Registry, name: str) -> str:
    """The recorded refusal of ``bogus`` with ``name`` in its place (vLLM's own words)."""
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


def refusals(
    version: Version, values: dict[str, Any], already: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """``(dest, reason)`` for each registry-checked value ``version`` would refuse.

    ``values``: the last value of each option the command line set (by dest); ``already``:
    dests another check refused already (they get no second refusal).
    """
    found = recorded(version)
    if found is None:
        return []
    out = []
    for key, registry in found.items():
        dest, words, switch = OPTIONS.get(key, ("", "", ""))
        value = values.get(dest)
        if not dest or dest in already or not isinstance(value, str) or not value:
            continue
        if switch and not values.get(switch):
            continue
        if values.get(PLUGINS.get(key, "")) or registry.accepts(value):
            continue
        flag = "--" + dest.replace("_", "-")
        said = _vllm_words(registry, value)
        vllm = f" ({registry.check}: {said})" if said else f" ({registry.check})"
        out.append(
            (
                dest,
                f"{flag} {value!r}: vLLM {version} registers no {words} of that name{vllm}; "
                + hint(registry, value),
            )
        )
    return out


def argv_of(registry: str, name: str) -> list[str]:
    """The `vllm serve` arguments that make vLLM look ``name`` up in ``registry``."""
    dest, _, switch = OPTIONS[registry]
    flag = ["--" + switch.replace("_", "-")] if switch else []
    return [*flag, "--" + dest.replace("_", "-"), name]


def lookup_refuses(version: Version, dest: str, value: object) -> bool | None:
    """The recorded verdict of the release's lookup on exactly ``value`` for ``dest``:
    True refused, False accepted, None where that value was not recorded."""
    for registry in (recorded(version) or {}).values():
        if OPTIONS.get(registry.key, ("",))[0] != dest:
            continue
        for form in registry.forms:
            if form.name == value:
                return not form.accepted
    return None


def lookup_refused(version: Version, values: dict[str, Any]) -> bool:
    """Whether the release's lookup, as recorded, refused one of the names ``values``
    carries (with the switch that makes vLLM look it up): what the main recording's stages
    could not see (issue 43)."""
    for dest, _, switch in OPTIONS.values():
        if switch and not values.get(switch):
            continue
        if lookup_refuses(version, dest, values.get(dest)):
            return True
    return False


def dests() -> tuple[str, ...]:
    """The options whose values a registry checks, and the switches that make it look."""
    return tuple(sorted({d for o in OPTIONS.values() for d in (o[0], o[2]) if d}))
