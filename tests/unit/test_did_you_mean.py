"""A misspelling anywhere a person types gets "did you mean" from one helper (issue 42 items
4 and 8): every subcommand's flags, the command itself, CR fields; workload keys and
``extraArgs`` already did (``test_bench_early_refusals``, ``test_flag_spellings``). On
953c1d3 ``bench --thresold-json`` printed 28 lines of usage and no suggestion, and a
misspelt CR field only said to check its spelling with ``kubectl explain``.
"""

from __future__ import annotations

import io

import pytest
import yaml

import builders
from vllm_operator.api.text import did_you_mean, printable
from vllm_operator.commands import main as top_main
from vllm_operator.commands.render import run as render_run

BENCH = ["--url", "http://127.0.0.1:9", "--model", "m"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["bench", *BENCH, "--thresold-json", "{}"],
            "--thresold-json: did you mean --thresholds-json",
        ),
        (["bench", "--thresold-json", "{}"], "--thresold-json: did you mean --thresholds-json"),
        (["bench", *BENCH, "--output", "jsnl"], "invalid choice: 'jsnl'"),
        (["bench", *BENCH, "--summary-pth=x"], "--summary-pth: did you mean --summary-path"),
        (
            ["judge", "--sumary", "s.json", "--thresholds-json", "{}"],
            "--sumary: did you mean --summary?",
        ),
        (
            ["report", "r.json", "-o", "r.html", "--baselne", "x"],
            "--baselne: did you mean --baseline?",
        ),
        (
            ["render", "-f", "x.yaml", "--bench-imgae", "i"],
            "--bench-imgae: did you mean --bench-image?",
        ),
        (["crds", "--out-dri", "x"], "--out-dri: did you mean --out-dir?"),
        (["bnech", "--help"], "unknown command 'bnech'; did you mean bench?"),
        (["run", "--namespce", "x"], "--namespce: did you mean --namespace?"),
        (["sim", "m", "--sim-warmup-secnds", "2"], "did you mean --sim-warmup-seconds?"),
        (["sandbox", "serve", "--exchnge", "x"], "--exchnge: did you mean --exchange?"),
        (["demo", "--kep"], "--kep: did you mean --keep?"),
    ],
)
def test_a_misspelt_flag_or_command_gets_did_you_mean_in_a_few_lines(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    try:
        code = top_main(argv)
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert expected in err, err
    if argv[0] != "bnech":
        assert len(err.strip().splitlines()) <= 2, err  # not 28 lines of usage


def test_an_invalid_choice_is_answered_with_the_closest_choice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert top_main(["bench", *BENCH, "--output", "jsnl"]) == 2
    assert "did you mean 'jsonl'?" in capsys.readouterr().err


def test_a_misspelt_cr_field_gets_did_you_mean_from_the_model_it_is_in() -> None:
    doc = builders.resource(builders.minimal_spec(builders.MODEL_30B))
    doc["spec"]["engine"]["maxModelLenght"] = 4096
    doc["spec"]["rollout"] = {"candidateReplica": 1}
    out, err = io.StringIO(), io.StringIO()
    code = render_run(["-f", "-"], "render", io.StringIO(yaml.safe_dump(doc)), out, err)
    assert code == 2
    text = err.getvalue()
    assert (
        "spec.engine.maxModelLenght: Extra inputs are not permitted (fix: did you mean maxModelLen?"
        in text
    )
    assert (
        "spec.rollout.candidateReplica: Extra inputs are not permitted (fix: did you mean "
        "candidateReplicas?" in text
    )


def test_the_helper_quotes_ids_and_says_nothing_when_nothing_is_close() -> None:
    assert did_you_mean("code1", ["code-1", "classify-1"], quote=True) == "did you mean 'code-1'?"
    assert did_you_mean("zzzz", ["code-1"]) == ""
    # only known names are shown, never the word written
    assert did_you_mean("\x1b[2Jcode-1", ["code-1"]) == "did you mean code-1?"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[32mPassed\x1b[0m", "\\x1b[32mPassed\\x1b[0m"),
        ("a\rb", "a\\x0db"),
        ("\u202eevil", "\\u202eevil"),
        ("bell\x07 nul\x00 del\x7f c1\x9b", "bell\\x07 nul\\x00 del\\x7f c1\\x9b"),
        ("zero\u200bwidth line\u2028sep", "zero\\u200bwidth line\\u2028sep"),
        ("Grüße, 日本語, emoji \U0001f600", "Grüße, 日本語, emoji \U0001f600"),
        ("two\nlines", "two\\x0alines"),
    ],
)
def test_printable_escapes_what_moves_the_cursor_or_hides_text(raw: str, shown: str) -> None:
    assert printable(raw, newlines=False) == shown
    assert printable(raw).count("\n") == raw.count("\n")
