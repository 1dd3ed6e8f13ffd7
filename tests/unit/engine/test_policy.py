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
