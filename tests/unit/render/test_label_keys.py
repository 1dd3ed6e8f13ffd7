"""Label and annotation keys are spelled once: ``render/labels.py``, under the API group.

People and tools select on these keys and write the request annotations (promote, abort,
rerun-gate), so a key spelled twice can drift into two keys. Only the group itself
(``api/resource.py``) and versioned format ids (``.../bench-summary/v1``) may spell it.
"""

from __future__ import annotations

import re
from pathlib import Path

from vllm_operator.api.resource import GROUP
from vllm_operator.render import labels

PACKAGE = Path(__file__).resolve().parents[3] / "operator" / "vllm_operator"
LITERAL = re.compile(r"""f?["']vllm-operator\.dev(?:/[^"'{]*)?["'{]""")
FORMAT_ID = re.compile(r"""["']vllm-operator\.dev/[a-z-]+/v\d+["']""")


def test_keys_live_under_the_api_group() -> None:
    keys = [v for k, v in vars(labels).items() if k.endswith(("_LABEL", "_ANNOTATION"))]
    ours = [key for key in keys if not key.startswith(("app.kubernetes.io/", "nvidia.com/"))]
    assert len(ours) >= 10
    assert all(key.startswith(f"{GROUP}/") for key in ours), ours
    assert len(set(keys)) == len(keys) - 1  # revision: one label and one annotation, same key


def test_no_other_module_spells_a_key() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "api/resource.py":
            continue
        for line in path.read_text().splitlines():
            code = line.split("#", 1)[0]
            if LITERAL.search(code) and not FORMAT_ID.search(code):
                found.append(f"{rel}: {line.strip()}")
    assert not found, found
