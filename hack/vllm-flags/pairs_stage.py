#!/usr/bin/env python3
"""Record, per vLLM release, one setting given twice through two spellings (issue 43, class 3).

A command line can say one thing twice: a dedicated flag and the same key inside a
JSON-valued option (``--attention-backend X`` with ``--attention-config '{"backend": Y}'``),
or one option through two spellings (``-tp 2 --tensor-parallel-size 4``, ``-cc`` with
``--compilation-config.mode``). vLLM either refuses the pair (0.13+: "attention_backend and
attention_config.backend are mutually exclusive", raised in ``create_engine_config``) or
lets one of them win without a word. Which, differs per release and per pair, so this
stage finds the pairs in each release's own code and runs them through it:

- **flag_and_key**: the candidates are each option whose dest is a field of a JSON-valued
  option's config class, directly (``moe_backend`` in ``KernelConfig``), after the JSON
  option's stem (``attention_backend`` -> ``AttentionConfig.backend``, ``spec_model`` ->
  ``SpeculativeConfig.model``), or where ``EngineArgs``' code puts ``self.<dest>`` and the
  field's name in one tuple or one assignment (``("--spec-tokens",
  "num_speculative_tokens", self.spec_tokens)``, read with ``ast`` from the release's
  ``arg_utils.py``). Each candidate is run through vLLM's parser, ``EngineArgs.from_cli_args``
  and ``create_engine_config`` on the config-only stand-in model (``engine_stage``), four
  times: the flag alone, the key alone with the flag's value, the key alone with another
  value, both. Verdict: ``refused`` (both together refused, with vLLM's words, where neither
  alone is refused so), ``flag`` or ``key`` (accepted; the value that ended in the final
  config's field is the one that spelling gave) or ``neither`` (no interaction seen: not
  the same setting). Values come from the field's type (enum members, ``Literal`` values,
  the option's choices, numbers, lists).
- **spellings**: each option with two or more spellings that take a value, each spelling
  given twice, and each JSON option with a dotted key (``--x-config.key v``) after its
  JSON; parsed by vLLM's own parser (its rewrite of dotted keys included), recording the
  value argparse ended with (the last one, or a merge).

Run by people, never by CI, in the recording environment (``setup-env.sh``) on a release's
unpacked Python sources::

    hack/vllm-flags/pairs_stage.py --python /work/tmp/vllm-flags-env/bin/python \
        --src-root DIR --work WORKDIR 0.22.0 0.33.0   # DIR/0.22.0/vllm/...: the sources

It writes ``operator/vllm_operator/engine/flags/pairs/vllm-X.Y.Z.json`` (sorted, no
addresses: a re-run reproduces it byte for byte), beside the release's table, which it
never touches. One process in the environment imports what every release imports from it
(torch, transformers) once and forks one process per release, whose sources go first on
``sys.path``: a release then costs the import of its own ``vllm`` (compiled from the
``.py`` files) and about 130 quick engine-config builds.
"""

# ruff: noqa: PLC0415
from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import dataclasses
import enum
import io
import json
import os
import subprocess
import sys
import time
import typing
from pathlib import Path
from typing import Any

from extract import render  # the same layout as the main table: sorted, one form per line

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "operator" / "vllm_operator" / "engine" / "flags" / "pairs"
FORMAT = 1
_NUMBERS = (16, 32, 8, 2, 1)
_FLOATS = (0.5, 0.25)


# --- the candidates, from the release's code -------------------------------------------


