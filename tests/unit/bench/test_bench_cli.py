"""The CLI's argument handling: usage errors exit 2 and still leave a summary behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_operator.api.summary import BenchSummary
from vllm_operator.bench.cli import main, parser
from vllm_operator.cli import main as top_main

BASE = ["--url", "http://127.0.0.1:9", "--model", "m"]


def test_help_documents_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        top_main(["bench", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "exit codes: 0 passed (or no gate), 1 failed or inconclusive, 2 usage error" in out
    for flag in ("--api-key-file", "--thresholds-json", "--summary-path", "--deadline-seconds"):
        assert flag in out


def test_missing_required_flags_is_argparse_exit_2() -> None:
    with pytest.raises(SystemExit) as done:
        parser("bench").parse_args(["--url", "http://x"])
    assert done.value.code == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--concurrency", "1,x"], "--concurrency"),
        (["--concurrency", "0"], "--concurrency"),
        (["--prompt-classes", "huge"], "unknown class"),
        (["--prompt-classes", "medium=256"], "PROMPT/OUTPUT"),
        (["--iterations", "0"], "--iterations"),
        (["--deadline-seconds", "0"], "--deadline-seconds"),
        (["--suite", "builtin:nope"], "unknown built-in suite"),
        (["--thresholds-json", "{"], "not JSON"),
        (["--thresholds-json", '{"maxRegressionPercent": 500}'], "maxRegressionPercent"),
        (["--thresholds-json", '{"quality": {"mustPass": ["nope-1"]}}'], "nope-1 not in suite"),
        (["--baseline-json", '{"latency": 3}'], "--baseline-json: latency"),
        (["--baseline-json", "@/nonexistent.json"], "cannot read"),
        (["--api-key-env", "BENCH_TEST_UNSET_VARIABLE"], "is unset"),
        (["--api-key-file", "/nonexistent/key"], "--api-key-file"),
        (["--trials", "0"], "--trials: must be 1..10"),
        (["--trials", "11"], "--trials: must be 1..10"),
        (["--baseline-url", "stable:8000"], "--baseline-url"),
        (["--candidate-node", "n" * 254], "--*-node/--*-gpu-product"),
        (["--thresholds-json", '{"confidencePercent": 100}'], "confidencePercent"),
    ],
)
def test_usage_errors_exit_2_with_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    summary_path = tmp_path / "termination-log"
    code = main([*BASE, *extra, "--summary-path", str(summary_path)], "bench")
    assert code == 2
    assert message in capsys.readouterr().err
    summary = BenchSummary.model_validate_json(summary_path.read_text())
    assert summary.verdict == "Error"
    assert summary.errors == {"client_error": 1}
    assert summary.reasons[0].startswith("usage: ")
    assert message in summary.reasons[0]


def test_api_key_file_is_read_and_never_shown(tmp_path: Path) -> None:
    from vllm_operator.bench.cli import config_from_args

    key = tmp_path / "key"
    key.write_text("s3cret-value\n")
    args = parser("bench").parse_args([*BASE, "--api-key-file", str(key)])
    config = config_from_args(args)
    assert config.api_key == "s3cret-value"
    assert config.headers == {"authorization": "Bearer s3cret-value"}
    assert "s3cret" not in repr(config)
    assert "s3cret" not in json.dumps(config.public())


def test_credentials_in_the_url_are_not_reported() -> None:
    from vllm_operator.bench.config import BenchConfig

    config = BenchConfig(url="http://user:pw@host:8000/v1", model="m")
    assert config.public()["url"] == "http://host:8000/v1"
    assert config.chat_url == "http://user:pw@host:8000/v1/chat/completions"


def test_placement_and_pairing_flags_reach_the_config() -> None:
    from vllm_operator.bench.cli import config_from_args

    args = parser("bench").parse_args(
        [
            *BASE,
            "--baseline-url",
            "http://u:p@stable:8000",
            "--trials",
            "10",
            "--candidate-node",
            "n1",
            "--baseline-gpu-product",
            "NVIDIA-H200",
        ]
    )
    config = config_from_args(args)
    assert (config.baseline_url, config.trials) == ("http://u:p@stable:8000", 10)
    assert config.candidate_placement.node == "n1"
    assert config.baseline_placement.gpu_product == "NVIDIA-H200"
    assert config.gated
    assert config.public()["baseline_url"] == "http://stable:8000"
    assert parser("bench").parse_args(BASE).trials == 3
