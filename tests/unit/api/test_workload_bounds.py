"""Load specs the bench could not run are refused when applied, and by the CLI (issue 31)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from vllm_operator.api.spec import VLLMDeploymentSpec
from vllm_operator.api.workload import MAX_LEVEL_REQUESTS, LoadSpec, SloThresholds
from vllm_operator.bench.load.send import MAX_RUN_REQUESTS, arrivals
from vllm_operator.bench.report import EXIT_USAGE
from vllm_operator.commands.bench import main

SYNTHETIC = {"inputTokens": {"mean": 8}, "outputTokens": {"mean": 8}}


def test_rate_times_seconds_beyond_a_level_is_refused() -> None:
    with pytest.raises(ValidationError, match="36000000 requests, more than 100000 per level"):
        LoadSpec.model_validate({"mode": "rate", "rates": [10_000], "secondsPerLevel": 3600})
    # At the bound exactly it is accepted, and the bench can build its arrivals.
    spec = LoadSpec.model_validate({"mode": "rate", "rates": [1000], "secondsPerLevel": 100})
    assert len(arrivals(spec.rates[0], spec.seconds_per_level, "s")) == MAX_LEVEL_REQUESTS
    with pytest.raises(ValidationError, match="per level"):
        LoadSpec.model_validate({"mode": "rate", "rates": [1000.01], "secondsPerLevel": 100})
    # Streams are bounded by the run's cut, not by this rule.
    LoadSpec.model_validate({"concurrency": [1024], "secondsPerLevel": 3600})
    assert MAX_RUN_REQUESTS == MAX_LEVEL_REQUESTS


def test_the_cli_refuses_it_as_usage_with_a_summary(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = (
        '{"synthetic": {"inputTokens": {"mean": 8}, "outputTokens": {"mean": 8}}, '
        '"load": {"mode": "rate", "rates": [10000], "secondsPerLevel": 3600}}'
    )
    summary = tmp_path / "summary.json"
    code = main(
        [
            "--url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--suite",
            "builtin:none",
            "--workload-json",
            workload,
            "--summary-path",
            str(summary),
        ],
        "bench",
    )
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--workload-json: load" in err
    assert "more than 100000 per level" in err
    assert "more than 100000 per level" in summary.read_text()


def test_each_slo_level_once() -> None:
    with pytest.raises(ValidationError, match="names level 2 more than once"):
        SloThresholds.model_validate({"levels": [{"at": 2}, {"at": 4}, {"at": 2}]})
    SloThresholds.model_validate({"levels": [{"at": 2}, {"at": 4}]})


def spec(slo_levels: list[float], load: dict[str, Any] | None = None) -> VLLMDeploymentSpec:
    workload: dict[str, Any] = {"synthetic": SYNTHETIC}
    if load is not None:
        workload["load"] = load
    return VLLMDeploymentSpec.model_validate(
        {
            "model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"image": "vllm/vllm-openai:v0.17.0"},
            "gate": {
                "thresholds": {"slo": {"levels": [{"at": at} for at in slo_levels]}},
                "workload": workload,
            },
        }
    )


def test_slo_levels_never_measured_are_refused_at_apply_time() -> None:
    spec([2, 8])  # the default streams: 1, 2, 4, 8
    spec([0.5, 3], {"mode": "rate", "rates": [0.5, 3]})
    with pytest.raises(ValidationError, match=r"slo.levels at 3: not a level .*1, 2, 4, 8"):
        spec([3])
    with pytest.raises(ValidationError, match=r"at 2: not a level of gate\.workload\.load"):
        spec([2], {"mode": "rate", "rates": [1, 3]})
    with pytest.raises(ValidationError, match="at 3: not a level"):
        spec([3], {"concurrency": [1, 2]})
