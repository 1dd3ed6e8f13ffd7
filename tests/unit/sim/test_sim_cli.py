"""The simulator's command line: vLLM's flags per version, --sim-* knobs and their env vars."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
import yaml

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.commands import sim as cli
from vllm_operator.engine import flagdata
from vllm_operator.engine.version import v
from vllm_operator.render import render_all
from vllm_operator.sim import startup

PROG = "vllm serve"
ROOT = Path(__file__).resolve().parents[3]


def reject(
    argv: list[str], capsys: pytest.CaptureFixture[str], env: dict[str, str] | None = None
) -> str:
    assert cli.run(argv, PROG, env or {}) == 2
    return capsys.readouterr().err


def test_performance_mode_is_refused_by_0_16(capsys: pytest.CaptureFixture[str]) -> None:
    err = reject(["m", "--sim-version", "0.16.0", "--performance-mode", "throughput"], capsys)
    assert "unrecognized arguments: --performance-mode" in err
    assert "added in vLLM 0.17.0" in err


def test_disable_log_requests_is_refused_by_0_17_naming_the_replacement(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = reject(["m", "--disable-log-requests"], capsys)
    assert "--disable-log-requests" in err
    assert "removed in vLLM 0.17.0" in err
    assert "--enable-log-requests" in err


def test_renamed_flag_names_its_successor(capsys: pytest.CaptureFixture[str]) -> None:
    err = reject(["m", "--sim-version", "0.16.0", "--cuda-graph-sizes", "8"], capsys)
    assert "--cudagraph-capture-sizes" in err


def test_unknown_flag_and_bad_choice_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert "unrecognized arguments: --no-such-flag" in reject(["m", "--no-such-flag"], capsys)
    assert "invalid choice" in reject(["m", "--performance-mode", "fast"], capsys)
    # argparse's abbreviations: vLLM 0.17's parser takes an unambiguous prefix (recorded
    # from the real parser) and refuses an ambiguous one
    assert (
        cli.config_from_args(["m", "--perf", "throughput"], PROG, {}).profile.mode == "throughput"
    )
    err = reject(["m", "--max-num", "8"], capsys)
    assert "vllm serve: error: ambiguous option: --max-num could match" in err


def test_env_var_version_applies_and_cli_wins(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"VLLMOP_SIM_VERSION": "0.16.0"}
    reject(["m", "--performance-mode", "throughput"], capsys, env)
    config = cli.config_from_args(
        ["m", "--performance-mode", "throughput", "--sim-version", "0.17.0"], PROG, env
    )
    assert config.version == v("0.17.0")
    assert config.profile.name == "0.17.0-throughput"


def test_flags_and_knobs_become_the_config() -> None:
    env = {
        "VLLMOP_SIM_TIME_SCALE": "0.01",
        "VLLMOP_SIM_DEGRADED": "true",
        "VLLMOP_SIM_DROP_AFTER_TOKENS": "3",
        "VLLM_API_KEY": "from-env",
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
    }
    argv = ["Qwen/Qwen3", "--enforce-eager", "--port", "9001", "--served-model-name", "a", "b",
            "--max-num-seqs", "4", "-tp", "1", "--sim-time-scale", "0.5"]  # fmt: skip
    c = cli.config_from_args(argv, PROG, env)
    assert c.profile.name == "0.17.0-eager"
    assert (c.port, c.host, c.max_num_seqs) == (9001, "0.0.0.0", 4)
    assert c.model_names == ("a", "b")
    assert c.time_scale == 0.5  # command line wins over VLLMOP_SIM_TIME_SCALE
    assert c.warmup_seconds == pytest.approx(c.profile.warmup_seconds * 0.5)
    assert c.degraded
    assert c.faults.drop_after_tokens == 3
    assert c.api_key == "from-env"
    assert c.ld_library_path == "/usr/local/nvidia/lib64"


def test_optimization_level_zero_is_eager_also_glued() -> None:
    assert cli.config_from_args(["m", "-O0"], PROG, {}).profile.mode == "eager"
    assert cli.config_from_args(["m", "-O", "3"], PROG, {}).profile.mode == "default"


def test_bad_env_value_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = reject(["m"], capsys, {"VLLMOP_SIM_TIME_SCALE": "fast"})
    assert "VLLMOP_SIM_TIME_SCALE" in err
    err = reject(["m"], capsys, {"VLLM_SIM_TIME_SCALE": "fast"})
    assert "VLLM_SIM_TIME_SCALE" in err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(["--help"], PROG, {}) == 0
    out = capsys.readouterr().out
    assert "--sim-time-scale" in out
    assert "VLLMOP_SIM_" in out


@pytest.mark.parametrize(
    ("version", "path", "fails"),
    [
        ("0.17.0", "/usr/local/nvidia/lib64:/usr/local/cuda/lib64", True),
        ("0.16.0", "/usr/local/cuda-12.9/lib64:/usr/local/nvidia/lib64", True),
        ("0.17.1", "/usr/local/cuda/lib64/", True),
        ("0.17.0", "/usr/local/nvidia/lib64:/usr/local/nvidia/lib", False),
        ("0.17.0", "", False),
        ("0.22.0", "/usr/local/cuda/lib64:/usr/local/nvidia/lib64", False),
        ("0.12.0", "/usr/local/cuda/lib64", False),
    ],
)
def test_cublas_rule(version: str, path: str, fails: bool) -> None:
    if fails:
        with pytest.raises(startup.StartupFailure, match="CUBLAS_STATUS_INVALID_VALUE"):
            startup.check_cublas(v(version), path)
    else:
        startup.check_cublas(v(version), path)


def test_warmup_stages_add_up_and_compiled_ones_compile() -> None:
    for mode in ("eager", "default", "throughput"):
        stages = startup.warmup_stages(mode, 100.0)
        assert sum(s for s, _ in stages) == pytest.approx(100.0)
    assert any("CUDA graphs" in t for _, t in startup.warmup_stages("default", 1.0))
    assert not any("Capturing" in t for _, t in startup.warmup_stages("eager", 1.0))


def test_forms_vllm_accepts_that_the_old_catalogue_refused() -> None:
    argv = ["m", "--no-enable-prefix-caching", "--cudagraph-capture-sizes", "1", "2", "4",
            "--max_num_seqs", "4", "--enable-chunked-prefill"]  # fmt: skip
    assert cli.config_from_args(argv, PROG, {}).max_num_seqs == 4


def test_refusal_is_vllms_own_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    err = reject(["m", "--enforce-eager=true"], capsys)
    lines = err.splitlines()
    assert lines[1] == (
        "vllm serve: error: argument --enforce-eager/--no-enforce-eager: "
        "ignored explicit argument 'true'"
    )


@pytest.mark.parametrize("release", flagdata.releases(), ids=str)
def test_simulator_accepts_exactly_what_the_recorded_parser_accepted(
    release: flagdata.Version, capsys: pytest.CaptureFixture[str]
) -> None:
    table = flagdata.table(release)
    wrong = []
    for form in table.forms:
        argv = ["m", *form.argv, "--sim-version", str(release)]
        status = cli.run_parse_only(argv, PROG, {})
        err = capsys.readouterr().err
        if form.verdict == "accepted":
            if status != 0:
                wrong.append((form.argv, err))
        elif form.verdict == "error":
            if status != 2 or (
                form.message not in err.splitlines() and not err.startswith("usage")
            ):
                wrong.append((form.argv, err))
        elif status == 0:
            wrong.append((form.argv, "accepted what vLLM raised on"))
    assert wrong == []


@pytest.mark.parametrize(
    ("env", "expected", "source"),
    [
        # The knob wins over the version the operator rendered, which wins over the old name.
        (
            {
                "VLLMOP_SIM_VERSION": "0.16.0",
                "VLLMOP_VLLM_VERSION": "0.17.0",
                "VLLM_SIM_VERSION": "0.18.0",
            },
            "0.16.0",
            "VLLMOP_SIM_VERSION",
        ),
        (
            {"VLLMOP_VLLM_VERSION": "0.16.0", "VLLM_SIM_VERSION": "0.18.0"},
            "0.16.0",
            "VLLMOP_VLLM_VERSION",
        ),
        ({"VLLM_SIM_VERSION": "0.16.0"}, "0.16.0", "VLLM_SIM_VERSION"),
        ({}, "0.17.0", None),
    ],
)
def test_version_sources_in_order(env: dict[str, str], expected: str, source: str | None) -> None:
    assert cli.version_source(env) == (expected, source)
    assert cli.config_from_args(["m"], PROG, env).version == v(expected)


def test_rendered_0_16_pod_runs_on_the_stand_in_with_its_0_16_flag() -> None:
    # The 0.16 example with the project image as its "vLLM": the operator renders the version
    # it checked the flags against, and the stand-in accepts 0.16's --disable-log-requests.
    resource = yaml.safe_load((ROOT / "examples" / "qwen3-30b-a3b-v0.16-legacy.yaml").read_text())
    resource["spec"]["engine"]["image"] = "vllm-operator:dev"
    resource["spec"]["engine"]["version"] = "0.16.0"
    (deployment,) = [
        m for m in render_all(parse_vllm_deployment(resource)) if m["kind"] == "Deployment"
    ]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert env["VLLMOP_VLLM_VERSION"] == "0.16.0"
    assert "--disable-log-requests" in container["args"]
    assert cli.config_from_args(list(container["args"]), PROG, env).version == v("0.16.0")
    with pytest.raises(cli._Exit):  # what happened before: the stand-in guessed 0.17.0
        cli.config_from_args(list(container["args"]), PROG, {})


def _warnings(argv: list[str], env: dict[str, str]) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    cli.log.addHandler(handler)
    try:
        cli._warn_about_env(argv, env)
    finally:
        cli.log.removeHandler(handler)
    return stream.getvalue()


def test_missing_version_and_old_names_are_warned_about() -> None:
    text = _warnings(["m"], {"VLLM_SIM_TIME_SCALE": "1"})
    assert "no vLLM version given: emulating 0.17.0; set VLLMOP_SIM_VERSION" in text
    assert "VLLM_SIM_TIME_SCALE: renamed to VLLMOP_SIM_*" in text
    assert _warnings(["m"], {"VLLMOP_VLLM_VERSION": "0.16.0"}) == ""
    assert _warnings(["m", "--sim-version", "0.16.0"], {}) == ""


def test_what_vllm_refuses_after_argparse_stops_the_simulator(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vLLM raises after parsing (serve's validate, VllmConfig): the simulator too, exit 1."""
    for extra, reason in (
        (["--enable-log-outputs"], "--enable-log-outputs requires --enable-log-requests"),
        (["-O4"], "Input should be 0, 1, 2 or 3"),
    ):
        with pytest.raises(cli._Exit) as info:
            cli.config_from_args(["m", *extra, "--sim-version", "0.17.0"], PROG, {})
        assert info.value.status == 1
        assert reason in capsys.readouterr().err


def test_converted_eager_values_make_the_simulator_eager() -> None:
    for extra in (["-O00"], ["-cc", '{"mode": "NONE"}'], ["-cc.mode=none"], ["-O0.0"]):
        config = cli.config_from_args(["m", *extra, "--sim-version", "0.17.0"], PROG, {})
        assert config.profile.mode == "eager", extra
    config = cli.config_from_args(["m", "-O0", "-cc", '{"mode": 3}'], PROG, {})
    assert config.profile.mode == "default"
