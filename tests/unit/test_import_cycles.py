"""No module of the package imports itself around a circle, type-hint imports included.

import-linter's contracts (``test_layers.py``) order the layers, but two modules of one
layer may still import each other, as ``sim/server.py`` and ``sim/streaming.py`` once did
for a type hint (an ``if TYPE_CHECKING:`` import hides such a circle from Python, not from
the reader). The check reads every module's imports with ``ast`` (nothing is imported) and
looks for strongly connected modules; it runs on the tree and, to show it can fail, on a
copy with the old circle planted back.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operator" / "vllm_operator"


def _modules(package: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = (package.name, *path.relative_to(package).with_suffix("").parts)
        name = ".".join(parts).removesuffix(".__init__")
        found[name] = path
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (``from p import m`` counts as p.m
    when m is a module, else as p)."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    deps.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_the_package_has_no_import_circle() -> None:
    graph = import_graph(PACKAGE)
    assert "vllm_operator.sim.state" in graph["vllm_operator.sim.streaming"]
    assert circles(graph) == []


def test_a_planted_circle_is_found(tmp_path: Path) -> None:
    copy = tmp_path / "vllm_operator"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    streaming = copy / "sim" / "streaming.py"
    planted = "\nif TYPE_CHECKING:\n    from vllm_operator.sim.server import build_app\n"
    streaming.write_text(streaming.read_text() + planted)
    assert circles(import_graph(copy)) == [
        ["vllm_operator.sim.server", "vllm_operator.sim.streaming"]
    ]
