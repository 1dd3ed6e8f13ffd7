#!/usr/bin/env python3
"""Record, per vLLM release, the names its start-up checks look up in a registry (issue 43).

A name that argparse takes as a plain string (``--reasoning-parser``, ``--attention-backend``,
``--quantization``, ``--tool-call-parser``, ``--load-format``, or a key inside a JSON-valued
option: ``--kv-transfer-config``'s ``kv_connector``, ``--attention-config``'s ``backend``,
``--structured-outputs-config``'s ``reasoning_parser``) is looked up in a registry of that
release when `vllm serve` starts, and an unknown one stops the pod after the image pull. The
main recording (``extract.py``) cannot see every such refusal: 0.13-0.19 look a reasoning
parser up only when the API server builds its chat handler (after ``create_engine_config``),
0.20+ load the model's tokenizer first, which the config-only stand-in has not, a load
format is looked up when a worker loads the weights, a KV connector (before 0.33) when the
engine core's scheduler builds it. So this
stage, its own recording, calls the lookup function each check calls, in the release's own
code, on a few names per registry: valid ones and near misses derived from them (another
case, ``-`` for ``_``, one character less or more), ``auto`` and ``bogus``. Which checks
run at start and what they consult (read from each release's code):

- ``reasoning_parser``: ``ReasoningParserManager.get_reasoning_parser`` (``vllm.reasoning``;
  ``StructuredOutputsConfig`` 0.11.1-0.12, the chat handler 0.13+, ``ReasoningConfig`` 0.20+;
  0.10.2-0.11.0 gave argparse the names as choices);
- ``tool_call_parser``: ``ToolParserManager.get_tool_parser`` (``validate_api_server_args``
  and the chat handler, only with ``--enable-auto-tool-choice``);
- ``quantization``: ``get_quantization_config`` (``ModelConfig._verify_quantization``
  consults the same ``QUANTIZATION_METHODS``);
- ``attention_backend``: ``AttentionConfig.validate_backend_before`` where it exists (the
  converter ``create_engine_config`` reuses), else the backend enum ``EngineArgs`` indexes;
- ``load_format``: ``LoadConfig`` (it lower-cases the name: ``__post_init__`` 0.10.2-0.11.0,
  a validator 0.11.1+), then
  ``get_model_loader`` (``_LOAD_FORMAT_TO_MODEL_LOADER``), as the worker does;
- ``kv_connector``: ``KVConnectorFactory.get_connector_class`` on a ``KVTransferConfig``
  (the scheduler's ``create_connector`` at start; ``VllmConfig`` in 0.33).

Each registry also records its ``places``: the option dest, or ``dest.key`` inside a JSON
option, where this release's command line gives it a name (read from ``arg_utils.py`` and
the config classes' fields: ``--attention-config`` 0.13+, ``--structured-outputs-config``'s
``reasoning_parser`` 0.11.1+). A registered name whose own import fails on this CPU-only
machine (a missing optional package) is recorded as accepted, with the import error.

Run by people, never by CI, in the recording environment (``setup-env.sh``) on a release's
unpacked Python sources; it imports only the registries' modules (seconds per release)::

    hack/vllm-flags/classes_stage.py --python /work/tmp/vllm-flags-env/bin/python \
        --src-root DIR 0.22.0 0.33.0      # DIR/0.22.0/vllm/... : the wheel's sources

It writes ``operator/vllm_operator/engine/flags/names/vllm-X.Y.Z.json``, a file of its own
beside the release's table (sorted, no timestamps or addresses: a re-run reproduces it byte
for byte), so that re-recording either stage leaves the other's file untouched.
"""

# ruff: noqa: PLC0415
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from extract import render  # the same layout as the main table: sorted, one form per line

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "operator" / "vllm_operator" / "engine" / "flags" / "names"
FORMAT = 2  # 2: each registry's places
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_MAX_MESSAGE = 600


def _inner_file(out: Path, src: Path) -> Path:
    """Where the inner run leaves its result (read and removed by the outer one)."""
    return out / f".classes-stage-{src.name}.json"


def near_misses(name: str) -> list[str]:
    """Names one slip away from ``name``: another case, the other separator, one
    character less, one more."""
    out = [name.upper(), name.lower(), name.capitalize(), name[:-1], name + "x"]
    if "_" in name:
        out.append(name.replace("_", "-"))
    if "-" in name:
        out.append(name.replace("-", "_"))
    return [n for n in dict.fromkeys(out) if n and n != name]


