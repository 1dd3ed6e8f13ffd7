"""`bench` refuses at once, with exit 2 and the fix, what could only end in Error after
minutes of measuring: SLO limits without a workload, load levels the mode does not use, a
gated suite whose code checks nothing may run, and a misspelt workload field ("did you
mean"). The workload file is README's ``gate.workload`` block, ``workload:`` key or not."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from vllm_operator.bench.dataset import DatasetTraffic
from vllm_operator.bench.quality.suite import load_suite
from vllm_operator.commands.bench import config_from_args, main, parser
from vllm_operator.commands.bench_checks import code_tests, workload_help

URL = ["--url", "http://127.0.0.1:9", "--model", "m"]  # nothing listens: no request may go
SLO = '{"slo": {"ttftMs": {"p99": 500}}}'
README_BLOCK = """\
workload:
  dataset: {configMap: support-prompts, key: prompts.jsonl, maxOutputTokens: 512}
  seed: 7                          # candidate and baseline get the same requests
  load: {mode: rate, rates: [5, 10, 20], secondsPerLevel: 60}   # Poisson arrivals
"""


def prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text(
        "".join(
            json.dumps({"messages": [{"role": "user", "content": f"q{i}"}]}) + "\n"
            for i in range(3)
        )
    )
    return path


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    began = time.monotonic()
    code = main(argv, "vllm-operator bench")
    took = time.monotonic() - began
    err = capsys.readouterr().err
    assert code == 2, err
    assert took < 2.0, f"refused after {took:.1f} s"
    assert "Traceback" not in err
    return err


def test_slo_limits_without_a_workload_are_refused_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = refused([*URL, "--suite", "builtin:none", "--thresholds-json", SLO], capsys)
    assert "--thresholds-json: slo" in err
    assert "add --workload FILE" in err


def test_a_gated_default_suite_without_a_sandbox_is_refused_with_the_three_fixes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = refused([*URL, "--thresholds-json", '{"maxRegressionPercent": 10}'], capsys)
    assert "code-1" in err
    for fix in ("--allow-code-execution", "--sandbox-dir DIR", "--suite builtin:none"):
        assert fix in err


def test_a_gated_suite_runs_with_any_way_to_run_code_and_ungated_is_not_refused() -> None:
    limits = ["--thresholds-json", '{"maxRegressionPercent": 10}']
    for extra in (["--allow-code-execution"], ["--suite", "builtin:none"], []):
        argv = [*URL, *extra] + (limits if extra else [])
        config_from_args(parser("bench").parse_args(argv))  # no SpecError
    assert code_tests(load_suite("builtin:default")) == ["code-1"]
    assert code_tests(load_suite("builtin:none")) == []


def test_levels_the_load_mode_does_not_use_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load = "{rates: [5, 10]}"  # mode rate forgotten: it would sweep 1, 2, 4, 8 streams
    path = tmp_path / "w.yaml"
    path.write_text(
        f"synthetic: {{inputTokens: {{mean: 8}}, outputTokens: {{mean: 4}}}}\nload: {load}\n"
    )
    err = refused([*URL, "--suite", "builtin:none", "--workload", str(path)], capsys)
    assert "--workload: load: rates are the levels of mode rate" in err
    assert "set mode: rate" in err


@pytest.mark.parametrize(
    ("text", "where", "meant"),
    [
        ("load: {mode: rate, rate: [5]}", "load.rate", "did you mean rates?"),
        (
            "dataset: {maxOutputToken: 64}",
            "dataset.maxOutputToken",
            "did you mean maxOutputTokens?",
        ),
        ("datset: {maxOutputTokens: 64}", "datset", "did you mean dataset?"),
    ],
)
def test_misspelt_workload_fields_get_a_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, where: str, meant: str
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text + "\n")
    data = prompts(tmp_path)
    argv = [*URL, "--suite", "builtin:none", "--workload", str(path), "--dataset", str(data)]
    err = refused(argv, capsys)
    assert f"--workload: {where}" in err
    assert meant in err


@pytest.mark.parametrize("keyed", [True, False])
def test_the_readme_block_is_the_workload_file_with_or_without_its_key(
    tmp_path: Path, keyed: bool
) -> None:
    path = tmp_path / "w.yaml"
    unkeyed = "\n".join(line[2:] for line in README_BLOCK.splitlines()[1:])
    block = README_BLOCK if keyed else unkeyed
    path.write_text(block + "\n")
    argv = [*URL, "--suite", "builtin:none", "--workload", str(path), "--dataset"]
    config = config_from_args(parser("bench").parse_args([*argv, str(prompts(tmp_path))]))
    assert config.workload.seed == 7
    assert config.workload.load.levels == (5.0, 10.0, 20.0)
    assert isinstance(config.traffic, DatasetTraffic)


def test_dataset_gives_the_file_without_a_configmap(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("dataset: {maxOutputTokens: 64}\nload: {mode: rate, rates: [2]}\n")
    argv = [*URL, "--suite", "builtin:none", "--workload", str(path), "--dataset"]
    config = config_from_args(parser("bench").parse_args([*argv, str(prompts(tmp_path))]))
    assert isinstance(config.traffic, DatasetTraffic)


def test_without_dataset_a_sourceless_dataset_names_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("dataset: {maxOutputTokens: 64}\n")
    err = refused([*URL, "--suite", "builtin:none", "--workload", str(path)], capsys)
    assert "--dataset FILE" in err


def test_help_workload_documents_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        parser("bench").parse_args(["--help-workload"])
    assert ended.value.code == 0
    shown = capsys.readouterr().out
    assert shown == workload_help()
    for field in (
        "load.rates",
        "load.secondsPerLevel",
        "dataset.maxOutputTokens",
        "dataset.configMap",
        "synthetic.inputTokens.distribution",
        "synthetic.sharedPrefixPercent",
        "seed",
    ):
        assert f"\n  {field}\n" in shown


def test_every_multi_line_example_of_help_continues_its_lines() -> None:
    text = parser("bench").format_help()
    examples = text.split("examples:")[1].split("JSON options")[0]
    lines = [line for line in examples.splitlines() if line.strip()]
    assert not any("   " in line.split(" #")[0].strip() for line in lines), lines  # none run on
    for line, following in itertools.pairwise(lines):
        if following.startswith("      "):  # a continuation line of the example above it
            assert line.rstrip().endswith("\\"), line
