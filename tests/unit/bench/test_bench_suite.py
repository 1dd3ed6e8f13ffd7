"""The default suite and the simulator's answer book agree: 12/13 right, degraded fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import vllm_operator.sim as sim_pkg
from vllm_operator.bench.prompts import DEFAULT_CLASSES, prompt_for
from vllm_operator.bench.quality.assertions import check
from vllm_operator.bench.quality.suite import QualityTest, load_suite, parse_suite
from vllm_operator.bench.sandbox.executors import LocalSandbox
from vllm_operator.errors import SpecError

STUDY_IDS = [
    "classify-1", "classify-2", "classify-3",
    "structured-output-1", "structured-output-2", "structured-output-3",
    "instruct-1", "instruct-2", "code-1", "email-draft-1", "summarize-1",
    "reason-1", "multi-step-reason-1",
]  # fmt: skip
ANSWERS = Path(sim_pkg.__file__).parent / "data" / "answers.yaml"


def answers() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = yaml.safe_load(ANSWERS.read_text())["answers"]
    return data


async def passes(test: QualityTest, text: str) -> bool:
    # Streaming as the simulator does it keeps inner whitespace but strips the ends.
    sandbox = LocalSandbox()
    return all([(await check(a, text.strip(), sandbox)).passed for a in test.assert_])


def test_default_suite_has_the_study_ids_in_seven_categories() -> None:
    suite = load_suite("builtin:default")
    assert suite.ids == STUDY_IDS
    assert len({t.category for t in suite.tests}) == 7


def test_every_answer_matches_exactly_one_prompt_and_no_benchmark_prompt() -> None:
    suite = load_suite("builtin:default")
    bench_prompts = [prompt_for(c, i) for c in DEFAULT_CLASSES for i in range(10)]
    for answer in answers():
        hits = [t.id for t in suite.tests if answer["match"] in t.prompt]
        assert hits == [answer["id"]]
        assert not any(answer["match"] in p for p in bench_prompts)


async def test_reference_answers_pass_all_but_gross_profit() -> None:
    suite = load_suite("builtin:default")
    by_id = {a["id"]: a for a in answers()}
    results = {t.id: await passes(t, by_id[t.id]["text"]) for t in suite.tests}
    assert [i for i, ok in results.items() if not ok] == ["multi-step-reason-1"]


async def test_degraded_answers_fail_enough_for_min_passed_12_to_fail() -> None:
    suite = load_suite("builtin:default")
    by_id = {a["id"]: a for a in answers()}
    passed = sum([await passes(t, by_id[t.id]["degraded"]) for t in suite.tests])
    assert passed <= 13 - 5


def test_none_suite_is_empty_and_unknown_builtin_is_rejected() -> None:
    assert load_suite("builtin:none").tests == []
    with pytest.raises(SpecError, match="unknown built-in"):
        load_suite("builtin:fancy")
    with pytest.raises(SpecError, match="cannot read"):
        load_suite("/nonexistent/suite.yaml")


def test_custom_suite_file(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(
        "name: mine\ntests:\n  - id: t1\n    category: c\n    prompt: Say hi\n"
        "    assert:\n      - {type: contains, value: hi}\n"
    )
    suite = load_suite(str(path))
    assert (suite.name, suite.ids, suite.tests[0].max_tokens) == ("mine", ["t1"], 512)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[1, 2]", "a mapping"),
        ("name: x\ntests: [{id: a, category: c, prompt: p, assert: []}]", "tests.0.assert"),
        (
            "name: x\ntests: [{id: A!, category: c, prompt: p, assert: [{type: is-json}]}]",
            "tests.0.id",
        ),
        ("name: x\nfoo: 1", "foo"),
        (
            "name: x\ntests:\n - {id: a, category: c, prompt: p, assert: [{type: is-json}]}\n"
            " - {id: a, category: c, prompt: q, assert: [{type: is-json}]}",
            "twice",
        ),
        (
            "name: x\ntests: [{id: a, category: c, prompt: p,"
            " assert: [{type: regex, pattern: '('}]}]",
            "regular expression",
        ),
        ("name: [unclosed", "not YAML"),
    ],
)
def test_bad_suites_name_the_problem(text: str, where: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_suite(text, "suite.yaml")
    assert where in str(err.value)
    assert "suite.yaml" in str(err.value)
