"""What the operator writes for the examples and a fixed set of specs stays byte-identical.

A refactor of the render or planner path must not change any object, annotation or status
the cluster receives; ``recorded_renders.json`` holds the digests recorded before. A
mismatch names the case and writes what is rendered now under the test's tmp path, so the
difference can be read (render the same case on the previous commit and diff).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from recorded_renders import RECORD, cases, digest, render_case, renders

RECORDED: dict[str, str] = json.loads(RECORD.read_text())


def test_the_recorded_set_covers_every_case_and_nothing_else() -> None:
    assert set(RECORDED) == set(cases())
    assert len(RECORDED) >= 50
    assert any(name.startswith("example/") for name in RECORDED)


def test_every_render_is_byte_identical_to_the_recorded_one(tmp_path: Path) -> None:
    changed = []
    for name, text in renders().items():
        if digest(text) != RECORDED[name]:
            changed.append(name)
            out = tmp_path / (name.replace("/", "_") + ".json")
            out.write_text(json.dumps(json.loads(text), indent=1, sort_keys=True))
    assert not changed, f"renders changed for {changed}; now rendered under {tmp_path}"


def test_the_generated_cases_render_refuse_and_serve() -> None:
    # The set must exercise real output, not only refusals.
    docs = {name: json.loads(text) for name, text in renders().items()}
    rendered = [n for n, d in docs.items() if "refused" not in d["first_revision"]]
    refused = [n for n, d in docs.items() if "refused" in d["render_all"]]
    assert len(rendered) >= 30
    assert refused, "no generated spec is refused: the set misses the policy's refusals"
    assert all("serving" in docs[n] for n in rendered if n.startswith("example/"))


@pytest.mark.parametrize("name", ["base"])
def test_a_changed_spec_changes_the_render(name: str) -> None:
    resource = cases()[name]
    resource["spec"]["engine"]["performanceMode"] = "balanced"
    from recorded_renders import canonical

    assert digest(canonical(render_case(resource, serve=False))) != RECORDED[name]
