"""`vllm-operator bench`'s options are one table, and docs/bench.md's option table follows it.

``commands.bench_options.OPTIONS`` is where each option is written once; the parser is built
from it, and the reference table at the top of docs/bench.md must name every option (and
nothing else), with the default the parser uses.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vllm_operator.commands.bench_options import OPTIONS, Option, parser

DOC = Path(__file__).resolve().parents[3] / "docs" / "bench.md"


def documented(text: str) -> dict[str, str]:
    """Flag -> its default as docs/bench.md's option table writes it."""
    table = text[text.index("| option | default | meaning |") :]
    rows = table[: table.index("\n\n")].splitlines()[2:]
    found: dict[str, str] = {}
    for row in rows:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        flags = re.findall(r"--[a-z][a-z-]*", cells[0])
        defaults = [d.strip().strip("`") for d in cells[1].split(" / ")]
        if len(defaults) == 1:
            defaults *= len(flags)
        assert len(defaults) == len(flags), f"one default or one per flag: {row}"
        found.update(zip(flags, defaults, strict=True))
    return found


def expected_default(option: Option) -> str | None:
    """How the table says this option's default; None where words describe it."""
    if option.required:
        return "required"
    if option.action == "store_true":
        return "off"
    if option.default is None:
        return None
    if isinstance(option.default, float):
        return f"{option.default:g}"
    return str(option.default)


def test_every_option_is_in_the_docs_table_and_nothing_else() -> None:
    flags = {flag for option in OPTIONS for flag in option.flags}
    assert set(documented(DOC.read_text())) == flags


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.flags[0])
def test_the_docs_say_the_default_the_parser_uses(option: Option) -> None:
    said = documented(DOC.read_text())[option.flags[0]]
    expected = expected_default(option)
    if expected is None:
        assert not re.fullmatch(r"[\d.,]+", said), f"{option.flags[0]} has no default: {said}"
    else:
        assert said == expected
        parsed = parser("bench").parse_args(["--url", "http://h", "--model", "m"])
        if not option.required:
            value = getattr(parsed, option.flags[0][2:].replace("-", "_"))
            assert value == (False if option.action == "store_true" else option.default)


def test_a_missing_or_stale_row_is_found() -> None:
    text = DOC.read_text()
    without = re.sub(r"^\| `--label` .*\n", "", text, flags=re.M)
    assert "--label" not in documented(without)
    stale = text.replace("| `--client` |", "| `--client`, `--no-such-flag` |")
    assert "--no-such-flag" in documented(stale)
    wrong = text.replace("| `--iterations` | 5 |", "| `--iterations` | 6 |")
    assert documented(wrong)["--iterations"] != expected_default(
        next(o for o in OPTIONS if o.flags == ("--iterations",))
    )


def test_rows_in_a_group_or_exclusive_set_land_there() -> None:
    p = parser("bench")
    titles = {g.title: [a.dest for a in g._group_actions] for g in p._action_groups}
    assert titles["settling warm-up"] == [
        "settle_max_passes",
        "settle_tolerance_percent",
        "settle_max_seconds",
    ]
    sets = [sorted(a.dest for a in g._group_actions) for g in p._mutually_exclusive_groups]
    assert ["allow_code_execution", "sandbox_dir"] in sets
    assert ["workload", "workload_json"] in sets