def _ast_keys(src: Path) -> dict[str, set[tuple[str, str]]]:
    """dest -> (config, name) that ``EngineArgs``' code writes next to ``self.<dest>``:
    string constants in one tuple (config ``*``), ``<config>.<name>`` targets of one
    assignment (config: the local variable's name, e.g. ``attention_config``, what it
    copies, ``so_config = self.structured_outputs_config``, or ``self.<config>``)."""
    tree = ast.parse((src / "vllm" / "engine" / "arg_utils.py").read_text(encoding="utf-8"))
    found: dict[str, set[tuple[str, str]]] = {}

    def selfs(node: ast.AST) -> set[str]:
        return {
            n.attr
            for n in ast.walk(node)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        }

    aliases: dict[str, set[str]] = {}  # so_config = self.structured_outputs_config
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                aliases.setdefault(target.id, set()).update(selfs(node.value))

    def owners(obj: ast.expr) -> set[str]:
        if isinstance(obj, ast.Name) and obj.id != "self":
            return {obj.id} | aliases.get(obj.id, set())
        if isinstance(obj, ast.Attribute) and isinstance(obj.value, ast.Name):
            return {obj.attr} if obj.value.id == "self" else set()
        return set()

    for node in ast.walk(tree):
        names: set[tuple[str, str]] = set()
        if isinstance(node, ast.Tuple):
            names = {
                ("*", e.value)
                for e in node.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
        elif isinstance(node, ast.Assign):
            names = {
                (owner, t.attr)
                for t in node.targets
                if isinstance(t, ast.Attribute)
                for owner in owners(t.value)
            }
        for dest in selfs(node) if names else ():
            found.setdefault(dest, set()).update(names)
    return found


def _vllm_config_classes() -> dict[str, Any]:
    """VllmConfig's field -> its config class (a dataclass), where it has one."""
    from vllm.config import VllmConfig

    out = {}
    hints = _hints(VllmConfig)
    for f in dataclasses.fields(VllmConfig):
        for cls in (hints.get(f.name), *typing.get_args(hints.get(f.name))):
            if isinstance(cls, type) and dataclasses.is_dataclass(cls):
                out[f.name] = cls
    return out


def _json_options(serve: argparse.ArgumentParser) -> dict[str, tuple[argparse.Action, Any]]:
    """JSON-valued options and their config class: the class a ``parse_dataclass``
    converter validates against, or (a plain ``json.loads``) VllmConfig's field of that
    name (``--speculative-config``)."""
    import dump_parser

    fields = _vllm_config_classes()
    out = {}
    for action in serve._actions:
        kind = dump_parser._describe_type(action.type)
        cls = None
        if "parse_dataclass" in kind:
            cls = dump_parser._config_class(action.type)
        elif "loads" in kind:
            cls = fields.get(action.dest)
        if cls is not None and dataclasses.is_dataclass(cls):
            out[action.dest] = (action, cls)
    return out


def _keys_of(dest: str, option: str, fields: set[str], near: set[tuple[str, str]]) -> set[str]:
    stem = option.removesuffix("_config")
    keys = {dest} & fields
    head, _, rest = dest.partition("_")
    if rest in fields and stem.startswith(head):
        keys.add(rest)
    if dest.startswith(stem + "_") and dest[len(stem) + 1 :] in fields:
        keys.add(dest[len(stem) + 1 :])
    return keys | {k for where, k in near if where in ("*", option) and k in fields}


def candidates(
    serve: argparse.ArgumentParser, src: Path
) -> list[tuple[argparse.Action, argparse.Action, Any, str]]:
    """(flag's action, JSON option's action, its config class, key) per candidate pair."""
    near = _ast_keys(src)
    jsons = _json_options(serve)
    out = []
    for dest_j, (action_j, cls) in sorted(jsons.items()):
        fields = {f.name for f in dataclasses.fields(cls)}
        for action in serve._actions:
            d = action.dest
            if not action.option_strings or d in jsons or d == "help":
                continue
            for key in sorted(_keys_of(d, dest_j, fields, near.get(d, set()))):
                out.append((action, action_j, cls, key))
    return out


# --- values from the field's type ------------------------------------------------------


def _hints(cls: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:
        return {f.name: f.type for f in dataclasses.fields(cls)}


def _pool(tp: Any) -> list[Any]:
    """A few valid values of a field type, in a fixed order."""
    origin = typing.get_origin(tp)
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if origin is typing.Literal:
        return [a for a in typing.get_args(tp) if a is not None]
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return [v for a in args for v in _pool(a)]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return list(tp.__members__)
    if tp is bool:
        return [True, False]
    if tp is int:
        return list(_NUMBERS)
    if tp is float:
        return list(_FLOATS)
    if tp is str:
        return ["vllm_flags_a", "vllm_flags_b"]
    if origin is list and args and args[0] is int:
        return [[1, 2], [4]]
    return []


def _spelling(action: argparse.Action) -> str:
    """The option's own long name (``--dest-with-dashes``), else its longest spelling."""
    own = "--" + action.dest.replace("_", "-")
    return own if own in action.option_strings else max(action.option_strings, key=len)


def _flag_argv(action: argparse.Action, value: Any) -> list[str] | None:
    """The flag's spelling with ``value``, or None where the flag cannot say it."""
    spelling = _spelling(action)
    if action.nargs == 0:
        return [spelling] if value is True and action.const is not False else None
    if isinstance(value, list):
        if action.nargs in ("+", "*"):
            return [spelling, *map(str, value)]
        return None
    if isinstance(value, bool):
        return None
    text = str(value)
    if action.choices is not None and text not in action.choices:
        return None
    return [spelling, text]


def _values(action: argparse.Action, cls: Any, key: str) -> tuple[Any, Any] | None:
    """(the flag's value, another value of the key), both from the field's type."""
    pool = list(dict.fromkeys(json.dumps(v) for v in _pool(_hints(cls).get(key))))
    if action.choices is not None:
        pool += [json.dumps(c) for c in action.choices if json.dumps(c) not in pool]
    values = [json.loads(v) for v in pool]
    for first in values:  # not the flag's default: vLLM may treat that as not given
        if _flag_argv(action, first) is None or first == action.default:
            continue
        others = [v for v in values if v != first]
        # the key's value unlike the flag's default too, where the type has a third value
        # (the run with the flag at its default must tell which one ended in the config)
        for other in [v for v in others if v != action.default] + others:
            return first, other
    return None


# --- running a form through vLLM -------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in sorted(value.items())}
    return repr(value)


def _field(config: Any, cls: Any, key: str) -> Any:
    """The final value of ``cls``'s ``key`` inside the built ``VllmConfig``."""
    outer = [getattr(config, f.name, None) for f in dataclasses.fields(config)]
    nested = [
        getattr(o, f.name, None)
        for o in outer
        if dataclasses.is_dataclass(o) and not isinstance(o, type)
        for f in dataclasses.fields(o)
    ]
    for inner in (*outer, *nested):  # VllmConfig's own, then one level down (ModelConfig's)
        if isinstance(inner, cls):
            return {"value": _jsonable(getattr(inner, key, None))}
    return {"value": None, "missing": cls.__name__}


def _run(top: argparse.ArgumentParser, argv: list[str], cls: Any, key: str) -> dict[str, Any]:
    """``vllm serve standin <argv>``: parser, ``from_cli_args``, ``create_engine_config``."""
    import after_parse
    import engine_stage

    sink = io.StringIO()
    try:
        with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
            ns = top.parse_args(["serve", "m", *argv])
    except SystemExit:
        lines = [ln for ln in sink.getvalue().splitlines() if ": error: " in ln]
        return {"verdict": "refused", "stage": "parse", "message": (lines or [""])[0][:600]}
    except Exception as exc:  # vLLM's rewrite raises (0.10.2: "--model" with `vllm serve`)
        return {"verdict": "refused", "stage": "parse", "message": after_parse._message(exc)}
    try:
        config = _build(ns, engine_stage, after_parse._no_platform_hooks)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"verdict": "refused", "stage": "engine", "message": after_parse._message(exc)}
    return {"verdict": "accepted", **_field(config, cls, key)}


def _build(ns: argparse.Namespace, engine_stage: Any, hooks: Any) -> Any:
    from vllm.engine.arg_utils import AsyncEngineArgs

    args = copy.deepcopy(ns)
    args.model = engine_stage.STANDIN
    if hasattr(args, "model_tag"):
        args.model_tag = engine_stage.STANDIN
    sink = io.StringIO()
    quiet = (contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink))
    with hooks(), quiet[0], quiet[1], engine_stage._fresh_env():
        engine_args = AsyncEngineArgs.from_cli_args(args)
        try:
            from vllm.usage.usage_lib import UsageContext

            return engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
        except TypeError as exc:
            if "usage_context" not in str(exc):
                raise
            return engine_args.create_engine_config()


