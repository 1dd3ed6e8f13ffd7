"""No product module over 500 lines, no function over cyclomatic complexity 25 (radon).

DESIGN.md asks for small modules ("a module past about 400 lines is asking to be split") and
the review behind issue 33 found files of 500-700 lines and functions of complexity 27-42
that nobody had meant to grow. A limit that is only written down drifts again; this test
holds it for the product (``vllm_operator``) and the embedded cluster (``devcluster``, the
demo), closures included (the sandbox child's audit hook is one).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from radon.complexity import cc_visit
from radon.visitors import Class, Function

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    ROOT / "operator" / "vllm_operator",
    ROOT / "embedded-cluster" / "devcluster",
    ROOT / "embedded-cluster" / "vllm_operator_demo",
)
MAX_LINES = 500
MAX_COMPLEXITY = 25

# Being split on other branches right now; the lead deletes each line once they are merged.
TOO_LONG_FOR_NOW: set[str] = set()
TOO_COMPLEX_FOR_NOW = {}


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in package.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _functions(blocks: list[Function | Class]) -> Iterator[Function]:
    for block in blocks:
        if isinstance(block, Class):
            yield from _functions(list(block.methods) + list(block.inner_classes))
        else:
            yield block
            yield from _functions(list(block.closures))


def _too_complex(path: Path) -> list[tuple[str, int]]:
    blocks = cc_visit(path.read_text(encoding="utf-8"))
    return [(f.name, f.complexity) for f in _functions(blocks) if f.complexity > MAX_COMPLEXITY]


def test_every_package_is_walked() -> None:
    names = {_name(p) for p in _modules()}
    assert "operator/vllm_operator/rollout/planner.py" in names
    assert "embedded-cluster/devcluster/apiserver.py" in names
    assert len(names) > 150


@pytest.mark.parametrize("path", _modules(), ids=_name)
def test_module_is_at_most_500_lines(path: Path) -> None:
    if _name(path) in TOO_LONG_FOR_NOW:
        pytest.skip("being split on another branch")
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{_name(path)} has {lines} lines: split it by subject"


@pytest.mark.parametrize("path", _modules(), ids=_name)
def test_functions_are_at_most_complexity_25(path: Path) -> None:
    found = [(n, c) for n, c in _too_complex(path) if (_name(path), n) not in TOO_COMPLEX_FOR_NOW]
    assert not found, f"{_name(path)}: split these functions (radon complexity): {found}"


def test_the_complexity_walk_sees_closures_and_methods() -> None:
    nested = "\n".join(
        [
            "class A:",
            "    def m(self, x):",
            "        def inner(y):",
            *[f"            if y == {i}: return {i}" for i in range(30)],
            "        return inner",
        ]
    )
    found = {f.name: f.complexity for f in _functions(cc_visit(nested))}
    assert found["inner"] > MAX_COMPLEXITY
    assert found["m"] == 1


def test_the_allow_lists_name_what_exists() -> None:
    """A line left after its file or function was split must go, not linger."""
    for name in TOO_LONG_FOR_NOW:
        path = ROOT / name
        assert path.exists(), name
        assert len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES, (
            f"{name} is short now: delete it from TOO_LONG_FOR_NOW"
        )
    for name, function in TOO_COMPLEX_FOR_NOW:
        assert function in dict(_too_complex(ROOT / name)), (
            f"{name}:{function} is simple now: delete it from TOO_COMPLEX_FOR_NOW"
        )
