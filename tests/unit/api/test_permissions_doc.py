"""docs/rollout.md's permissions table says exactly what ``api/kinds.py`` declares.

The table is for people (it marks kopf's calls with ``*`` and the API server's check with
``†``); the declarations are the source. A right added to a kind without a row, or a row
left behind, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from vllm_operator.kube.permissions import PERMISSIONS

DOC = Path(__file__).resolve().parents[3] / "docs" / "rollout.md"
ROW = re.compile(r"^\| (\S+) \| (\S+)[^|]*\| ([^|]+) \|$")
MARKS = {"*": "kopf", "†": "apiserver", "": "operator"}


def _documented() -> set[tuple[str, str, str, str]]:
    text = DOC.read_text()
    table = text[text.index("| API group | Resource | Verbs |") :].split("\n\n", 1)[0]
    found = set()
    for line in table.splitlines()[2:]:
        m = ROW.match(line)
        if m is None:
            continue  # the footnote lines under the table
        group = "" if m.group(1) == '""' else m.group(1)
        for item in re.sub(r"\([^)]*\)", "", m.group(3)).split(","):
            item_match = re.fullmatch(r"\s*([a-z]+)([*†]?)\s*", item)
            assert item_match is not None, line
            verb, mark = item_match.groups()
            found.add((group, m.group(2), verb, MARKS[mark]))
    return found


def test_the_permissions_table_matches_the_declarations() -> None:
    declared = {(p.api_group, p.resource, p.verb, p.by) for p in PERMISSIONS}
    documented = _documented()
    assert documented == declared, (
        f"missing from docs: {sorted(declared - documented)}; "
        f"not declared: {sorted(documented - declared)}"
    )
