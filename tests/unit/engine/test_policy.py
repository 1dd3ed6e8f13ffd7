"""The engine policy: version resolution, mode flags, extra-arg and env rules."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vllm_operator.api import VLLMDeploymentSpec
from vllm_operator.engine.policy import plan_launch
from vllm_operator.engine.version import v
from vllm_operator.errors import SpecErrors

MakeSpec = Callable[..., VLLMDeploymentSpec]


def fields_of(exc: SpecErrors) -> list[str]:
    return [e.field for e in exc.errors]


def test_model_first_then_port_and_served_name(make_spec: MakeSpec) -> None:
    plan = plan_launch(make_spec())
    assert plan.args[0] == "Qwen/Qwen3-30B-A3B-Instruct-2507-GPTQ-Int4"
    assert plan.args[1:5] == ("--port", "8000", "--served-model-name", plan.args[0])
    assert plan.version == v("0.17.0")


@pytest.mark.parametrize(
    ("image", "mode", "present", "absent"),
    [
        ("vllm/vllm-openai:v0.17.0", "throughput", ["--performance-mode"], ["--enforce-eager"]),
        ("vllm/vllm-openai:v0.17.0", "balanced", ["--performance-mode"], ["--enforce-eager"]),
        ("vllm/vllm-openai:v0.16.0", "throughput", [], ["--performance-mode", "--enforce-eager"]),
        ("vllm/vllm-openai:v0.16.0", "eager", ["--enforce-eager"], ["--performance-mode"]),
        ("vllm/vllm-openai:v0.17.0", "eager", ["--enforce-eager"], ["--performance-mode"]),
    ],
)
def test_mode_flags_by_version(
    make_spec: MakeSpec, image: str, mode: str, present: list[str], absent: list[str]
) -> None:
    args = plan_launch(make_spec(image, performanceMode=mode)).args
    for flag in present:
        assert flag in args
    for flag in absent:
        assert flag not in args
    if "--performance-mode" in present:
        assert args[args.index("--performance-mode") + 1] == mode


def test_removed_flag_names_the_replacement(make_spec: MakeSpec) -> None:
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec(extraArgs=["--max-num-seqs", "8", "--disable-log-requests"]))
    (error,) = info.value.errors
    assert error.field == "spec.engine.extraArgs[2]"
    assert "--enable-log-requests" in error.fix


@pytest.mark.parametrize(
    ("image", "version", "expected"),
    [
        ("vllm/vllm-openai:v0.17.0", None, "0.17.0"),
        ("registry.local:5000/vllm/vllm-openai:v0.22.0", None, "0.22.0"),
        ("vllm/vllm-openai@sha256:" + "a" * 64, "0.16.0", "0.16.0"),
        ("vllm/vllm-openai:latest", "v0.33.0", "0.33.0"),
        ("vllm/vllm-openai:v0.17.0", "0.17.0", "0.17.0"),
    ],
)
def test_version_resolution(
    make_spec: MakeSpec, image: str, version: str | None, expected: str
) -> None:
    spec = make_spec(image, **({"version": version} if version else {}))
    assert str(plan_launch(spec).version) == expected


def test_version_must_agree_with_the_tag(make_spec: MakeSpec) -> None:
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec("vllm/vllm-openai:v0.17.0", version="0.16.0"))
    assert fields_of(info.value) == ["spec.engine.version"]


def test_too_old_version_is_refused(make_spec: MakeSpec) -> None:
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec("vllm/vllm-openai:v0.9.2"))
    assert fields_of(info.value) == ["spec.engine.image"]
    assert "0.10.2" in info.value.errors[0].fix


@pytest.mark.parametrize(
    ("image", "requested", "resolved"),
    [
        ("vllm/vllm-openai:v0.16.0", "auto", "strip-cuda"),
        ("vllm/vllm-openai:v0.17.1", "auto", "strip-cuda"),
        ("vllm/vllm-openai:v0.12.0", "auto", "none"),
        ("vllm/vllm-openai:v0.22.0", "auto", "none"),
        ("vllm/vllm-openai:v0.22.0", "strip-cuda", "strip-cuda"),
        ("vllm/vllm-openai:v0.17.0", "none", "none"),
    ],
)
def test_library_path_fix_resolution(
    make_spec: MakeSpec, image: str, requested: str, resolved: str
) -> None:
    assert plan_launch(make_spec(image, libraryPathFix=requested)).library_path_fix == resolved


def test_unset_fix_warns_about_gke(make_spec: MakeSpec) -> None:
    plan = plan_launch(make_spec(libraryPathFix="unset"))
    assert plan.library_path_fix == "unset"
    assert any("/usr/local/nvidia/lib64" in w and "GKE" in w for w in plan.warnings)


def test_extra_enforce_eager_warns_with_its_cost(make_spec: MakeSpec) -> None:
    plan = plan_launch(make_spec(performanceMode="throughput", extraArgs=["--enforce-eager"]))
    assert plan.args[-1] == "--enforce-eager"
    assert not plan.compiled
    (warning,) = plan.warnings
    assert "4,602 ms" in warning
    assert "886 ms" in warning


def test_optimization_level_zero_warns_like_eager(make_spec: MakeSpec) -> None:
    for args in (["-O0"], ["--optimization-level", "0"], ["-O", "0"], ["--optimization-level=0"]):
        plan = plan_launch(make_spec(extraArgs=args))
        assert not plan.compiled, args
        assert any("4,602 ms" in w for w in plan.warnings), args
    assert plan_launch(make_spec(extraArgs=["-O3"])).compiled


def test_mode_without_effect_on_legacy_version_warns(make_spec: MakeSpec) -> None:
    legacy = "vllm/vllm-openai:v0.16.0"
    assert any(
        "no effect" in w
        for w in plan_launch(make_spec(legacy, performanceMode="throughput")).warnings
    )
    assert plan_launch(make_spec(legacy, performanceMode="balanced")).warnings == ()
    assert plan_launch(make_spec(performanceMode="throughput")).warnings == ()


def test_unchecked_newer_version_warns(make_spec: MakeSpec) -> None:
    plan = plan_launch(make_spec("vllm/vllm-openai:v0.40.1"))
    assert any("checked against the parser of vLLM 0.33.0" in w for w in plan.warnings)
    assert "--performance-mode" in plan.args


def test_eager_mode_is_compiled_false_and_shorter_budget(make_spec: MakeSpec) -> None:
    plan = plan_launch(make_spec(performanceMode="eager"))
    assert not plan.compiled
    assert plan.key_flags == ("--tensor-parallel-size 1", "--enforce-eager")
    assert plan.warnings == ()


def test_optional_fields_become_flags_in_order(make_spec: MakeSpec) -> None:
    spec = make_spec(
        tensorParallelSize=2,
        maxModelLen=4096,
        gpuMemoryUtilization=0.85,
        extraArgs=["--max-num-seqs", "64", "--seed=1"],
        top={
            "model": {"name": "m/x", "revision": "abc123", "servedModelName": "x"},
            "resources": {"gpus": 2},
            "service": {"port": 9000},
        },
    )
    plan = plan_launch(spec)
    assert plan.args == (
        "m/x",
        "--port",
        "9000",
        "--served-model-name",
        "x",
        "--revision",
        "abc123",
        "--tensor-parallel-size",
        "2",
        "--max-model-len",
        "4096",
        "--gpu-memory-utilization",
        "0.85",
        "--performance-mode",
        "balanced",
        "--max-num-seqs",
        "64",
        "--seed=1",
    )
    assert plan.key_flags == (
        "--tensor-parallel-size 2",
        "--max-model-len 4096",
        "--performance-mode balanced",
        "--max-num-seqs 64",
    )


def test_idle_gpus_warn(make_spec: MakeSpec) -> None:
    plan = plan_launch(make_spec(top={"resources": {"gpus": 4}}))
    assert any("idle" in w for w in plan.warnings)


def test_pipeline_parallel_counts_towards_gpus(make_spec: MakeSpec) -> None:
    spec = make_spec(tensorParallelSize=2, extraArgs=["-pp", "2"], top={"resources": {"gpus": 2}})
    with pytest.raises(SpecErrors) as info:
        plan_launch(spec)
    assert fields_of(info.value) == ["spec.engine.tensorParallelSize"]
    assert "4 GPUs" in info.value.errors[0].message


def test_all_problems_are_reported_at_once(make_spec: MakeSpec) -> None:
    spec = make_spec(
        "vllm/vllm-openai:v0.17.0",
        tensorParallelSize=8,
        extraArgs=["--disable-log-requests", "--port", "1", "--task", "generate"],
        env=[{"name": "VLLM_PORT", "value": "1"}, {"name": "HF_TOKEN", "value": "x"}],
    )
    with pytest.raises(SpecErrors) as info:
        plan_launch(spec)
    assert fields_of(info.value) == [
        "spec.engine.extraArgs[0]",
        "spec.engine.extraArgs[1]",
        "spec.engine.extraArgs[3]",
        "spec.engine.env[0].name",
        "spec.engine.env[1].name",
        "spec.engine.tensorParallelSize",
    ]


def test_without_a_version_other_problems_are_still_reported(make_spec: MakeSpec) -> None:
    spec = make_spec(
        "vllm/vllm-openai:nightly",
        tensorParallelSize=2,
        env=[{"name": "VLLM_PORT", "value": "1"}],
    )
    with pytest.raises(SpecErrors) as info:
        plan_launch(spec)
    assert fields_of(info.value) == [
        "spec.engine.version",
        "spec.engine.env[0].name",
        "spec.engine.tensorParallelSize",
    ]


@pytest.mark.parametrize(
    ("extra", "mode", "needle"),
    [
        (["--performance-mode", "throughput"], "throughput", "spec.engine.performanceMode"),
        (["--performance-mode=interactivity"], "balanced", "spec.engine.performanceMode"),
        (["-tp", "2"], "balanced", "spec.engine.tensorParallelSize"),
        (["--served-model-name", "x"], "balanced", "spec.model.servedModelName"),
        (["--max-model-len", "8"], "balanced", "spec.engine.maxModelLen"),
        (["--gpu-memory-utilization", "0.5"], "balanced", "spec.engine.gpuMemoryUtilization"),
        (["--revision", "main"], "balanced", "spec.model.revision"),
        (["--host", "127.0.0.1"], "balanced", "remove it"),
        (["--enforce-eager"], "eager", "remove it"),
    ],
)
def test_extra_args_that_contradict_the_spec(
    make_spec: MakeSpec, extra: list[str], mode: str, needle: str
) -> None:
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec(performanceMode=mode, extraArgs=["--seed", "1", *extra]))
    (error,) = info.value.errors
    assert error.field == "spec.engine.extraArgs[2]"
    assert needle in error.fix


def test_removed_and_not_yet_existing_flags_by_version(make_spec: MakeSpec) -> None:
    ok_016 = ["--disable-log-requests", "--cudagraph-capture-sizes", "1", "2"]
    assert plan_launch(make_spec("vllm/vllm-openai:v0.16.0", extraArgs=ok_016))
    # one argv item "1 2" is not a list: vLLM's int conversion refuses it
    with pytest.raises(SpecErrors) as info:
        plan_launch(
            make_spec("vllm/vllm-openai:v0.16.0", extraArgs=["--cudagraph-capture-sizes", "1 2"])
        )
    assert "cannot be converted" in info.value.errors[0].message
    assert plan_launch(
        make_spec("vllm/vllm-openai:v0.12.0", extraArgs=["--cudagraph-capture-sizes", "8"])
    )
    with pytest.raises(SpecErrors) as info:
        plan_launch(
            make_spec("vllm/vllm-openai:v0.11.0", extraArgs=["--cudagraph-capture-sizes", "8"])
        )
    assert "added in vLLM 0.11.1" in info.value.errors[0].message
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec("vllm/vllm-openai:v0.33.0", extraArgs=["--swap-space", "4"]))
    assert info.value.errors[0].field == "spec.engine.extraArgs[0]"


def test_literal_token_anywhere_is_refused(make_spec: MakeSpec) -> None:
    token = "hf_" + "a1B2" * 9
    with pytest.raises(SpecErrors) as info:
        plan_launch(
            make_spec(env=[{"name": "MY_TOKEN", "value": token}], extraArgs=["--tokenizer", token])
        )
    assert fields_of(info.value) == ["spec.engine.env[0].value", "spec.engine.extraArgs[1]"]
    assert all("hfTokenSecret" in e.fix for e in info.value.errors)


def test_ld_library_path_env_only_with_fix_none(make_spec: MakeSpec) -> None:
    env = [{"name": "LD_LIBRARY_PATH", "value": "/opt/lib"}]
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec(env=env))
    assert "libraryPathFix: none" in info.value.errors[0].fix
    assert plan_launch(make_spec(env=env, libraryPathFix="none")).library_path_fix == "none"
    assert plan_launch(make_spec("vllm/vllm-openai:v0.22.0", env=env)).library_path_fix == "none"


def test_value_flag_without_value(make_spec: MakeSpec) -> None:
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec(extraArgs=["--enable-prefix-caching", "--max-num-seqs"]))
    assert fields_of(info.value) == ["spec.engine.extraArgs[1]"]


def test_nul_characters_are_refused(make_spec: MakeSpec) -> None:
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec(extraArgs=["--tokenizer", "a\x00b"]))
    assert fields_of(info.value) == ["spec.engine.extraArgs[1]"]


def test_removed_flag_family_is_refused_by_prefix(make_spec: MakeSpec) -> None:
    args = ["--guided-decoding-disable-fallback"]
    assert plan_launch(make_spec("vllm/vllm-openai:v0.10.2", extraArgs=args))
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec("vllm/vllm-openai:v0.12.0", extraArgs=["--seed", "1", *args]))
    (error,) = info.value.errors
    assert error.field == "spec.engine.extraArgs[2]"
    assert "removed in vLLM 0.12.0" in error.message
    assert error.fix.startswith("use --structured-outputs-config")


def test_api_key_flag_next_to_the_secret_is_a_contradiction(make_spec: MakeSpec) -> None:
    secret = {"name": "vllm-key", "key": "key"}
    assert plan_launch(make_spec(apiKeySecret=secret))  # the key is env, not an argument
    cases = {0: ["--api-key", "s3cret"], 2: ["--max-num-seqs", "8", "--api-key=s3cret"]}
    for index, extra in cases.items():
        with pytest.raises(SpecErrors) as info:
            plan_launch(make_spec(apiKeySecret=secret, extraArgs=extra))
        (error,) = info.value.errors
        assert error.field == f"spec.engine.extraArgs[{index}]"
        assert "spec.engine.apiKeySecret" in error.message
        assert "apiKeySecret" in error.fix
    # Without the secret the flag still runs, with a warning that names the field.
    plan = plan_launch(make_spec(extraArgs=["--api-key", "s3cret"]))
    assert any("spec.engine.apiKeySecret" in w for w in plan.warnings)


def test_vllm_api_key_env_is_refused_with_or_without_the_secret(make_spec: MakeSpec) -> None:
    env = [{"name": "VLLM_API_KEY", "value": "s3cret"}]
    for extra in ({}, {"apiKeySecret": {"name": "vllm-key"}}):
        with pytest.raises(SpecErrors) as info:
            plan_launch(make_spec(env=env, **extra))
        (error,) = info.value.errors
        assert error.field == "spec.engine.env[0].name"
        assert error.fix == "put the key in a Secret and reference it with spec.engine.apiKeySecret"


def test_home_is_the_operators(make_spec: MakeSpec) -> None:
    """The container runs as a non-root user whose HOME is a volume; a spec cannot move it."""
    spec = make_spec("vllm/vllm-openai:v0.17.0", env=[{"name": "HOME", "value": "/root"}])
    with pytest.raises(SpecErrors) as info:
        plan_launch(spec)
    assert fields_of(info.value) == ["spec.engine.env[0].name"]
    assert "non-root" in info.value.errors[0].message


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("VLLMOP_LIBRARY_PATH_FIX", "set spec.engine.libraryPathFix instead"),
        ("VLLMOP_VLLM_VERSION", "set spec.engine.version instead"),
        # The name before the rename: in vLLM's namespace, and no longer read by the entrypoint.
        ("VLLM_OPERATOR_LIBRARY_PATH_FIX", "remove it and set spec.engine.libraryPathFix"),
    ],
)
def test_operator_env_is_refused_in_the_spec(make_spec: MakeSpec, name: str, needle: str) -> None:
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec(env=[{"name": name, "value": "none"}]))
    assert fields_of(info.value) == ["spec.engine.env[0].name"]
    assert needle in info.value.errors[0].fix


def test_every_variable_the_operator_renders_is_refused_in_the_spec(make_spec: MakeSpec) -> None:
    """One list: a name the operator sets that the spec could set too renders twice."""
    from vllm_operator.engine import tables
    from vllm_operator.render.deployment import _env

    rendered: set[str] = set()
    for fix in ("auto", "strip-cuda", "unset", "none"):
        spec = make_spec(
            libraryPathFix=fix,
            apiKeySecret={"name": "vllm-key"},
            top={"model": {"name": "m", "hfTokenSecret": {"name": "hf"}}},
        )
        rendered |= {e["name"] for e in _env(spec, plan_launch(spec))}
    assert {"USER", "HOME", "HF_TOKEN", "VLLM_API_KEY"} <= rendered
    assert rendered - set(tables.OWNED_ENV) == set()
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec(env=[{"name": "USER", "value": "root"}]))
    assert fields_of(info.value) == ["spec.engine.env[0].name"]