def _winner(both: dict[str, Any], as_flag: dict[str, Any], as_key: dict[str, Any]) -> str:
    """Which spelling's value ended in the field when both were given."""
    if both["verdict"] != "accepted":
        return ""
    got = both.get("value")
    flag_ok = as_flag["verdict"] == "accepted" and as_flag.get("value") == got
    key_ok = as_key["verdict"] == "accepted" and as_key.get("value") == got
    if flag_ok != key_ok:
        return "flag" if flag_ok else "key"
    return "neither"


def _verdict(
    both: dict[str, Any], alone: dict[str, Any], as_flag: dict[str, Any], as_key: dict[str, Any]
) -> str:
    """refused (by the pair: neither alone is refused with these words), other (refused
    for a reason one of them has alone), or the winner (flag | key | neither)."""
    if both["verdict"] == "refused":
        own = {alone.get("message"), as_key.get("message")}
        return "other" if both["message"] in own else "refused"
    return _winner(both, as_flag, as_key)


def flag_and_key(
    top: argparse.ArgumentParser, serve: argparse.ArgumentParser, src: Path
) -> list[dict[str, Any]]:
    """Each candidate pair through vLLM, four times (flag alone, key alone with the flag's
    value, key alone with another value, both)."""
    forms = []
    for action, action_j, cls, key in candidates(serve, src):
        values = _values(action, cls, key)
        if values is None:
            continue
        first, other = values
        flag = _flag_argv(action, first) or []
        option = _spelling(action_j)
        alone = _run(top, flag, cls, key)
        as_flag = _run(top, [option, json.dumps({key: first})], cls, key)
        as_key = _run(top, [option, json.dumps({key: other})], cls, key)
        argv = [*flag, option, json.dumps({key: other})]
        both = _run(top, argv, cls, key)
        verdict = _verdict(both, alone, as_flag, as_key)
        at_default: dict[str, Any] = {}
        default = _flag_argv(action, action.default) if action.default is not None else None
        if default is not None and verdict != "other":
            default_alone = _run(top, default, cls, key)
            as_default = _run(top, [option, json.dumps({key: action.default})], cls, key)
            both_default = _run(top, [*default, option, json.dumps({key: other})], cls, key)
            at_default = {
                "argv": [*default, option, json.dumps({key: other})],
                "flag_value": _jsonable(action.default),
                "verdict": _verdict(both_default, default_alone, as_default, as_key),
                "both": both_default,
            }
        forms.append(
            {
                "kind": "flag_and_key",
                "argv": argv,
                "dest": action.dest,
                "option": action_j.dest,
                "key": key,
                "flag_value": _jsonable(first),
                "key_value": _jsonable(other),
                "flag_default": _jsonable(action.default),
                "verdict": verdict,
                "at_default": at_default,
                "both": both,
                "flag_alone": alone,
                "key_alone": as_key,
                "key_with_flag_value": as_flag,
            }
        )
    return forms


