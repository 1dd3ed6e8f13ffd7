"""Keys inside JSON-valued flags: the words of a refusal, and the recorded verdicts (issue 43).

A JSON-valued flag (``--compilation-config``, ``--kv-transfer-config``, ...) is converted
by vLLM at argparse time into its config class; where the class refuses a key it lacks
(pydantic ``extra="forbid"``, per release), ``vllm serve`` exits 2 after the image pull.
``argv_values`` decides the refusal from the release's table (``config_keys``,
``config_strict``, ``config_schema``); this module words it the way a person can act on:
the flag, the key, the release, "did you mean" and the keys the release's class takes
(nested ones too: ``pass_config.x`` lists ``PassConfig``'s keys).

It also loads ``engine/flags/keys/vllm-X.Y.Z.json`` (``hack/vllm-flags/keys_stage.py``):
per release, forms generated from each config class (each field with its default, a
near-miss key, a wrong-typed value, an unknown key) and the verdict of the option's own
converter. The tests hold the policy to those verdicts; the policy itself reads only the
main table, so a release without a keys file is checked exactly as before (nothing guessed).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from vllm_operator.engine import flagdata
from vllm_operator.engine.flagdata import Option
from vllm_operator.engine.version import Version

_MAX_LISTED = 40
_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


@dataclass(frozen=True)
class KeyForm:
    """One recorded form: ``flag value`` and what the release's converter said."""

    option: str  # the dest: kv_transfer_config
    flag: str  # --kv-transfer-config
    kind: str  # default | near_miss | wrong_type | extra
    key: str  # the field the form was made from
    value: str  # the JSON text given
    accepted: bool
    message: str


@dataclass(frozen=True)
class KeysRecord:
    """One release's keys file: each JSON-valued option's class and keys, and the forms."""

    classes: dict[str, str]
    keys: dict[str, tuple[str, ...]]
    forms: tuple[KeyForm, ...]
    # per option: field -> the JSON types vLLM's field validators hand on unchanged
    # ("*": every field); None where a model validator converts the whole input first
    handed_on: dict[str, dict[str, frozenset[str]] | None]


def parse(doc: dict[str, Any]) -> KeysRecord:
    options: dict[str, Any] = doc.get("options", {})
    forms = tuple(
        KeyForm(
            option=str(f["option"]),
            flag=str(options[f["option"]]["flag"]),
            kind=str(f["kind"]),
            key=str(f["key"]),
            value=str(f["value"]),
            accepted=f["verdict"] == "accepted",
            message=str(f.get("message", "")),
        )
        for f in doc.get("forms", ())
    )
    return KeysRecord(
        classes={k: str(v["class"]) for k, v in options.items()},
        keys={k: tuple(v["keys"]) for k, v in options.items()},
        forms=forms,
        handed_on={
            k: None
            if not all(v.get("model_validators", {}).values())
            else {f: frozenset(t) for f, t in v["converted_first"].items()}
            for k, v in options.items()
            if "converted_first" in v
        },
    )


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for kind, name in _TYPES:
        if isinstance(value, kind):
            return name
    return "other"


def converted_first(option: Option, value: dict[str, Any], version: Version) -> frozenset[str]:
    """The keys of ``value`` a validator of vLLM's converts before pydantic's type check
    (``config_schema.check`` leaves them out). From the release's keys file: a field
    validator converts a value only of the JSON types it was not seen to hand on unchanged,
    and decides every value where a "wrap" validator sees the field too; a release without
    the file: every field the main table names (``config_custom``)."""
    known = recorded(version)
    fields = known.handed_on.get(option.dest, {}) if known else {}
    if known is None or option.dest not in known.handed_on:
        return option.config_custom
    if fields is None:
        return frozenset({"*"})
    out = set()
    for key, item in value.items():
        kept = [fields[k] for k in (key, "*") if k in fields]
        if kept and key in option.config_wrapped:
            out.add(key)  # a "wrap" validator too (the mode's lets None through): vLLM's
        elif kept and any(_json_type(item) not in types for types in kept):
            out.add(key)
    return frozenset(out)


@cache
def recorded(version: Version) -> KeysRecord | None:
    """The release's keys file, or None where it was not recorded."""
    doc = flagdata.sibling_document("keys", version)
    return None if doc is None else parse(doc)


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
    return schema


def _object_at(root: dict[str, Any], parents: list[str]) -> dict[str, Any] | None:
    """The object schema reached by ``parents`` (field names) from the class's schema;
    through ``anyOf`` (an optional nested config) to its object branch."""
    here: Any = root
    for name in parents:
        props = here.get("properties") if isinstance(here, dict) else None
        if not isinstance(props, dict) or name not in props:
            return None
        here = props[name]
        for branch in [here, *(here.get("anyOf", ()) if isinstance(here, dict) else ())]:
            ref = branch.get("$ref") if isinstance(branch, dict) else None
            found = _resolve(branch, root)
            if isinstance(found, dict) and isinstance(found.get("properties"), dict):
                title = str(ref).rsplit("/", 1)[-1] if ref else found.get("title", "")
                here = {**found, "title": title}
                break
    return here if isinstance(here, dict) else None


def valid_keys(option: Option, parents: list[str], version: Version) -> tuple[str, tuple[str, ...]]:
    """The class name and the keys it takes at ``parents`` (top level: ``[]``)."""
    schema = option.config_schema
    if not parents:
        known = recorded(version)
        title = known.classes.get(option.dest, "") if known else ""
        title = title or (str(schema.get("title", "")) if schema else "")
        keys = option.config_keys or frozenset((schema or {}).get("properties", {}))
        return title, tuple(sorted(keys))
    found = _object_at(schema, parents) if schema else None
    if not found:
        return "", ()
    return str(found.get("title", "")), tuple(sorted(found.get("properties", {})))


def unknown_key(option: Option, path: str, version: Version) -> str:
    """Why ``path`` (``key`` or ``pass_config.key``) is refused, and what to write instead."""
    *parents, key = path.split(".")
    title, keys = valid_keys(option, parents, version)
    whose = f"{title} of vLLM {version}" if title else f"vLLM {version}'s config class"
    where = f"{'.'.join(parents)} of " if parents else ""
    text = f"unknown key {key!r} in {where}{option.long_name} ({whose} refuses keys it lacks)"
    # Here, not at the top: only a refusal needs it, and the simulator starts without api/.
    from vllm_operator.api.text import did_you_mean  # noqa: PLC0415

    close = did_you_mean(key, keys, quote=True)
    if close:
        text += f"; {close}"
    if keys:
        shown = ", ".join(keys[:_MAX_LISTED]) + (", ..." if len(keys) > _MAX_LISTED else "")
        text += f"; valid keys: {shown}"
    return text


def decided_by_vllm(option: Option, key: str, value: Any, version: Version) -> bool:
    """Whether the policy leaves the type of ``value`` at ``key`` to vLLM: a validator of
    vLLM's decides it first (a name it looks up, a mode name), or the class's schema was
    not recorded (``quantization_config`` 0.33: a plain validator pydantic cannot describe)."""
    skip = converted_first(option, {key: value}, version)
    return option.config_schema is None or key in skip or "*" in skip
