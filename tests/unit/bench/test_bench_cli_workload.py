"""`bench --workload-json/--workload/--dataset`: parsed into the config, refused as usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_operator.api.summary import BenchSummary
from vllm_operator.bench.dataset import DatasetTraffic
from vllm_operator.bench.workload import SyntheticTraffic
from vllm_operator.commands.bench import config_from_args, main, parser

BASE = ["--url", "http://127.0.0.1:9", "--model", "m", "--suite", "builtin:none"]
DATASET = '{"dataset": {"configMap": "ds", "key": "d.jsonl"}, "seed": 5}'


def lines(*contents: str) -> str:
    return "".join(
        json.dumps({"messages": [{"role": "user", "content": c}]}) + "\n" for c in contents
    )


def test_a_dataset_workload_reaches_the_config(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(lines("a", "b", "c"))
    args = parser("bench").parse_args([*BASE, "--workload-json", DATASET, "--dataset", str(path)])
    config = config_from_args(args)
    assert config.workload.seed == 5
    assert isinstance(config.traffic, DatasetTraffic)
    assert config.traffic.describe()["records"] == 3
    assert config.traffic.describe()["source"] == str(path)


def test_the_default_and_study_workloads_have_no_traffic() -> None:
    for extra in ([], ["--workload", "study"], ["--workload-json", '{"builtin": "study"}']):
        config = config_from_args(parser("bench").parse_args([*BASE, *extra]))
        assert config.traffic is None
        assert config.workload.is_study


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_workload_from_a_file(tmp_path: Path, suffix: str) -> None:
    spec = {
        "synthetic": {"inputTokens": {"mean": 64}, "outputTokens": {"mean": 8}},
        "load": {"mode": "rate", "rates": [1, 2]},
    }
    path = tmp_path / f"w{suffix}"
    path.write_text(
        json.dumps(spec)
        if suffix == ".json"
        else "synthetic:\n  inputTokens: {mean: 64}\n  outputTokens: {mean: 8}\n"
        "load: {mode: rate, rates: [1, 2]}\n"
    )
    config = config_from_args(parser("bench").parse_args([*BASE, "--workload", str(path)]))
    assert isinstance(config.traffic, SyntheticTraffic)
    assert config.workload.load.levels == (1.0, 2.0)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--workload-json", "{"], "--workload-json: not JSON"),
        (
            ["--workload-json", '{"load": {"mode": "rate"}}'],
            "--workload-json: load: mode rate needs at least one level in rates",
        ),
        (["--workload-json", DATASET], "--dataset: the workload is a dataset, but no dataset"),
        (["--dataset", "/nonexistent"], "--dataset: cannot read /nonexistent"),
        (["--workload", "/nonexistent.yaml"], "--workload: cannot read /nonexistent.yaml"),
        (["--workload", "study", "--workload-json", "{}"], "not allowed with argument"),
    ],
)
def test_workload_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    summary_path = tmp_path / "termination-log"
    assert main([*BASE, *extra, "--summary-path", str(summary_path)], "bench") == 2
    assert message in capsys.readouterr().err
    summary = BenchSummary.model_validate_json(summary_path.read_text())
    assert summary.verdict == "Error"
    assert message in summary.reasons[0]


def test_a_malformed_dataset_line_is_a_usage_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(lines("a", "b") + '{"messages": [{"role": "user", "content": 5}]}\n')
    summary_path = tmp_path / "termination-log"
    argv = [*BASE, "--workload-json", DATASET, "--dataset", str(path)]
    assert main([*argv, "--summary-path", str(summary_path)], "bench") == 2
    expected = "--dataset: line 3: messages[0].content is empty or not text (fix: give the"
    assert expected in capsys.readouterr().err
    summary = BenchSummary.model_validate_json(summary_path.read_text())
    assert summary.reasons[0].startswith(f"usage: {expected}")
