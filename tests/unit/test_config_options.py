"""`vllm-operator run`'s options come from one table, and every reading of it agrees.

The parser, the environment reading and docs/rollout.md's table are all made from
``config.OPTIONS``; these checks fail when one of them drifts: a field no option sets, a
document that is not the table, a boolean variable read differently from another, a
default owned twice.

Regenerate the document's table after changing an option::

    python tests/unit/test_config_options.py --write
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from vllm_operator.booleans import FALSE_WORDS, TRUE_WORDS
from vllm_operator.commands import sim as sim_cli
from vllm_operator.config import (
    BOOL,
    OPTIONS,
    OperatorConfig,
    Option,
    config_from_args,
    options_markdown,
)
from vllm_operator.render.job import TTL_SECONDS_AFTER_FINISHED, render_job
from vllm_operator.rollout import Settings

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "rollout.md"
BEGIN = "<!-- options table: generated from config.OPTIONS; regenerate with\n"
BEGIN += "     python tests/unit/test_config_options.py --write -->\n"
END = "<!-- end of options table -->"
# Fields the embedded cluster's harnesses set in code (module docstring of config.py), and
# the client's thread count: no option on purpose.
IN_CODE_ONLY = {"api_url", "deadline_scale", "kube_workers", "pod_address"}
PROG = "vllm-operator run"


def _documented() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(BEGIN) + len(BEGIN)
    return text[start : text.index(END, start)]


def test_the_document_carries_the_table() -> None:
    assert _documented() == options_markdown(), (
        "run: python tests/unit/test_config_options.py --write"
    )


def test_every_field_is_an_option_and_every_option_a_field() -> None:
    fields = {f.name for f in dataclasses.fields(OperatorConfig)}
    set_by_options = {o.field for o in OPTIONS} - {"all_namespaces"}
    assert set_by_options <= fields
    assert fields - set_by_options == IN_CODE_ONLY
    assert len({o.field for o in OPTIONS}) == len(OPTIONS)
    flags = [f for o in OPTIONS for f in o.flags]
    variables = [n for o in OPTIONS for n in o.env]
    assert len(flags) == len(set(flags))
    assert len(variables) == len(set(variables))


def test_the_planner_settings_own_their_defaults() -> None:
    config, settings = OperatorConfig(), Settings()
    for f in dataclasses.fields(Settings):
        assert getattr(config, f.name) == getattr(settings, f.name), f.name
    assert config_from_args([], {}, PROG) == config
    # The Job's TTL: one number, the render's, whichever path makes the Job.
    assert settings.job_ttl_seconds == TTL_SECONDS_AFTER_FINISHED
    assert render_job.__kwdefaults__["ttl_seconds"] == settings.job_ttl_seconds
    assert settings.bench_image.endswith(":0.1.0")  # the operator's own version, not :latest


BOOLEANS = [o for o in OPTIONS if o.kind is BOOL and o.env]


@pytest.mark.parametrize("option", BOOLEANS, ids=lambda o: o.env[0])
@pytest.mark.parametrize("word", [*TRUE_WORDS, *FALSE_WORDS])
def test_every_boolean_variable_reads_the_same_words_in_any_case(option: Option, word: str) -> None:
    name = option.env[0]
    field = option.field
    for spelled in (word, word.upper(), word.capitalize(), f" {word} "):
        config = config_from_args([], {name: spelled}, PROG)
        expected = word in TRUE_WORDS
        if field == "all_namespaces":
            env = {name: spelled, "VLLM_OPERATOR_NAMESPACES": "a"}
            scoped = config_from_args([], env, PROG)
            assert scoped.namespaces == (() if expected else ("a",)), spelled
        else:
            assert getattr(config, field) is expected, spelled


@pytest.mark.parametrize("option", BOOLEANS, ids=lambda o: o.env[0])
@pytest.mark.parametrize("value", ["2", "ja", "enabled", "truee", "-1"])
def test_any_other_boolean_word_is_an_error_naming_the_variable(
    option: Option, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = option.env[0]
    with pytest.raises(SystemExit) as stop:
        config_from_args([], {name: value}, PROG)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"{name}={value!r} is not a boolean: 1/true/yes/on or 0/false/no/off, any case" in err
    assert "Traceback" not in err


SIM_BOOLEANS = [k for k in sim_cli.KNOBS if k.kind is sim_cli._bool]


@pytest.mark.parametrize("knob", SIM_BOOLEANS, ids=lambda k: k.env)
def test_the_simulator_reads_its_boolean_variables_the_same_way(
    knob: sim_cli.Knob, capsys: pytest.CaptureFixture[str]
) -> None:
    def read(text: str) -> object:
        config = sim_cli.config_from_args(["m"], "vllm serve", {knob.env: text})
        dest = knob.dest.removeprefix("sim_")  # a fault knob lives on config.faults
        return getattr(config if hasattr(config, dest) else config.faults, dest)

    for word in (*TRUE_WORDS, *FALSE_WORDS):
        for spelled in (word, word.upper(), f" {word.capitalize()} "):
            assert read(spelled) is (word in TRUE_WORDS), spelled
    assert read("") is False
    with pytest.raises(sim_cli._Exit) as stop:
        sim_cli.config_from_args(["m"], "vllm serve", {knob.env: "ja"})
    assert stop.value.status == 2
    assert f"{knob.env}='ja': not a boolean: 'ja' (use 1/true/yes/on" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("VLLM_OPERATOR_METRICS_PORT", "http", "METRICS_PORT='http' is not a port number"),
        ("VLLM_OPERATOR_LIVENESS_PORT", "70000", "LIVENESS_PORT: port 70000 is not in 1..65535"),
        ("VLLM_OPERATOR_WORKERS", "2.5", "WORKERS='2.5' is not a whole number"),
        ("VLLM_OPERATOR_WORKERS", "0", "VLLM_OPERATOR_WORKERS: 0 must be >= 1"),
        ("VLLM_OPERATOR_JOB_TTL_SECONDS", "-5", "JOB_TTL_SECONDS: -5 must be >= 0"),
        ("VLLM_OPERATOR_LOG_LEVEL", "loud", "LOG_LEVEL: 'loud' is not one of DEBUG, INFO"),
    ],
)
def test_a_bad_variable_is_named_without_a_traceback(
    variable: str, value: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        config_from_args([], {variable: value}, PROG)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert words in err
    assert "Traceback" not in err


def test_each_variable_reaches_its_field_and_its_flag_wins() -> None:
    samples = {"TEXT": ("x", "y"), "SECONDS": ("3", "4"), "PORT": ("9000", "9001")}
    checked = 0
    for option in OPTIONS:
        kind = option.kind.__name__.upper()
        if kind not in samples or not option.env or not option.flags:
            continue
        from_env, from_flag = samples[kind]
        env = {option.env[0]: from_env}
        read = getattr(config_from_args([], env, PROG), option.field)
        flagged = getattr(config_from_args([option.flags[-1], from_flag], env, PROG), option.field)
        if option.repeat:
            assert (read, flagged) == ((from_env,), (from_flag,)), option.field
        else:
            assert (str(read).removesuffix(".0"), str(flagged).removesuffix(".0")) == (
                from_env,
                from_flag,
            ), option.field
        checked += 1
    assert checked >= 12


@pytest.mark.parametrize("flag", ["--bench-image", "--lease-name", "--kubeconfig", "-n"])
def test_an_empty_flag_is_refused_not_taken_for_the_default(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        config_from_args([flag, " "], {}, PROG)
    assert stop.value.code == 2
    assert "an empty value: leave the option out for its default" in capsys.readouterr().err


def test_the_log_level_is_read_in_any_case() -> None:
    assert config_from_args(["--log-level", "debug"], {}, PROG).log_level == "DEBUG"
    assert config_from_args([], {"VLLM_OPERATOR_LOG_LEVEL": "Warning"}, PROG).log_level == "WARNING"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/unit/test_config_options.py --write")
    text = DOC.read_text(encoding="utf-8")
    start = text.index(BEGIN) + len(BEGIN)
    DOC.write_text(text[:start] + options_markdown() + text[text.index(END, start) :])