# --- one option, two spellings ---------------------------------------------------------


def _namespace(top: argparse.ArgumentParser, argv: list[str]) -> Any:
    """vLLM's parse of ``vllm serve m <argv>``, or argparse's error line."""
    sink = io.StringIO()
    try:
        with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
            return top.parse_args(["serve", "m", *argv])
    except SystemExit:
        lines = [ln for ln in sink.getvalue().splitlines() if ": error: " in ln]
        return (lines or [""])[0][:600]
    except Exception as exc:  # vLLM's rewrite raises instead of argparse
        return f"{type(exc).__name__}: {exc}"[:600]


def _parsed(top: argparse.ArgumentParser, argv: list[str], dest: str) -> dict[str, Any]:
    ns = _namespace(top, argv)
    if isinstance(ns, str):
        return {"verdict": "refused", "stage": "parse", "message": ns}
    value = getattr(ns, dest, None)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"verdict": "accepted", "kept": _kept(top, value, argv, dest)}
    return {"verdict": "accepted", "value": _jsonable(value)}


def _kept(top: argparse.ArgumentParser, value: Any, argv: list[str], dest: str) -> str:
    """Which of the two JSON values given survived in the parsed config: first, second,
    both (merged) or neither. A key of the first counts as kept only where the second
    alone leaves it otherwise (its default may equal the value given)."""
    given = [json.loads(argv[1]), json.loads(argv[3])]
    if "." in argv[2]:  # a dotted key: --x-config.key VALUE
        given[1] = {argv[2].rsplit(".", 1)[1]: json.loads(argv[3])}
    alone = getattr(_namespace(top, argv[2:]), dest, None)

    def has(config: Any, doc: dict[str, Any]) -> bool:
        return all(_jsonable(getattr(config, k, None)) == _jsonable(v) for k, v in doc.items())

    first = has(value, given[0]) and not has(alone, given[0])
    second = has(value, given[1])
    return {(True, True): "both", (True, False): "first", (False, True): "second"}.get(
        (first, second), "neither"
    )


