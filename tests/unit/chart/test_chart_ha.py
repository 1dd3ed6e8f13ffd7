"""The chart runs the operator highly available: replicas, leader-election flags, RBAC, PDB.

The rendered container arguments go through the operator's own argument parser, so a flag
the chart passes and ``vllm-operator run`` does not understand (or reads differently) fails
here, not in a pod's CrashLoopBackOff.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from vllm_operator.config import config_from_args

CHART = Path(__file__).resolve().parents[3] / "charts" / "vllm-operator"


def _docs(values: dict[str, Any]) -> list[dict[str, Any]]:
    rendered = helm_python.Chart.load(CHART).render(values, name="vo", namespace="ops")
    return [
        doc
        for path, text in rendered.items()
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def _operator_config(deployment: dict[str, Any]) -> Any:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: "pod-x" for e in container["env"] if "valueFrom" in e}
    return config_from_args(container["args"][1:], env, "vllm-operator run")


def test_defaults_run_two_replicas_with_leader_election_and_a_pdb() -> None:
    docs = _docs({})
    deployment = _one(docs, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["type"] == "RollingUpdate"
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] == 30
    config = _operator_config(deployment)
    assert config.leader_election
    assert (config.lease_name, config.lease_namespace) == ("vo-vllm-operator", "ops")
    assert (
        config.lease_duration_seconds,
        config.renew_deadline_seconds,
        config.retry_period_seconds,
    ) == (15, 10.0, 2.0)
    grace = spec["template"]["spec"]["terminationGracePeriodSeconds"]
    assert config.shutdown_grace_seconds == 20
    assert config.shutdown_grace_seconds < grace
    assert config.pod_name == "pod-x"  # the identity in the Lease starts with the pod name
    pdb = _one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    labels = spec["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in pdb["spec"]["selector"]["matchLabels"].items())
    role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == "ops")
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        }
    ]


def test_timings_reach_the_operator() -> None:
    values = {
        "leaderElection": {
            "leaseDurationSeconds": 30,
            "renewDeadlineSeconds": 20,
            "retryPeriodSeconds": 4,
        }
    }
    config = _operator_config(_one(_docs(values), "Deployment"))
    assert config.timings.lease_duration == 30
    assert config.timings.renew_deadline == 20
    assert config.timings.retry_period == 4


def test_without_leader_election_one_replica_recreate_no_lease_no_pdb() -> None:
    docs = _docs({"leaderElection": {"enabled": False}, "replicaCount": 1})
    deployment = _one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert not _operator_config(deployment).leader_election
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert not [d for d in docs if d["metadata"]["name"].endswith("-leader-election")]


def test_single_replica_with_election_has_no_pdb() -> None:
    docs = _docs({"replicaCount": 1})
    assert _one(docs, "Deployment")["spec"]["replicas"] == 1
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"leaderElection": {"enabled": False}}, "replicaCount > 1 needs leaderElection"),
        (
            {"terminationGracePeriodSeconds": 20, "operator": {"shutdownGraceSeconds": 20}},
            "terminationGracePeriodSeconds must be more than",
        ),
    ],
)
def test_unsafe_combinations_are_refused(values: dict[str, Any], words: str) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=words):
        _docs(values)


def test_timings_the_operator_refuses_fail_at_start_with_the_flags_named() -> None:
    values = {"leaderElection": {"leaseDurationSeconds": 5, "renewDeadlineSeconds": 10}}
    with pytest.raises(SystemExit):
        _operator_config(_one(_docs(values), "Deployment"))
