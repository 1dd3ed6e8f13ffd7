"""Issue 21's four classes through the policy's own entry (a spec in, a plan or errors out).

Each case here was wrong before: values vLLM converts (``-O00``, ``{"mode": "NONE"}``)
left the plan compiled, forms vLLM refuses after argparse (``-O4``, a mode name it does
not know, ``--enable-log-outputs`` alone, a trailing ``--``) passed and crash-looped the
pod, ``--config FILE`` hid flags from every check, and ``--uds``/``--headless``/``--grpc``/
TLS/``-dp`` beyond the GPUs left no server where the probes look. vLLM's verdict on the
same forms is recorded per release (test_flag_conformance, test_config_time).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vllm_operator.api import VLLMDeploymentSpec
from vllm_operator.engine import flagdata
from vllm_operator.engine.policy import plan_launch
from vllm_operator.errors import SpecErrors

MakeSpec = Callable[..., VLLMDeploymentSpec]
V17, V22, V33 = "vllm/vllm-openai:v0.17.0", "vllm/vllm-openai:v0.22.0", "vllm/vllm-openai:v0.33.0"


def refused(make_spec: MakeSpec, image: str, *args: str, **top: object) -> SpecErrors:
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec(image, extraArgs=list(args), top=dict(top) or None))
    return info.value


# -- 1. values read the way vLLM converts them ---------------------------------------------


@pytest.mark.parametrize("image", [V17, V22, V33])
@pytest.mark.parametrize(
    "args",
    [
        ["-O00"],
        ["-O+0"],
        ["-O0.0"],
        ["--optimization-level", "-0"],
        ["--optimization-level=0_0"],
        ["-cc", '{"mode": "NONE"}'],
        ["-cc", '{"mode": "none"}'],
        ["-cc.mode=none"],
        ["-cc", '{"mode": false}'],
        ["-cc", '{"mode": 0.0}'],
        ["-O3", "-cc", '{"mode": 0}'],
    ],
)
def test_converted_eager_forms_plan_eager_with_the_warning(
    make_spec: MakeSpec, image: str, args: list[str]
) -> None:
    plan = plan_launch(make_spec(image, extraArgs=args))
    assert not plan.compiled, args
    assert any("run eager" in w and "4,602 ms" in w for w in plan.warnings), plan.warnings


@pytest.mark.parametrize("image", [V17, V22, V33])
@pytest.mark.parametrize(
    "args",
    [["-O0", "-cc", '{"mode": 3}'], ["-cc", '{"mode": "VLLM_COMPILE"}'], ["-O+1"], ["-cc", "{}"]],
)
def test_an_explicit_compiled_mode_wins_over_level_zero(
    make_spec: MakeSpec, image: str, args: list[str]
) -> None:
    plan = plan_launch(make_spec(image, extraArgs=args))
    assert plan.compiled, args


def test_level_in_cc_is_mapped_by_0_17_and_refused_by_0_22(make_spec: MakeSpec) -> None:
    assert not plan_launch(make_spec(V17, extraArgs=["-cc", '{"level": 0}'])).compiled
    errors = refused(make_spec, V22, "-cc", '{"level": 0}')
    assert "would exit at start" in errors.errors[0].message


def test_number_suffixes_inside_json_from_0_22(make_spec: MakeSpec) -> None:
    for image in (V22, V33):
        plan_launch(make_spec(image, extraArgs=["-cc", '{"max_cudagraph_capture_size": 1k}']))
        plan_launch(make_spec(image, extraArgs=["-cc.max_cudagraph_capture_size=1k"]))
    errors = refused(make_spec, V17, "-cc", '{"max_cudagraph_capture_size": 1k}')
    assert "argument --compilation-config/-cc" in errors.errors[0].message


# -- 2. what vLLM refuses after parsing, with its reason -----------------------------------


@pytest.mark.parametrize("image", [V17, V22, V33])
@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["-O4"], "Input should be 0, 1, 2 or 3"),
        (["--optimization-level", "1.5"], "Input should be 0, 1, 2 or 3"),
        (["--optimization-level", "NONE"], "Input should be 0, 1, 2 or 3"),
        (["--enable-log-outputs"], "--enable-log-outputs requires --enable-log-requests"),
        (["--enable-auto-tool-choice"], "--enable-auto-tool-choice requires --tool-call-parser"),
    ],
)
def test_refused_after_argparse_with_vllms_reason(
    make_spec: MakeSpec, image: str, args: list[str], reason: str
) -> None:
    (error,) = refused(make_spec, image, *args).errors
    assert "would stop at start, after parsing its arguments" in error.message
    assert reason in error.message


@pytest.mark.parametrize("image", [V17, V22, V33])
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ('{"mode": "bogus"}', "Invalid compilation mode: bogus. Valid modes are: NONE"),
        ('{"mode": "0"}', "Invalid compilation mode: 0"),
        ('{"mode": 4}', "mode"),
        ('{"cudagraph_capture_sizes": "x"}', "capture_sizes: Input should be a valid list"),
        ('{"backend": 3}', "backend: Input should be a valid string"),
        ('{"pass_config": {"bogus": true}}', "pass_config.bogus: Unexpected keyword argument"),
        ('{"pass_config": {"eliminate_noops": "x"}}', "eliminate_noops: Input should be a valid"),
    ],
)
def test_compilation_config_refused_at_argparse_with_the_field(
    make_spec: MakeSpec, image: str, value: str, reason: str
) -> None:
    (error,) = refused(make_spec, image, "-cc", value).errors
    assert "would exit at start" in error.message
    assert "argument --compilation-config/-cc" in error.message
    assert reason in error.message, error.message


def test_paired_options_pass_together(make_spec: MakeSpec) -> None:
    plan_launch(make_spec(V17, extraArgs=["--enable-log-outputs", "--enable-log-requests"]))
    tools = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    plan_launch(make_spec(V33, extraArgs=tools))


@pytest.mark.parametrize("image", [V17, V33])
def test_a_left_over_double_dash_is_refused_not_dropped(make_spec: MakeSpec, image: str) -> None:
    (error,) = refused(make_spec, image, "--max-num-seqs", "8", "--").errors
    assert 'unrecognized arguments: --")' in error.message
    assert error.field == "spec.engine.extraArgs[2]"
    assert "remove the --" in error.fix
    (error,) = refused(make_spec, image, "--", "--enforce-eager").errors
    assert "unrecognized arguments: -- --enforce-eager" in error.message


# -- 3. --config FILE ------------------------------------------------------------------------


@pytest.mark.parametrize("image", [V17, V33, "vllm/vllm-openai:v0.11.0"])
def test_config_file_is_refused_with_the_way_out(make_spec: MakeSpec, image: str) -> None:
    (error,) = refused(make_spec, image, "--max-num-seqs", "8", "--config", "/x.yaml").errors
    assert error.field == "spec.engine.extraArgs[2]"
    assert "YAML file before argparse" in error.message
    assert "spec.engine.extraArgs" in error.fix


@pytest.mark.parametrize("image", [V17, V33, "vllm/vllm-openai:v0.11.0"])
def test_config_with_equals_is_refused_because_vllm_ignores_the_file(
    make_spec: MakeSpec, image: str
) -> None:
    """``--config=FILE`` is one item: vLLM's rewrite looks for ``--config`` alone, argparse
    stores the path and nothing reads the file (issue 32, checked against vLLM)."""
    (error,) = refused(make_spec, image, "--max-num-seqs", "8", "--config=/x.yaml").errors
    assert error.field == "spec.engine.extraArgs[2]"
    assert "is ignored by vLLM" in error.message
    assert "only for --config FILE" in error.message
    assert "YAML file before argparse" not in error.message
    assert "spec.engine.extraArgs" in error.fix


# -- 4. no server where the probes look ------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "args", "needle"),
    [
        (V17, ["--uds", "/tmp/vllm.sock"], "Unix socket"),
        (V17, ["--headless"], "without an API server"),
        (V22, ["--grpc"], "gRPC"),
        (V33, ["--grpc"], "gRPC"),
        (V17, ["--ssl-keyfile", "/k.pem", "--ssl-certfile", "/c.pem"], "HTTPS"),
        (V33, ["--ssl_certfile=/c.pem"], "HTTPS"),
        (V17, ["--enable-ssl-refresh"], "HTTPS"),
    ],
)
def test_no_server_on_the_probe_port_is_refused(
    make_spec: MakeSpec, image: str, args: list[str], needle: str
) -> None:
    errors = refused(make_spec, image, *args).errors
    assert errors
    assert all(needle in e.message for e in errors), errors
    assert errors[0].field == "spec.engine.extraArgs[0]"


def test_grpc_before_it_existed_is_an_unknown_flag(make_spec: MakeSpec) -> None:
    (error,) = refused(make_spec, V17, "--grpc").errors
    assert "added in vLLM 0.18.0" in error.message  # from the recorded tables


def test_data_parallel_counts_towards_the_gpus(make_spec: MakeSpec) -> None:
    errors = refused(make_spec, V17, "-dp", "2", resources={"gpus": 1}).errors
    assert [e.field for e in errors] == ["spec.engine.tensorParallelSize"]
    assert "--data-parallel-size 2 needs 2 GPUs" in errors[0].message
    plan = plan_launch(make_spec(V17, extraArgs=["--data-parallel-size", "2"],
                                 top={"resources": {"gpus": 2}}))  # fmt: skip
    assert not any("idle" in w for w in plan.warnings)


_UNRECORDED = [
    r
    for r in flagdata.releases()
    if not flagdata.table(r).records_after_parse and "-cc" in flagdata.table(r).by_spelling
]


@pytest.mark.skipif(
    not _UNRECORDED, reason="every committed table records the after-argparse stages"
)
@pytest.mark.parametrize("release", _UNRECORDED[:2], ids=str)
def test_releases_recorded_before_the_classes_are_read_leniently(
    make_spec: MakeSpec, release: flagdata.Version
) -> None:
    """Their tables carry no after-argparse record: the nearest recorded release's
    conversions may make the plan eager, but never refuse what their own data does not."""
    image = f"vllm/vllm-openai:v{release}"
    for args in (["-O00"], ["-cc", '{"mode": "NONE"}'], ["-cc.mode=none"]):
        assert not plan_launch(make_spec(image, extraArgs=args)).compiled, (image, args)
    suffixed = '{"max_cudagraph_capture_size": 1k}'
    for args in (["-cc", '{"mode": "bogus"}'], ["-O4"], ["-cc", suffixed]):
        plan = plan_launch(make_spec(image, extraArgs=args))
        assert plan.compiled, (image, args)
