"""Spellings vLLM's parser accepts are judged like the canonical ones (issue 12's list).

Each test here failed before the policy read vLLM's recorded parser: underscores slipped
past every check, ``=value`` on switches passed, and eager forms other than
``--enforce-eager`` left the launch plan "compiled".
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vllm_operator.api import VLLMDeploymentSpec
from vllm_operator.engine import flagdata
from vllm_operator.engine.policy import plan_launch
from vllm_operator.engine.probes import probes
from vllm_operator.errors import SpecErrors

MakeSpec = Callable[..., VLLMDeploymentSpec]


def refused(make_spec: MakeSpec, *args: str, image: str = "vllm/vllm-openai:v0.17.0",
            **engine: object) -> SpecErrors:  # fmt: skip
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec(image, extraArgs=list(args), **engine))
    return info.value


def test_enforce_eager_with_underscore_runs_eager_with_warning_and_eager_probes(
    make_spec: MakeSpec,
) -> None:
    plan = plan_launch(make_spec(extraArgs=["--enforce_eager"]))
    assert not plan.compiled
    assert any("4,602 ms" in w for w in plan.warnings)
    compiled = plan_launch(make_spec())
    eager_budget = probes(8000, plan.compiled, None)["startupProbe"]["failureThreshold"]
    compiled_budget = probes(8000, compiled.compiled, None)["startupProbe"]["failureThreshold"]
    assert eager_budget < compiled_budget


@pytest.mark.parametrize(
    ("args", "owner"),
    [
        (["--tensor_parallel_size=2"], "spec.engine.tensorParallelSize"),
        (["--tensor-parallel", "2"], "spec.engine.tensorParallelSize"),  # abbreviation
        (["--served_model_name", "x"], "spec.model.servedModelName"),
        (["--max_model_len=4k"], "spec.engine.maxModelLen"),
        (["--port=9000"], "spec.service.port"),
    ],
)
def test_spec_owned_settings_are_refused_in_every_spelling(
    make_spec: MakeSpec, args: list[str], owner: str
) -> None:
    (error,) = refused(make_spec, *args).errors
    assert error.field == "spec.engine.extraArgs[0]"
    assert owner in error.message


def test_api_key_with_underscore_meets_api_key_secret(make_spec: MakeSpec) -> None:
    errors = refused(make_spec, "--api_key=k", apiKeySecret={"name": "s", "key": "k"}).errors
    assert any("apiKeySecret" in e.message for e in errors)
    plan = plan_launch(make_spec(extraArgs=["--api_key", "k"]))
    assert any("--api-key puts the key into the pod spec" in w for w in plan.warnings)


def test_tensor_parallel_underscore_does_not_skip_the_gpu_count(make_spec: MakeSpec) -> None:
    # Refused as spec-owned: the GPU count can no longer be bypassed by spelling it so.
    errors = refused(make_spec, "--tensor_parallel_size=8").errors
    assert any("spec.engine.tensorParallelSize" in e.message for e in errors)


@pytest.mark.parametrize(
    "arg", ["--enforce-eager=true", "--enforce_eager=1", "--trust-remote-code=false"]
)
def test_value_on_a_switch_is_refused_with_argparses_reason(make_spec: MakeSpec, arg: str) -> None:
    (error,) = refused(make_spec, arg).errors
    assert "ignored explicit argument" in error.message
    assert error.field == "spec.engine.extraArgs[0]"


@pytest.mark.parametrize(
    ("image", "args"),
    [
        ("vllm/vllm-openai:v0.17.0", ["-O0"]),
        ("vllm/vllm-openai:v0.17.0", ["-O", "0"]),
        ("vllm/vllm-openai:v0.17.0", ["--optimization-level", "0"]),
        ("vllm/vllm-openai:v0.17.0", ["--optimization_level=0"]),
        ("vllm/vllm-openai:v0.17.0", ["-cc", '{"mode": 0}']),
        ("vllm/vllm-openai:v0.17.0", ["--compilation-config", '{"mode": 0}']),
        ("vllm/vllm-openai:v0.17.0", ["-cc.mode=0"]),
        ("vllm/vllm-openai:v0.17.0", ["-cc.mode", "0"]),
        ("vllm/vllm-openai:v0.17.0", ["--compilation-config.mode=0"]),
        ("vllm/vllm-openai:v0.33.0", ["-cc.mode=0"]),
        ("vllm/vllm-openai:v0.10.2", ["-O0"]),  # -O is the compilation level there
        ("vllm/vllm-openai:v0.10.2", ["--compilation-config", '{"level": 0}']),
    ],
)
def test_every_eager_form_warns_and_plans_eager(
    make_spec: MakeSpec, image: str, args: list[str]
) -> None:
    plan = plan_launch(make_spec(image, extraArgs=args))
    assert not plan.compiled, args
    assert any("4,602 ms" in w and "run eager" in w for w in plan.warnings), plan.warnings


@pytest.mark.parametrize(
    ("image", "args"),
    [
        ("vllm/vllm-openai:v0.17.0", ["-O3"]),
        ("vllm/vllm-openai:v0.17.0", ["-cc", '{"mode": 3}']),
        ("vllm/vllm-openai:v0.17.0", ["--enforce-eager", "--no-enforce-eager"]),
        # 0.10.2 ignores an unknown "mode" key: still compiled (recorded from its parser)
        ("vllm/vllm-openai:v0.10.2", ["--compilation-config", '{"mode": 0}']),
    ],
)
def test_forms_that_stay_compiled(make_spec: MakeSpec, image: str, args: list[str]) -> None:
    plan = plan_launch(make_spec(image, extraArgs=args))
    assert plan.compiled, args
    assert not any("run eager" in w for w in plan.warnings)


def test_unknown_flag_gets_did_you_mean(make_spec: MakeSpec) -> None:
    (error,) = refused(make_spec, "--enforce-eagre").errors
    assert "did you mean --enforce-eager" in error.fix
    assert "unrecognized arguments: --enforce-eagre" in error.message


def test_removed_flag_says_when_from_the_data_and_what_instead(make_spec: MakeSpec) -> None:
    (error,) = refused(make_spec, "--swap-space", "4", image="vllm/vllm-openai:v0.19.0").errors
    assert "removed in vLLM 0.18.0" in error.message
    assert error.field == "spec.engine.extraArgs[0]"


def test_no_form_and_list_values_are_understood(make_spec: MakeSpec) -> None:
    plan = plan_launch(
        make_spec(
            extraArgs=["--no-enable-prefix-caching", "--cudagraph-capture-sizes", "1", "2", "4"]
        )
    )
    assert "--cudagraph-capture-sizes" in plan.args


def test_release_newer_than_the_data_uses_the_nearest_older_table(make_spec: MakeSpec) -> None:
    newest = flagdata.newest()
    newer = f"{newest.major}.{newest.minor + 7}.0"
    plan = plan_launch(make_spec(f"vllm/vllm-openai:v{newer}"))
    assert plan.flags_checked_against == newest
    assert plan.flags_from_older_release
    assert any(f"checked against the parser of vLLM {newest}" in w for w in plan.warnings)
    exact = plan_launch(make_spec())
    assert not exact.flags_from_older_release


def test_help_is_refused_because_vllm_would_exit(make_spec: MakeSpec) -> None:
    (error,) = refused(make_spec, "--seed", "1", "-h").errors
    assert error.field == "spec.engine.extraArgs[2]"
    assert "exit" in error.message


@pytest.mark.parametrize(
    "args",
    [
        ["--hf-overrides", "[" * 1900 + "]" * 1900],
        ["--hf-overrides", '{"a":' * 600 + "1" + "}" * 600],
        ["-cc." + ".".join(["k"] * 1500) + "=1"],
    ],
)
def test_deeply_nested_values_end_in_a_plan_or_a_named_error(
    make_spec: MakeSpec, args: list[str]
) -> None:
    fields: list[str] = []
    try:
        plan_launch(make_spec(extraArgs=args))
    except SpecErrors as e:
        fields = [err.field for err in e.errors]
    assert all(f.startswith("spec.engine.extraArgs") for f in fields)


def test_nesting_deeper_than_python_can_build_is_refused(make_spec: MakeSpec) -> None:
    (error,) = refused(make_spec, "-cc." + ".".join(["k"] * 1500) + "=1").errors
    assert "RecursionError" in error.message


def test_key_flags_show_the_forms_as_written(make_spec: MakeSpec) -> None:
    plan = plan_launch(make_spec(extraArgs=["--max_num_seqs=8", "-O0", "-cc.mode", "0"]))
    assert plan.key_flags[-3:] == ("--max_num_seqs=8", "-O0", "-cc.mode 0")


def test_patch_release_missing_from_pypi_uses_its_predecessor(make_spec: MakeSpec) -> None:
    plan = plan_launch(make_spec("vllm/vllm-openai:v0.17.2"))
    assert str(plan.flags_checked_against) == "0.17.1"
    assert any("nearest older recorded release" in w for w in plan.warnings)
