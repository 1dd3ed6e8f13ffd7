"""docs/architecture.md names only what exists, and its diagram leaves no module out.

The page is the map a newcomer reads first; a map with a file that is not there (it once
linked a facts file kept outside the tree) or without a module that is (config, election,
metrics, errors and cli were missing from the diagram) sends them the wrong way. So every
path and module the page names in backticks or in the diagram must exist, and every package
and top-level module of ``vllm_operator`` must have its line in the diagram.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "operator" / "vllm_operator"
# Where a path the page writes may start: the repository, the package, the test cluster.
BASES = (ROOT, PACKAGE, ROOT / "embedded-cluster" / "devcluster")
FILE_SUFFIXES = (".py", ".md", ".json", ".sh", ".toml", ".yaml")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _diagram(text: str) -> str:
    """The first fenced block: the layer diagram."""
    found = re.search(r"^```\n(.*?)^```$", text, re.S | re.M)
    assert found, "docs/architecture.md has no diagram"
    return found.group(1)


def _is_path(token: str) -> bool:
    if any(c in token for c in " =<>[]") or token.startswith("-"):
        return False
    return "/" in token or token.endswith(FILE_SUFFIXES)


def _named_paths(text: str) -> set[str]:
    quoted = {t for t in re.findall(r"`([^`\n]+)`", text) if _is_path(t)}
    drawn = set(re.findall(r"(?<![\w./-])([\w-]+(?:/[\w-]*)*(?:/|\.py))(?![\w/])", _diagram(text)))
    return quoted | drawn


def _exists(path: str) -> bool:
    pattern = path.replace("X.Y.Z", "*")
    return any(
        any(base.glob(pattern)) if "*" in pattern else (base / path).exists() for base in BASES
    )


def _subpackages() -> set[str]:
    return {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}


def test_the_page_names_paths_at_all() -> None:
    named = _named_paths(_text())
    assert {"rollout/planner.py", "handlers/", "errors.py", "engine/flags/vllm-X.Y.Z.json"} <= named


@pytest.mark.parametrize("path", sorted(_named_paths(_text())))
def test_every_named_path_exists(path: str) -> None:
    assert _exists(path), f"docs/architecture.md names {path}, which is not in the tree"


def test_every_named_module_attribute_exists() -> None:
    dotted = [
        t
        for t in re.findall(r"`([a-z_]+(?:\.[A-Za-z_]+)+)`", _text())
        if t.split(".")[0] in _subpackages()
    ]
    assert "api.summary.Verdict" in dotted
    for name in dotted:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj: object = importlib.import_module("vllm_operator." + ".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            for attr in parts[cut:]:
                assert hasattr(obj, attr), f"docs/architecture.md names {name}: no {attr}"
                obj = getattr(obj, attr)
            break
        else:
            pytest.fail(f"docs/architecture.md names {name}, which is not a module")


def test_the_diagram_has_every_package_and_top_level_module() -> None:
    diagram = _diagram(_text())
    expected = {f"{p}/" for p in _subpackages()} | {
        p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"
    }
    missing = sorted(n for n in expected if not re.search(rf"(?<![\w/]){re.escape(n)}", diagram))
    assert not missing, f"add a line for each to the diagram in docs/architecture.md: {missing}"


def test_a_missing_path_is_caught() -> None:
    assert not _exists("rollout/held.py")
    assert not _exists("vllm-facts.md")
    assert _exists("rollout/stopped.py")