def _force_cpu() -> None:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    with contextlib.suppress(Exception):
        from vllm import platforms
        from vllm.platforms.cpu import CpuPlatform

        CpuPlatform.import_kernels = classmethod(lambda cls: None)  # type: ignore[assignment]
        platforms._current_platform = CpuPlatform()  # type: ignore[attr-defined]


def _listed(manager: Any, eager: str) -> set[str]:
    """Every name the manager resolves: registered ones and lazily registered ones."""
    names = set(getattr(manager, eager, {})) | set(getattr(manager, "lazy_parsers", {}))
    if hasattr(manager, "list_registered"):
        names |= set(manager.list_registered())
    return names


def _reasoning() -> tuple[list[str], Callable[[str], Any], str] | None:
    try:
        from vllm.reasoning import ReasoningParserManager as m
    except Exception:
        return None
    names = _listed(m, "reasoning_parsers")
    where = "vllm.reasoning.ReasoningParserManager.get_reasoning_parser"
    return sorted(set(names)), m.get_reasoning_parser, where


def _tool() -> tuple[list[str], Callable[[str], Any], str] | None:
    for module in ("vllm.tool_parsers", "vllm.entrypoints.openai.tool_parsers"):
        try:
            m = __import__(module, fromlist=["ToolParserManager"]).ToolParserManager
        except Exception:
            continue
        names = _listed(m, "tool_parsers")
        return sorted(set(names)), m.get_tool_parser, f"{module}.ToolParserManager.get_tool_parser"
    return None


def _quantization() -> tuple[list[str], Callable[[str], Any], str] | None:
    try:
        from vllm.model_executor.layers import quantization as q
    except Exception:
        return None
    where = "vllm.model_executor.layers.quantization.get_quantization_config"
    return sorted(q.QUANTIZATION_METHODS), q.get_quantization_config, where


def _attention() -> tuple[list[str], Callable[[str], Any], str] | None:
    with contextlib.suppress(Exception):
        from vllm.config.attention import AttentionConfig

        check = AttentionConfig.validate_backend_before
        enum = _backend_enum()
        if enum is not None:
            where = "vllm.config.attention.AttentionConfig.validate_backend_before"
            return sorted(enum.__members__), check, where
    enum = _backend_enum()
    if enum is None:
        return None
    return sorted(enum.__members__), lambda name: enum[name], f"{enum.__module__}.{enum.__name__}"


def _backend_enum() -> Any:
    for module, name in (
        ("vllm.v1.attention.backends.registry", "AttentionBackendEnum"),
        ("vllm.attention.backends.registry", "AttentionBackendEnum"),
        ("vllm.attention.backends.registry", "_Backend"),
        ("vllm.platforms.interface", "_Backend"),
    ):
        with contextlib.suppress(Exception):
            return getattr(__import__(module, fromlist=[name]), name)
    return None


def _registered_only(names: list[str], check: Callable[[str], Any]) -> Callable[[str], Any]:
    """``check``, where a registered name's own failure (its module does not import on this
    CPU-only recording machine, a loader wants more settings) is not the lookup's refusal:
    it is raised as a RuntimeError, which ``_verdict`` records as accepted."""

    def run(name: str, converted: str | None = None) -> Any:
        if (converted if converted is not None else name) not in names:
            return check(name)
        try:
            return check(name)
        except Exception as exc:
            raise RuntimeError(_message(exc)) from None

    return run


def _kv_connector() -> tuple[list[str], Callable[[str], Any], str] | None:
    try:
        from vllm.config.kv_transfer import KVTransferConfig
        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory as f
    except Exception:
        return None
    names = sorted(getattr(f, "_registry", {}))

    def check(name: str) -> Any:  # what the scheduler's create_connector runs at start
        return f.get_connector_class(KVTransferConfig(kv_connector=name, kv_role="kv_both"))

    where = "KVConnectorFactory.get_connector_class"
    return names, _registered_only(names, check), where