def _json_values(top: argparse.ArgumentParser, spelling: str, cls: Any) -> list[dict[str, Any]]:
    """Two one-key values the parser accepts for a JSON option, on different keys."""
    hints = _hints(cls)
    out: list[dict[str, Any]] = []
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.name):
        for value in _pool(hints.get(f.name))[:1]:
            if value == f.default:
                continue
            doc = {f.name: value}
            if _parsed(top, [spelling, json.dumps(doc)], "help")["verdict"] == "accepted":
                out.append(doc)
        if len(out) == 2:
            break
    return out


def _two_values(top: argparse.ArgumentParser, action: argparse.Action, cls: Any) -> list[Any]:
    if cls is not None:
        return [json.dumps(v) for v in _json_values(top, _spelling(action), cls)]
    if action.choices is not None:
        return [str(c) for c in list(action.choices)[:2]]
    kind = getattr(action.type, "__name__", "")
    if action.type is int or "int" in kind:
        return ["2", "4"]
    if action.type is float or "float" in kind:
        return ["0.5", "0.25"]
    return ["vllm_flags_a", "vllm_flags_b"]


def spellings(top: argparse.ArgumentParser, serve: argparse.ArgumentParser) -> list[dict[str, Any]]:
    """Each option that takes a value and has two or more spellings (and each JSON
    option, with a dotted key after its JSON): given twice, the value vLLM ends with."""
    jsons = _json_options(serve)
    forms = []
    for action in serve._actions:
        spelled = sorted(action.option_strings)
        is_json = action.dest in jsons
        if action.nargs == 0 or (len(spelled) < 2 and not is_json):
            continue
        values = _two_values(top, action, jsons[action.dest][1] if is_json else None)
        if len(values) < 2:
            continue
        first, second = values[:2]
        tries = [[spelled[0], first, spelled[-1], second], [spelled[-1], first, spelled[0], second]]
        if len(spelled) < 2:
            tries = [[spelled[0], first, spelled[0], second]]
        if is_json:
            key, value = next(iter(json.loads(second).items()))
            tries.append([_spelling(action), first, f"{_spelling(action)}.{key}",
                          json.dumps(value)])  # fmt: skip
        for argv in tries:
            forms.append(
                {
                    "kind": "spellings",
                    "argv": argv,
                    "dest": action.dest,
                    **_parsed(top, argv, action.dest),
                }
            )
    return forms


