#!/usr/bin/env python3
"""Record the `vllm serve` flags of vLLM releases from their own parser (run by people, not CI).

For each release: download its wheel from the package index (``pip download --no-deps``),
hash it, unpack its Python sources (the compiled kernels are not needed to build a parser)
into a throw-away directory, build the `serve` parser with vLLM's own ``main()`` in an
environment whose dependencies import (see ``setup-env.sh``), and write
``operator/vllm_operator/engine/flags/vllm-X.Y.Z.json``. Downloads are deleted after each
release. The output is sorted and carries no timestamps, so re-running the command for a
release reproduces its committed file byte for byte (given the same Python in the env).

    hack/vllm-flags/setup-env.sh /work/tmp/vllm-flags-env
    hack/vllm-flags/extract.py --python /work/tmp/vllm-flags-env/bin/python 0.17.0 0.18.0
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_OUT = REPO / "operator" / "vllm_operator" / "engine" / "flags"
FORMAT = 2  # 2: forms carry "after", options "config_schema"; "conversions" added

sys.path.insert(0, str(HERE))
from forms import CORPUS, FORMS, PROBES  # noqa: E402


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(version: str, into: Path, wheels: Path | None = None) -> Path:
    """The release's wheel in ``into``: moved from ``wheels`` (fetched earlier with
    ``pip download --no-deps``) when it is there, else downloaded now."""
    into.mkdir(parents=True, exist_ok=True)
    if wheels is not None:
        for found in sorted(wheels.glob(f"vllm-{version}-*.whl")):
            return found.rename(into / found.name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            f"vllm=={version}",
            "-d",
            str(into),
        ],
        check=True,
    )
    wheels = sorted(into.glob(f"vllm-{version}-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one wheel for vllm {version}, found {wheels}")
    return wheels[0]


def _unpack_sources(wheel: Path, into: Path) -> None:
    """Everything but compiled objects: the parser is built by vLLM's Python code."""
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.endswith(".so") or ".so." in name or name.endswith(".cubin"):
                continue
            zf.extract(name, into)


def dump_release(
    version: str, python: str, work: Path, wheels: Path | None = None
) -> dict[str, Any]:
    """Download, unpack, dump and delete one release; the document to write."""
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"vllm-{version}-", dir=work) as tmp:
        tmpdir = Path(tmp)
        wheel = _download(version, tmpdir / "dl", wheels)
        sha = _sha256(wheel)
        src = tmpdir / "src"
        _unpack_sources(wheel, src)
        wheel.unlink()
        (tmpdir / "forms.json").write_text(json.dumps(FORMS))
        (tmpdir / "probes.json").write_text(json.dumps(PROBES))
        (tmpdir / "corpus.json").write_text(json.dumps(CORPUS))
        env = dict(os.environ, PYTHONPATH=f"{src}:{HERE}", VLLM_TARGET_DEVICE="cpu")
        proc = subprocess.run(
            [python, str(HERE / "dump_parser.py"), "forms.json", "probes.json", "corpus.json"],
            cwd=tmpdir,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-4000:])
            raise SystemExit(f"dumping vllm {version} failed (exit {proc.returncode})")
        dumped: dict[str, Any] = json.loads(proc.stdout)
    return {
        "format": FORMAT,
        "vllm": version,
        "wheel": wheel.name,
        "wheel_sha256": sha,
        **dumped,
    }


def render(doc: dict[str, Any]) -> str:
    """Sorted JSON with one option / form / rewrite per line: small, stable diffs."""
    lines = ["{"]
    keys = sorted(doc)
    for i, key in enumerate(keys):
        value = doc[key]
        comma = "," if i < len(keys) - 1 else ""
        if isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f"  {json.dumps(key)}: [")
            for j, item in enumerate(value):
                sep = "," if j < len(value) - 1 else ""
                lines.append("    " + json.dumps(item, sort_keys=True, ensure_ascii=False) + sep)
            lines.append(f"  ]{comma}")
        else:
            text = json.dumps(value, sort_keys=True, ensure_ascii=False)
            lines.append(f"  {json.dumps(key)}: {text}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("versions", nargs="+", help="vLLM releases, e.g. 0.17.0")
    ap.add_argument("--python", required=True, help="python of the env made by setup-env.sh")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where vllm-X.Y.Z.json go")
    ap.add_argument(
        "--work",
        type=Path,
        default=Path("/tmp/vllm-flags-work"),
        help="scratch directory for downloads (emptied after each release)",
    )
    ap.add_argument(
        "--wheels",
        type=Path,
        help="a directory of wheels fetched ahead (pip download --no-deps vllm==X -d DIR); "
        "each one used is moved out of it and deleted with the release's scratch directory",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for version in args.versions:
        started = time.monotonic()
        doc = dump_release(version, args.python, args.work, args.wheels)
        target = args.out / f"vllm-{version}.json"
        target.write_text(render(doc))
        took = time.monotonic() - started
        print(f"{target}: {len(doc['options'])} options, {len(doc['forms'])} forms, {took:.0f} s")


if __name__ == "__main__":
    main()
