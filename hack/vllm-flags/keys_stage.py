#!/usr/bin/env python3
"""Record, per vLLM release, which keys and value types its JSON-valued flags take (issue 43).

``--compilation-config``, ``--kv-transfer-config``, ``--structured-outputs-config``,
``--attention-config`` and every other option whose value is a config dataclass as JSON are
converted by argparse with the option's own ``type=`` (``parse_dataclass``:
``TypeAdapter(cls).validate_json``, after the ``1k`` expansion from 0.22): a key the class
lacks (where the class forbids extra keys: pydantic ``extra="forbid"`` from vLLM's
``@config`` decorator in the later releases; a plain dataclass ignores it) or a value of a
type the field's annotation refuses stops ``vllm serve`` with exit 2 after the image pull.

This stage builds the release's real parser (vLLM's ``main()``, as ``dump_parser`` does),
and for each such option generates forms from the config class itself: per field, the
field with its default value, a near-miss key (the name one character short, or with ``-``
for ``_``), a value of another JSON type than the field's schema takes; plus an unknown
key. Each form goes through **the option's own converter** (the ``type=`` argparse calls,
so the same code path `vllm serve` takes); the verdict (``accepted``/``refused``) and
vLLM's message are recorded. Run by people, never by CI, in the recording environment
(``setup-env.sh``), on a release's unpacked Python sources::

    hack/vllm-flags/keys_stage.py --python /work/tmp/vllm-flags-env/bin/python \
        --src-root DIR 0.22.0 0.33.0      # DIR/0.22.0/vllm/... : the wheel's sources

It writes ``operator/vllm_operator/engine/flags/keys/vllm-X.Y.Z.json`` (sorted, no
addresses: a re-run reproduces it byte for byte), beside the release's main table, which it
never touches.
"""

# ruff: noqa: PLC0415
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from extract import render  # the same layout as the main table: sorted, one form per line

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "operator" / "vllm_operator" / "engine" / "flags" / "keys"
FORMAT = 1
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_TAIL = re.compile(r"\s*\[type=[^\]]*\]")
_MAX_MESSAGE = 600
UNKNOWN_KEY = "vllm_flags_no_such_key"
# values of each JSON type, tried in this order for a wrong-typed value
_CANDIDATES: tuple[tuple[str, Any], ...] = (
    ("string", "vllm_flags_text"),
    ("object", {"vllm_flags": 1}),
    ("array", [1]),
    ("number", 1.5),
)


def _inner_file(out: Path, src: Path) -> Path:
    return out / f".keys-stage-{src.name}.json"


def near_miss(name: str, fields: set[str]) -> str:
    """A key one slip from ``name`` that is not itself a field: ``-`` for ``_``, else the
    name one character short, else one character longer."""
    for candidate in (name.replace("_", "-"), name[:-1], name + "x"):
        if candidate and candidate != name and candidate not in fields:
            return candidate
    return name + "_x"


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        return root.get("$defs", {}).get(schema["$ref"].split("/")[-1], {})
    return schema


def _kinds(schema: Any, root: dict[str, Any], depth: int = 0) -> set[str] | None:
    """The JSON types a field's schema takes; None: any (no type said)."""
    schema = _resolve(schema, root)
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "enum" in schema or "const" in schema:
        return set()  # only its members: any text outside them is wrong-typed
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list):
        found: set[str] = set()
        for branch in branches:
            kinds = _kinds(branch, root, depth + 1)
            if kinds is None:
                return None
            found |= kinds
        return found
    kind = schema.get("type")
    if isinstance(kind, str):
        return {"number", "integer"} if kind in ("number", "integer") else {kind}
    if isinstance(kind, list):
        return {str(k) for k in kind}
    return None


def wrong_value(schema: Any, root: dict[str, Any]) -> Any:
    """A value of a JSON type the field's schema does not take (text where none is said)."""
    kinds = _kinds(schema, root)
    for kind, value in _CANDIDATES:
        if kinds is None or kind not in kinds:
            return value
    return None


def _jsonable_default(field: Any) -> tuple[bool, Any]:
    default = field.default
    if default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:
        with contextlib.suppress(Exception):
            default = field.default_factory()
    if default is dataclasses.MISSING or default is None:
        return False, None
    if hasattr(default, "value") and not isinstance(default, (bool, int, float, str)):
        default = default.value  # an enum member: its value is what JSON carries
    try:
        text = json.dumps(default, sort_keys=True)
    except (TypeError, ValueError):
        return False, None
    return len(text) <= 200, default


def _message(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("For further information")]
    text = _ADDRESS.sub("", _TAIL.sub("", " / ".join(lines)))
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "..."


def _verdict(convert: Any, text: str) -> dict[str, Any]:
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            convert(text)
    except Exception as exc:  # argparse turns any of these into "error: argument ..."
        return {"verdict": "refused", "message": _message(exc)}
    return {"verdict": "accepted"}


def _forms(cls: Any, convert: Any) -> tuple[list[str], list[dict[str, Any]]]:
    from pydantic import TypeAdapter

    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    try:
        root = TypeAdapter(cls).json_schema()
    except Exception:
        root = {}
    props = root.get("properties", {}) if isinstance(root, dict) else {}
    names = set(fields)
    tried: list[tuple[str, str, dict[str, Any]]] = [("extra", UNKNOWN_KEY, {UNKNOWN_KEY: 1})]
    for name in sorted(fields):
        ok, default = _jsonable_default(fields[name])
        if ok:
            tried.append(("default", name, {name: default}))
        tried.append(("near_miss", name, {near_miss(name, names): 1}))
        tried.append(("wrong_type", name, {name: wrong_value(props.get(name, {}), root)}))
    forms = []
    for kind, name, value in tried:
        text = json.dumps(value, sort_keys=True)
        forms.append({"kind": kind, "key": name, "value": text, **_verdict(convert, text)})
    return sorted(names), forms


