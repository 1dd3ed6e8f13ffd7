"""Tokenisation, answer book and generation plan: the deterministic half of the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_operator.bench.prompts import SIZES
from vllm_operator.sim import answers, generation, tokens
from vllm_operator.sim.answers import AnswerBook


def test_token_rule_counts_whitespace_separated_words() -> None:
    assert tokens.count("Hello, world!  foo\nbar") == 4
    assert tokens.count("   ") == 0


def test_pieces_concatenate_back_to_the_stripped_text() -> None:
    text = "  The answer:\n  42 apples.  "
    parts = tokens.pieces(text)
    assert parts == ["The", " answer:", "\n  42", " apples."]
    assert tokens.join(parts) == text.strip()
    assert len(parts) == tokens.count(text)


def test_prompt_of_has_exactly_n_tokens_and_differs_by_seed() -> None:
    for n in (1, SIZES["short"].prompt_tokens, SIZES["medium"].prompt_tokens):
        assert tokens.count(tokens.prompt_of(n)) == n
    assert tokens.prompt_of(50, 1) != tokens.prompt_of(50, 2)
    with pytest.raises(ValueError, match="at least one token"):
        tokens.prompt_of(0)


def test_chat_prompt_counts_a_role_marker_per_message() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "two words"}]},
    ]
    rendered = tokens.chat_prompt(messages)
    assert tokens.count(rendered) == (1 + 2) + (1 + 2)
    assert "two words" in rendered


BOOK_YAML = """
answers:
  - id: classify-1
    match: "Classify this email"
    text: "Category: billing"
    degraded: "Category: spam"
  - id: math-1
    match: "gross profit"
    text: "The gross profit is 420 dollars."
  - id: shadowed
    match: "Classify"
    text: "never used: the first match wins"
"""


@pytest.fixture
def book(tmp_path: Path) -> AnswerBook:
    path = tmp_path / "answers.yaml"
    path.write_text(BOOK_YAML)
    return answers.load(path)


def test_answer_book_first_match_wins_and_degrades(book: AnswerBook) -> None:
    found = book.find("Please Classify this email: ...")
    assert found is not None
    assert found.id == "classify-1"
    assert found.reply(degraded=False) == "Category: billing"
    assert found.reply(degraded=True) == "Category: spam"
    assert book.find("nothing relevant") is None


def test_default_degraded_answer_shares_no_word_with_the_right_one(book: AnswerBook) -> None:
    found = book.find("compute the gross profit")
    assert found is not None
    wrong = found.reply(degraded=True)
    assert wrong == found.reply(degraded=True)  # deterministic
    assert "420" not in wrong
    assert wrong != found.text


def test_missing_answers_file_means_no_answers(tmp_path: Path) -> None:
    assert len(answers.load(tmp_path / "absent.yaml")) == 0


def test_malformed_answers_file_is_refused() -> None:
    with pytest.raises(ValueError, match="match"):
        answers.parse("answers:\n  - id: x\n    text: y\n")


def test_plan_replays_the_recorded_answer_and_stops_naturally(book: AnswerBook) -> None:
    p = generation.plan("Classify this email", max_tokens=50, book=book)
    assert p.text == "Category: billing"
    assert p.finish_reason == "stop"
    assert p.answer_id == "classify-1"


def test_plan_cuts_at_max_tokens_with_finish_length(book: AnswerBook) -> None:
    p = generation.plan("what is the gross profit?", max_tokens=3, book=book)
    assert p.deltas == ("The", " gross", " profit")
    assert p.finish_reason == "length"


def test_plan_pads_answers_with_ignore_eos(book: AnswerBook) -> None:
    p = generation.plan("Classify this email", max_tokens=10, book=book, ignore_eos=True)
    assert len(p.deltas) == 10
    assert p.text.startswith("Category: billing ")
    assert p.finish_reason == "length"


def test_plan_stop_string_cuts_before_it(book: AnswerBook) -> None:
    p = generation.plan("gross profit", max_tokens=50, book=book, stop=["420", "profit"])
    assert p.text == "The gross"
    assert p.finish_reason == "stop"
    assert p.stop_reason == "profit"


def test_filler_is_deterministic_per_prompt_and_of_requested_length() -> None:
    empty = AnswerBook()
    a = generation.plan("some prompt", max_tokens=7, book=empty)
    b = generation.plan("some prompt", max_tokens=7, book=empty)
    c = generation.plan("other prompt", max_tokens=7, book=empty)
    assert a == b
    assert a.deltas != c.deltas
    assert len(a.deltas) == 7
    assert a.finish_reason == "length"
    assert len(generation.plan("x", max_tokens=None, book=empty).deltas) == 16


def test_ledger_keeps_the_last_records_and_percentiles() -> None:
    from vllm_operator.sim.ledger import Ledger, RequestRecord, TimingStats, percentile

    ledger = Ledger(size=3)
    for i in range(5):
        ledger.add(RequestRecord(id=f"r{i}", arrival=float(i)))
    assert len(ledger) == 3
    assert ledger.get("r1") is None
    assert ledger.get("r4") is not None
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    stats = TimingStats()
    stats.gap_errors.extend([-0.001, 0.0, 0.002])
    summary = stats.summary()["gap_error"]
    assert summary["count"] == 3
    assert summary["p50_ms"] == 0.0
    assert summary["abs_p99_ms"] == 2.0