def record(src: Path) -> dict[str, Any]:
    """Both kinds of forms for the release whose sources are ``src`` (inside the env)."""
    import dump_parser
    import engine_stage

    engine_stage.offline()
    engine_stage.write_standins(Path.cwd())
    top = dump_parser.build_top_parser()
    serve = dump_parser._serve_parser(top)
    forms = flag_and_key(top, serve, src) + spellings(top, serve)
    forms.sort(key=lambda f: (f["kind"], f["dest"], json.dumps(f["argv"])))
    return {"format": FORMAT, "forms": forms}


# Modules of the environment (not of a release) that every release imports first, through
# ``vllm.env_override``: imported once, before the per-release processes fork, they take
# most of the CPU a release's recording cost (about 10 s of 12 with PYTHONDONTWRITEBYTECODE).
_SHARED = ("torch", "torch._dynamo", "torch._inductor.lowering", "transformers", "sympy")


def _record_all(versions: list[str], src_root: Path, work_root: Path, out: Path) -> None:
    """Inside the environment: one forked process per release, its sources first on
    ``sys.path``; prints each release's forms and CPU seconds."""
    # the environment the per-release subprocesses had (the CPU platform, the hub offline)
    # before anything reads it at import: huggingface_hub reads HF_HUB_OFFLINE only then
    import dump_parser  # noqa: F401  (sets it at import)
    import engine_stage

    engine_stage.offline()
    for module in _SHARED:
        with contextlib.suppress(Exception):
            __import__(module)
    for version in versions:
        src, work = (src_root / version).resolve(), (work_root / version).resolve()
        work.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child records one release and leaves without cleanup
            code = 1
            try:
                os.chdir(work)
                sys.path.insert(0, str(src))
                os.environ["PYTHONPATH"] = os.pathsep.join([str(src), str(HERE)])
                doc = {"vllm": version, **record(src)}
                (out / f"vllm-{version}.json").write_text(render(doc))
                code = 0
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                os._exit(code)
        _, status, usage = os.wait4(pid, 0)
        cpu = usage.ru_utime + usage.ru_stime
        took = time.monotonic() - started
        if status != 0:
            raise SystemExit(f"recording vllm {version} failed (status {status})")
        forms = json.loads((out / f"vllm-{version}.json").read_text())["forms"]
        kinds = {k: sum(f["kind"] == k for f in forms) for k in ("flag_and_key", "spellings")}
        print(f"{version}: {kinds}, {took:.1f} s wall, {cpu:.1f} s CPU", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("versions", nargs="*", help="vLLM releases, e.g. 0.22.0")
    ap.add_argument("--python", help="python of the env made by setup-env.sh")
    ap.add_argument("--src-root", type=Path, help="DIR/X.Y.Z/vllm: each release's sources")
    ap.add_argument("--work", type=Path, help="a writable directory for the stand-in models")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.src_root or not args.work:
        ap.error("--src-root and --work are needed")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.inner:  # inside the environment
        _record_all(args.versions, args.src_root, args.work, args.out.resolve())
        return
    if not args.python:
        ap.error("--python is needed")
    env = dict(os.environ, PYTHONPATH=str(HERE), VLLM_TARGET_DEVICE="cpu")
    proc = subprocess.run(
        [args.python, str(Path(__file__).resolve()), "--inner", *args.versions,
         "--src-root", str(args.src_root.resolve()), "--work", str(args.work.resolve()),
         "--out", str(args.out.resolve())],
        env=env, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(proc.returncode)


if __name__ == "__main__":
    main()
