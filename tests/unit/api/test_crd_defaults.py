"""The CRD defaults nothing the operator defaults itself (issue 42).

A server-side ``default`` is stored in every object: ``kubectl describe vllmd`` of the demo
printed about 25 lines of values nobody wrote, and ``kubectl get -o yaml`` and a GitOps
tool's live view showed them as if someone had. The operator applies the same defaults
when it parses a spec, so these tests show (1) the schema defaults only what a printer
column reads, and says every other default in the field's description (``kubectl
explain``), (2) the embedded API server's own defaulting (as a real one applies them) now
stores a spec as written, and (3) a spec means the same to the operator with or without the
old defaults: same model, same revision, same spec digest, the same rendered objects (an
object stored while the CRD had defaults keeps them and changes nothing).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.objects import apply_defaults
from vllm_operator.api import crd
from vllm_operator.api.resource import parse_vllm_deployment
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render.revision import revision_hash, spec_digest

ROOT = Path(__file__).resolve().parents[3]
CRS = sorted(
    [
        *(ROOT / "examples").glob("*.yaml"),
        *(ROOT / "embedded-cluster" / "vllm_operator_demo" / "demo_data").glob("*.yaml"),
    ]
)


def _defaults(node: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every schema path that carries a ``default``."""
    if not isinstance(node, dict):
        return []
    found = [path] if "default" in node else []
    for name, sub in (node.get("properties") or {}).items():
        found += _defaults(sub, (*path, name))
    if isinstance(node.get("items"), dict):
        found += _defaults(node["items"], (*path, "[]"))
    if isinstance(node.get("additionalProperties"), dict):
        found += _defaults(node["additionalProperties"], (*path, "{}"))
    return found


def _schema() -> dict[str, Any]:
    version = crd.crd_document()["spec"]["versions"][0]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _old_schema(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The schema as generated before issue 42: every non-null default kept."""
    with monkeypatch.context() as patched:
        patched.setattr(crd, "_default_in_description", lambda node: node)
        return _schema()


def test_only_printer_columns_are_defaulted() -> None:
    columns = {
        tuple(c["jsonPath"].split("[")[0].strip(".").split("."))
        for c in crd.PRINTER_COLUMNS
        if not c["jsonPath"].startswith(".metadata")
    }
    found = set(_defaults(_schema()))
    assert found == {
        ("spec", "engine", "performanceMode"),
        ("status", "phase"),
        ("status", "message"),
    }
    assert found <= columns


def test_each_default_is_said_in_its_description(monkeypatch: pytest.MonkeyPatch) -> None:
    """``kubectl explain`` shows descriptions: what an absent field means is still taught."""
    old = _old_schema(monkeypatch)
    new = _schema()
    paths = [p for p in _defaults(old) if p not in set(_defaults(new))]
    assert len(paths) > 50, paths  # 95 defaults before, 3 after
    for path in paths:
        o, n = old, new
        for part in path:
            key = "items" if part == "[]" else None
            o = o[key] if key else o["properties"][part]
            n = n[key] if key else n["properties"][part]
        value = o["default"]
        if value in ("", [], {}):
            continue
        shown = json.dumps(value, separators=(", ", ": "))
        assert n["description"].endswith(f"Default: {shown}."), (path, n["description"])


@pytest.mark.parametrize("path", CRS, ids=lambda p: p.name)
def test_a_spec_is_stored_as_written(path: Path) -> None:
    """The embedded API server defaults as a real one does (on create, update and read):
    with this CRD a spec comes back exactly as applied, nothing added."""
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc or doc.get("kind") != "VLLMDeployment":
            continue
        written = copy.deepcopy(doc["spec"])
        assert apply_defaults(_schema()["properties"]["spec"], doc["spec"]) == written


@pytest.mark.parametrize("path", CRS, ids=lambda p: p.name)
def test_old_defaults_change_nothing_the_operator_does(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object stored under the old CRD (its defaults materialised) and the same object
    stored now parse to the same model: the same revision, spec digest and pods."""
    old = _old_schema(monkeypatch)["properties"]["spec"]
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc or doc.get("kind") != "VLLMDeployment":
            continue
        stored_before = copy.deepcopy(doc)
        apply_defaults(old, stored_before["spec"])
        assert stored_before["spec"] != doc["spec"]  # the old CRD added fields
        now, before = parse_vllm_deployment(doc), parse_vllm_deployment(stored_before)
        assert now.spec == before.spec
        revisions = {revision_hash(v.spec, plan_launch(v.spec)) for v in (now, before)}
        assert len(revisions) == 1
        assert spec_digest(now.spec) == spec_digest(before.spec)
