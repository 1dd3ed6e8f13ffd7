"""`vllm-operator run`'s high-availability settings: flags, environment, refusals."""

from __future__ import annotations

import pytest

from vllm_operator.config import OperatorConfig, config_from_args


def test_off_by_default_with_client_go_like_timings() -> None:
    config = config_from_args([], {}, "run")
    assert not config.leader_election
    assert (config.lease_name, config.lease_namespace) == ("vllm-operator", "default")
    assert (config.timings.lease_duration, config.timings.renew_deadline) == (15, 10.0)
    assert config.timings.retry_period == 2.0
    assert config.shutdown_grace_seconds == 20.0
    assert config == OperatorConfig()


def test_environment_as_the_chart_sets_it() -> None:
    env = {
        "VLLM_OPERATOR_LEADER_ELECTION": "true",
        "VLLM_OPERATOR_LEASE_DURATION_SECONDS": "30",
        "VLLM_OPERATOR_RENEW_DEADLINE_SECONDS": "20",
        "VLLM_OPERATOR_RETRY_PERIOD_SECONDS": "5",
        "VLLM_OPERATOR_SHUTDOWN_GRACE_SECONDS": "7",
        "POD_NAME": "vo-1234",
        "POD_NAMESPACE": "ops",
    }
    config = config_from_args([], env, "run")
    assert config.leader_election
    assert config.lease_namespace == "ops"
    assert config.pod_name == "vo-1234"
    assert (config.lease_duration_seconds, config.renew_deadline_seconds) == (30, 20.0)
    assert (config.retry_period_seconds, config.shutdown_grace_seconds) == (5.0, 7.0)


def test_flags_win_over_environment() -> None:
    config = config_from_args(
        ["--leader-election", "--lease-namespace=x", "--lease-name=y"],
        {"VLLM_OPERATOR_LEASE_NAMESPACE": "z", "POD_NAMESPACE": "w"},
        "run",
    )
    assert (config.leader_election, config.lease_namespace, config.lease_name) == (
        True,
        "x",
        "y",
    )


@pytest.mark.parametrize(
    ("argv", "env", "words"),
    [
        (["--lease-duration-seconds=10"], {}, "lease duration (10 s) must be more than the"),
        (["--renew-deadline-seconds=2"], {}, "renew deadline (2 s) must be more than 1.2 x"),
        (["--lease-duration-seconds=15.5"], {}, "--lease-duration-seconds: invalid int"),
        ([], {"VLLM_OPERATOR_LEASE_DURATION_SECONDS": "15.5"}, "whole seconds"),
        ([], {"VLLM_OPERATOR_RETRY_PERIOD_SECONDS": "2s"}, "RETRY_PERIOD_SECONDS='2s' is not a"),
        (["--retry-period-seconds=0"], {}, "must be > 0"),
    ],
)
def test_unsafe_timings_fail_naming_the_flags(
    argv: list[str], env: dict[str, str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        config_from_args(argv, env, "run")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert words in err
    assert "Traceback" not in err
