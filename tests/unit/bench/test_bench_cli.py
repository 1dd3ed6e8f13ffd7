"""The CLI's argument handling: usage errors exit 2 and still leave a summary behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_operator.api.summary import BenchSummary
from vllm_operator.commands import main as top_main
from vllm_operator.commands.bench import main, parser

BASE = ["--url", "http://127.0.0.1:9", "--model", "m"]


def test_help_documents_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        top_main(["bench", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "exit codes: 0 passed (or no gate), 1 failed or inconclusive, 2 usage error" in out
    for flag in ("--api-key-file", "--thresholds-json", "--summary-path", "--deadline-seconds"):
        assert flag in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "http://x"], "the following arguments are required: --model"),
        ([*BASE, "--iterations", "x"], "argument --iterations: invalid int value"),
        ([*BASE, "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_argparse_errors_exit_2_and_still_write_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    summary_path = tmp_path / "termination-log"
    assert main([*argv, f"--summary-path={summary_path}"], "bench") == 2
    assert message in capsys.readouterr().err
    summary = BenchSummary.model_validate_json(summary_path.read_text())
    assert summary.verdict == "Error"
    assert message in summary.reasons[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--concurrency", "1,x"], "--concurrency"),
        (["--concurrency", "0"], "--concurrency"),
        (["--prompt-classes", "huge"], "unknown class"),
        (["--prompt-classes", "medium=256"], "PROMPT/OUTPUT"),
        (["--iterations", "0"], "--iterations"),
        (["--deadline-seconds", "0"], "--deadline-seconds"),
        (["--deadline-seconds", "inf"], "--deadline-seconds: must be a finite number > 0"),
        (["--deadline-seconds", "nan"], "--deadline-seconds: must be a finite number > 0"),
        (["--deadline-seconds", "-5"], "--deadline-seconds: must be a finite number > 0"),
        (["--stall-seconds", "1e999"], "--stall-seconds: must be a finite number > 0"),
        (["--url", "garbage"], "--url: 'garbage' is not an http(s) URL with a host"),
        (["--url", "ftp://host/"], "is not an http(s) URL"),
        (["--url", "http://host:99999"], "Port out of range"),
        (["--url", "http://:8000"], "is not an http(s) URL with a host"),
        (["--url", "http://h:8000/?x=1"], "no port 0, query"),
        (["--thresholds-json", "[" * 5000 + "]" * 5000], "nested deeper than 32"),
        (["--baseline-json", '{"model": "m", "x": ' + "9" * 5000 + "}"], "not JSON"),
        (["--suite", "builtin:nope"], "unknown built-in suite"),
        (["--thresholds-json", "{"], "not JSON"),
        (["--thresholds-json", '{"maxRegressionPercent": 500}'], "maxRegressionPercent"),
        (
            ["--thresholds-json", '{"quality": {"mustPass": ["nope-1"]}}'],
            "suite default does not have: 'nope-1'",
        ),
        (
            ["--thresholds-json", '{"quality": {"mustPass": ["code1"]}}'],
            "suite default does not have: 'code1' (did you mean 'code-1'?)",
        ),
        (["--baseline-json", '{"latency": 3}'], "--baseline-json: latency"),
        (["--baseline-json", "@/nonexistent.json"], "cannot read"),
        (["--api-key-env", "BENCH_TEST_UNSET_VARIABLE"], "is unset"),
        (["--api-key-file", "/nonexistent/key"], "--api-key-file"),
        (["--trials", "0"], "--trials: must be 1..10"),
        (["--trials", "11"], "--trials: must be 1..10"),
        (["--baseline-url", "stable:8000"], "--baseline-url"),
        (["--candidate-node", "n" * 254], "--*-node/--*-gpu-product"),
        (["--thresholds-json", '{"confidencePercent": 100}'], "confidencePercent"),
        (["--quality-concurrency", "0"], "--quality-concurrency: must be >= 1"),
        (["--quality-concurrency", "65"], "--quality-concurrency: must be at most 64"),
        (
            ["--thresholds-json", '{"quality": {"minIdenticalPercent": 101}}'],
            "minIdenticalPercent",
        ),
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
    from vllm_operator.commands.bench import config_from_args

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


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--job-name", "qwen-gate-abc-1"], "give all three or none"),
        (["--job-name", "j", "--revision", "r"], "give all three or none"),
        (["--job-name", "j", "--revision", "r", "--attempt", "0"], "--attempt"),
        (["--job-name", "j" * 64, "--revision", "r", "--attempt", "1"], "--job-name"),
    ],
)
def test_partial_or_bad_run_identity_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    summary_path = tmp_path / "termination-log"
    assert main([*BASE, *extra, "--summary-path", str(summary_path)], "bench") == 2
    assert message in capsys.readouterr().err
    assert BenchSummary.model_validate_json(summary_path.read_text()).verdict == "Error"


def test_usage_error_summary_still_names_the_run(tmp_path: Path) -> None:
    summary_path = tmp_path / "termination-log"
    run = ["--job-name", "qwen-gate-abc-2", "--revision", "abc", "--attempt", "2"]
    code = main([*BASE, *run, "--iterations", "0", "--summary-path", str(summary_path)], "bench")
    assert code == 2
    identity = BenchSummary.model_validate_json(summary_path.read_text()).identity
    assert identity is not None
    assert (identity.job, identity.revision, identity.attempt) == ("qwen-gate-abc-2", "abc", 2)


def test_placement_and_pairing_flags_reach_the_config() -> None:
    from vllm_operator.commands.bench import config_from_args

    args = parser("bench").parse_args(
        [
            *BASE,
            "--allow-code-execution",  # gated, and the suite's code checks need a sandbox
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


def test_quality_concurrency_defaults_to_4_and_1_is_one_at_a_time() -> None:
    from vllm_operator.commands.bench import config_from_args

    assert config_from_args(parser("bench").parse_args(BASE)).quality_concurrency == 4
    one = config_from_args(parser("bench").parse_args([*BASE, "--quality-concurrency", "1"]))
    assert one.quality_concurrency == 1
    assert one.public()["quality_concurrency"] == 1