def model_validators(cls: Any, values: list[dict[str, Any]]) -> dict[str, bool]:
    """vLLM's "before" model validators of ``cls`` and whether each hands every probed
    value on as it got it (the same object: it only refuses, it converts nothing)."""
    decorators = getattr(cls, "__pydantic_decorators__", None)
    if decorators is None:
        return {}
    found = {}
    for name, dec in sorted(decorators.model_validators.items()):
        if dec.info.mode not in ("before", "wrap"):
            continue
        same = dec.info.mode == "before"
        for value in values if same else ():
            sink = io.StringIO()
            try:
                with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    same = getattr(cls, name)(value) is value
            except Exception:  # a refusal, not a conversion
                continue
            if not same:
                break
        found[name] = same
    return found


# a sample of each JSON type, handed to a field validator (two texts: a validator that
# upper-cases or looks a name up does not hand both on as they came)
_SAMPLES: tuple[tuple[str, Any], ...] = (
    ("array", [1]),
    ("boolean", True),
    ("integer", 1),
    ("null", None),
    ("number", 1.5),
    ("object", {"vllm_flags": 1}),
    ("string", "vllm_flags_text"),
    ("string", "VLLM_FLAGS_TEXT"),
)


def _hands_on(validator: Any, value: Any) -> bool:
    """Whether ``validator`` returns ``value`` itself. A refusal counts as not handed on:
    the validator decides values of that type itself (a name it looks up, say)."""
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return bool(validator(value) is value)
    except Exception:
        return False


def converted_first(cls: Any) -> dict[str, list[str]]:
    """The fields a "before"/"plain" field validator of vLLM's sees before pydantic's type
    check ("*": every field), each with the JSON types every such validator hands on
    unchanged (probed with a sample of each): a value of those types meets the field's
    schema as given, the others are converted first."""
    decorators = getattr(cls, "__pydantic_decorators__", None)
    found: dict[str, set[str]] = {}
    for name, dec in decorators.field_validators.items() if decorators is not None else ():
        if dec.info.mode not in ("before", "plain"):
            continue
        validator = getattr(cls, name)
        kept = set() if dec.info.mode == "plain" else {
            kind for kind, _ in _SAMPLES
            if all(_hands_on(validator, v) for k, v in _SAMPLES if k == kind)
        }  # fmt: skip
        for field in dec.info.fields:
            found[field] = found.get(field, kept) & kept
    return {k: sorted(v) for k, v in sorted(found.items())}


def record(src: Path) -> dict[str, Any]:
    """The JSON-valued options' keys and the verdicts of their forms (inside the env)."""
    sys.path.insert(0, str(HERE))
    import dump_parser

    top = dump_parser.build_top_parser()
    serve = dump_parser._serve_parser(top)
    options: dict[str, Any] = {}
    forms: list[dict[str, Any]] = []
    for action in serve._actions:
        if "parse_dataclass" not in dump_parser._describe_type(action.type):
            continue
        cls = dump_parser._config_class(action.type)
        if cls is None or not dataclasses.is_dataclass(cls):
            continue
        flag = max(action.option_strings, key=len)
        keys, found = _forms(cls, action.type)
        options[action.dest] = {"flag": flag, "class": cls.__name__, "keys": keys}
        probes = [json.loads(f["value"]) for f in found]
        # name -> whether it hands the value on unchanged
        options[action.dest]["model_validators"] = model_validators(cls, probes)
        options[action.dest]["converted_first"] = converted_first(cls)
        forms += [{"option": action.dest, **f} for f in found]
    forms.sort(key=lambda f: (f["option"], f["key"], f["kind"], f["value"]))
    return {"format": FORMAT, "options": options, "forms": forms}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("versions", nargs="*", help="vLLM releases, e.g. 0.22.0")
    ap.add_argument("--python", help="python of the env made by setup-env.sh")
    ap.add_argument("--src-root", type=Path, help="DIR/X.Y.Z/vllm: each release's sources")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--inner", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner is not None:  # inside the environment, PYTHONPATH=the sources
        doc = record(args.inner)
        _inner_file(args.out, args.inner).write_text(json.dumps(doc))
        return
    if not args.python or not args.src_root:
        ap.error("--python and --src-root are needed")
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out.resolve()
    for version in args.versions:
        started = time.monotonic()
        src = (args.src_root / version).resolve()
        work = out / f".keys-work-{version}"  # whatever vLLM writes while it imports
        work.mkdir(exist_ok=True)
        env = dict(os.environ, PYTHONPATH=str(src), VLLM_TARGET_DEVICE="cpu")
        env.update(VLLM_LOGGING_LEVEL="ERROR", VLLM_NO_USAGE_STATS="1")
        inner = _inner_file(out, src)
        inner.unlink(missing_ok=True)
        proc = subprocess.run(
            [args.python, str(Path(__file__).resolve()), "--inner", str(src), "--out", str(out)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        subprocess.run(["rm", "-rf", str(work)], check=False)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-3000:])
            raise SystemExit(f"recording vllm {version} failed (exit {proc.returncode})")
        doc = {"vllm": version, **json.loads(inner.read_text())}
        inner.unlink()
        (args.out / f"vllm-{version}.json").write_text(render(doc))
        took = time.monotonic() - started
        print(f"{version}: {len(doc['forms'])} forms, {took:.1f} s", flush=True)


if __name__ == "__main__":
    main()
