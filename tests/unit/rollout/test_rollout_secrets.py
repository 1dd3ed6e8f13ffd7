"""Which Secrets a VLLMDeployment may put into its pods (rollout/references.py).

Creating a VLLMDeployment puts the Secrets it names into a pod whose image the author picks.
By default any Secret of the namespace may be named (VLLMDeployment create = pod create); an
operator configured with ``--allowed-secret`` refuses the others as an invalid spec, before
anything is created, and leaves what serves alone.
"""

from __future__ import annotations

import pytest
from rollout_world import World, spec, summary

from vllm_operator.config import config_from_args
from vllm_operator.rollout import Settings

HF = {"hfTokenSecret": {"name": "hf-token", "key": "token"}}
KEY = {"apiKeySecret": {"name": "vllm-key", "key": "api-key"}}


def world(allowed: tuple[str, ...] | None, **extra: object) -> World:
    settings = Settings(bench_image="op:1", job_start_seconds=120, allowed_secrets=allowed)
    return World(spec(**extra), settings)


def test_without_a_list_any_secret_of_the_namespace_may_be_referenced() -> None:
    w = world(
        None,
        model={"name": "Qwen/Qwen3-8B", **HF},
        engine={"image": "vllm/vllm-openai:v0.17.0", **KEY},
    )
    w.step()
    assert len(w.revisions()) == 1


@pytest.mark.parametrize(
    "allowed",
    [("ml/hf-token", "ml/vllm-key"), ("ml/*",), ("m?/hf-*", "*/vllm-key")],
)
def test_listed_secrets_pass(allowed: tuple[str, ...]) -> None:
    w = world(
        allowed,
        model={"name": "Qwen/Qwen3-8B", **HF},
        engine={"image": "vllm/vllm-openai:v0.17.0", **KEY},
    )
    w.step()
    assert len(w.revisions()) == 1


@pytest.mark.parametrize(
    ("allowed", "refused"),
    [
        (("ml/hf-token",), ["spec.engine.apiKeySecret.name"]),
        (("other/*",), ["spec.model.hfTokenSecret.name", "spec.engine.apiKeySecret.name"]),
        (("ml/hf-token-2", "ml/vllm-key"), ["spec.model.hfTokenSecret.name"]),
        ((), ["spec.model.hfTokenSecret.name", "spec.engine.apiKeySecret.name"]),
    ],
)
def test_unlisted_secret_is_an_invalid_spec_and_nothing_is_created(
    allowed: tuple[str, ...], refused: list[str]
) -> None:
    w = world(
        allowed,
        model={"name": "Qwen/Qwen3-8B", **HF},
        engine={"image": "vllm/vllm-openai:v0.17.0", **KEY},
    )
    p = w.settle()
    assert w.objects == {}
    assert p.actions == ()
    assert w.status["phase"] == "Failed"
    message = w.condition("Stalled")["message"]
    assert w.condition("Stalled")["reason"] == "InvalidSpec"
    for field in refused:
        assert field in message
    assert "not on the operator's allow-list" in message
    assert w.events().count("InvalidSpec") == 1


def test_a_serving_revision_is_left_alone_when_its_successor_names_an_unlisted_secret() -> None:
    w = world(("ml/hf-token",))
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary())
    w.step()
    w.ready_all()
    w.settle()
    stable = w.serving()
    assert stable is not None
    w.set_spec(spec(engine={"image": "vllm/vllm-openai:v0.17.0", **KEY}))
    p = w.settle()
    assert p.actions == ()
    assert w.status["phase"] == "Degraded"
    assert w.serving() == stable
    assert w.revisions() == [stable]


def test_config_flag_and_environment() -> None:
    flags = config_from_args(["--allowed-secret", "ml/hf-*", "--allowed-secret", "*/k"], {}, "run")
    assert flags.allowed_secrets == ("ml/hf-*", "*/k")
    env = config_from_args([], {"VLLM_OPERATOR_ALLOWED_SECRETS": "a/b, c/*"}, "run")
    assert env.allowed_secrets == ("a/b", "c/*")
    assert isinstance(env, Settings)  # what the reconciler hands the planner, as is
    assert config_from_args([], {}, "run").allowed_secrets is None


@pytest.mark.parametrize("bad", ["hf-token", "/x", "ml/", "a/b/c"])
def test_config_refuses_patterns_without_a_namespace(bad: str) -> None:
    with pytest.raises(SystemExit) as done:
        config_from_args(["--allowed-secret", bad], {}, "run")
    assert done.value.code == 2
    with pytest.raises(SystemExit) as done:
        config_from_args([], {"VLLM_OPERATOR_ALLOWED_SECRETS": bad}, "run")
    assert done.value.code == 2