def _load_format() -> tuple[list[str], Callable[[str], Any], str] | None:
    try:
        from vllm.config.load import LoadConfig
        from vllm.model_executor import model_loader as m
    except Exception:
        return None
    names = sorted(getattr(m, "_LOAD_FORMAT_TO_MODEL_LOADER", {}))
    guarded = _registered_only(names, lambda name: m.get_model_loader(LoadConfig(load_format=name)))

    def check(name: str) -> Any:  # LoadConfig's own conversion first (lower case)
        return guarded(name, str(LoadConfig(load_format=name).load_format))

    where = "vllm.model_executor.model_loader.get_model_loader"
    return names, check, where


def _arg_utils(src: Path) -> str:
    return (src / "vllm" / "engine" / "arg_utils.py").read_text(encoding="utf-8")


def _field_of(src: Path, module: str, field: str) -> bool:
    """Whether ``vllm/config/<module>.py`` declares the config field ``field``."""
    path = src / "vllm" / "config" / f"{module}.py"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    return re.search(rf"^    {field}: ", text, re.MULTILINE) is not None


def places(key: str, src: Path) -> list[str]:
    """Where a `vllm serve` command line gives this registry a name, in this release: an
    option's dest, or ``dest.key`` for a key of a JSON-valued option (read from the
    release's ``EngineArgs`` parser and config classes)."""
    flags = _arg_utils(src)
    out = []
    if key == "attention_backend":
        out += ["attention_backend"] if '"--attention-backend"' in flags else []
        if '"--attention-config"' in flags and _field_of(src, "attention", "backend"):
            out.append("attention_config.backend")
    elif key == "reasoning_parser":
        out.append("reasoning_parser")
        if '"--structured-outputs-config"' in flags and _field_of(
            src, "structured_outputs", "reasoning_parser"
        ):
            out.append("structured_outputs_config.reasoning_parser")
    elif key == "kv_connector":
        out += ["kv_transfer_config.kv_connector"] if '"--kv-transfer-config"' in flags else []
    else:
        out.append(key)
    return out


REGISTRIES: dict[str, Callable[[], tuple[list[str], Callable[[str], Any], str] | None]] = {
    "attention_backend": _attention,
    "kv_connector": _kv_connector,
    "load_format": _load_format,
    "quantization": _quantization,
    "reasoning_parser": _reasoning,
    "tool_call_parser": _tool,
}


def _message(exc: BaseException) -> str:
    text = _ADDRESS.sub("", f"{type(exc).__name__}: {exc}")
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "..."


def _verdict(check: Callable[[str], Any], name: str) -> dict[str, Any]:
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            check(name)
    except (KeyError, ValueError) as exc:  # the lookup's own refusal
        return {"verdict": "refused", "message": _message(exc)}
    except Exception as exc:  # the name is registered, its module does not import here
        return {"verdict": "accepted", "import_error": _message(exc)}
    return {"verdict": "accepted"}


def record(src: Path) -> dict[str, Any]:
    """The registries and the verdicts of their forms (run inside the environment)."""
    _force_cpu()
    registries: dict[str, Any] = {}
    forms: list[dict[str, Any]] = []
    for key, find in REGISTRIES.items():
        if not places(key, src):
            continue
        found = find()
        if found is None:
            continue
        names, check, where = found
        if not names:
            continue
        registries[key] = {"names": names, "check": where, "places": places(key, src)}
        samples = sorted({names[0], names[len(names) // 2], names[-1]})
        tried = [*samples, "auto", "bogus", *(n for s in samples[:2] for n in near_misses(s))]
        for name in dict.fromkeys(tried):
            forms.append({"registry": key, "name": name, **_verdict(check, name)})
    forms.sort(key=lambda f: (f["registry"], f["name"]))
    return {"format": FORMAT, "registries": registries, "forms": forms}


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
        # to a file: some releases print to stdout while their modules import
        doc = record(args.inner)
        _inner_file(args.out, args.inner).write_text(json.dumps(doc))
        return
    if not args.python or not args.src_root:
        ap.error("--python and --src-root are needed")
    args.out.mkdir(parents=True, exist_ok=True)
    out = str(args.out.resolve())
    for version in args.versions:
        started = time.monotonic()
        src = (args.src_root / version).resolve()
        env = dict(os.environ, PYTHONPATH=str(src), VLLM_TARGET_DEVICE="cpu")
        inner = _inner_file(args.out.resolve(), src)
        inner.unlink(missing_ok=True)
        proc = subprocess.run(
            [args.python, str(Path(__file__).resolve()), "--inner", str(src), "--out", out],
            cwd=src,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
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
