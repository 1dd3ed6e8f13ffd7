"""A team's own traffic through the operator: a dataset workload from a ConfigMap (issue 25).

Real kopf + operator + DevCluster + the local kubelet, as in ``test_rollout``: the benchmark
Job mounts the ConfigMap's key, passes the workload and the file to the real ``vllm-operator
bench``, which reads and checks the dataset before anything is sent; a malformed line ends
the gate as an Error naming that line, and no revision is promoted.
"""

from __future__ import annotations

import json
from typing import Any

from vllm_operator.render.job import DATASET_CLAIM_MOUNT, DATASET_MOUNT

from .harness import Rollout, resource

PROMPTS = [
    "Summarise the incident report in two sentences.",
    "Translate 'good morning' into French.",
    "Write a haiku about GPUs.",
    "List three causes of high tail latency.",
]


def dataset_lines(*extra: str) -> str:
    lines = [
        json.dumps({"messages": [{"role": "user", "content": p}], "max_tokens": 16})
        for p in PROMPTS
    ]
    return "\n".join([*lines, *extra]) + "\n"


def config_map(rollout: Rollout, text: str) -> None:
    rollout.cluster.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "team-prompts", "namespace": "default"},
            "data": {"prompts.jsonl": text},
        }
    )


WORKLOAD: dict[str, Any] = {
    "dataset": {"configMap": "team-prompts", "key": "prompts.jsonl", "maxOutputTokens": 64},
    "seed": 11,
    "load": {"mode": "rate", "rates": [2, 4], "secondsPerLevel": 2},
}


def gate() -> dict[str, Any]:
    return {
        "iterations": 3,
        "concurrency": [1, 4],
        "timeoutSeconds": 120,
        "workload": WORKLOAD,
        # p50: 4 and 8 requests a trial can show a median limit met (10 requests suffice at the
        # first look), never a p99 one (437 would)
        "thresholds": {"slo": {"ttftMs": {"p50": 60000}, "maxErrorPercent": 5}},
    }


def bench_container(rollout: Rollout) -> dict[str, Any]:
    jobs = rollout.objects("batch/v1", "jobs")
    assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]
    pod = jobs[0]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "dataset"]
    assert volume["configMap"] == {
        "name": "team-prompts",
        "items": [{"key": "prompts.jsonl", "path": "dataset"}],
    }
    return dict(container)


def test_a_dataset_workload_from_a_configmap_gates_the_revision(rollout: Rollout) -> None:
    config_map(rollout, dataset_lines())
    rollout.apply(resource(gate=gate()))
    container = rollout.wait(lambda: bench_container(rollout), 60, "the benchmark Job")
    args = container["args"]
    assert args[args.index("--dataset") + 1] == f"{DATASET_MOUNT}/dataset"
    sent = json.loads(args[args.index("--workload-json") + 1])
    assert sent["dataset"]["configMap"] == "team-prompts"
    assert sent["load"]["rates"] == [2.0, 4.0]
    assert {"name": "dataset", "mountPath": DATASET_MOUNT, "readOnly": True} in container[
        "volumeMounts"
    ]
    # The bench read the mounted file and accepted it (a missing or refused dataset is a
    # usage error, exit 2, which the gate reports as an Error).
    st = rollout.wait_phase("Serving", gate="Passed", timeout=90)
    assert st["lastGate"]["outcome"] == "Passed", st["lastGate"]
    # The load sweep sent the dataset's requests at both rates in place of the study's
    # shapes, and the SLO limits were judged at each level.
    summary = rollout.judged_figures()  # from the Job's log: status keeps their digest
    load = summary["load"]
    assert load["mode"] == "rate", load
    assert [lv["level"] for lv in load["levels"]] == [2.0, 4.0], load
    assert all(lv["requests"] > 0 for lv in load["levels"]), load
    assert all(lv["percentiles"]["ttft.p50"] for lv in load["levels"]), load
    assert not summary.get("latency"), summary
    assert not summary.get("concurrency"), summary
    assert not summary.get("errors"), summary
    reasons = " ".join(st["lastGate"]["reasons"])
    assert "ttft p50 at 2 req/s" in reasons, reasons
    assert "ttft p50 at 4 req/s" in reasons, reasons


def test_a_malformed_dataset_line_is_an_error_naming_it_and_sends_nothing(
    rollout: Rollout,
) -> None:
    bad = '{"messages": [{"role": "robot", "content": "hi"}]}'
    config_map(rollout, dataset_lines(bad))
    rollout.apply(resource(gate=gate()))
    st = rollout.wait_phase("Failed", timeout=90)
    record = st["lastGate"]
    assert record["outcome"] == "Error", record
    reasons = " ".join(record["reasons"])
    assert "--dataset: line 5: messages[0].role is 'robot'" in reasons, record
    assert "fix: use one of system, developer, user, assistant" in reasons, record
    # Refused before any load: the summary the bench wrote carries no figure at all.
    summary = rollout.judged_figures()
    assert summary["reasons"][0].startswith("usage: --dataset: line 5: "), summary
    assert summary["errors"] == {"client_error": 1}, summary  # the usage error's own mark
    for figures in ("latency", "concurrency", "quality", "load"):
        assert not summary.get(figures), summary
    assert rollout.serving_revision() is None


def test_a_dataset_on_a_claim_is_read_from_its_path(rollout: Rollout) -> None:
    """The local kubelet keeps claim ``data`` of ``default`` under ``kubelet/pvc/default``."""
    sharegpt = [
        {"conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": "ok then"}]}
        for p in PROMPTS
    ]
    claim = rollout.workdir / "kubelet" / "pvc" / "default" / "data" / "sets"
    claim.mkdir(parents=True)
    (claim / "support.json").write_text(json.dumps(sharegpt, indent=2))
    workload = {
        **WORKLOAD,
        "dataset": {
            "persistentVolumeClaim": "data",
            "path": "sets/support.json",
            "format": "sharegpt",
        },
    }
    rollout.apply(resource(gate={**gate(), "workload": workload}))
    st = rollout.wait_phase("Serving", gate="Passed", timeout=90)
    assert st["lastGate"]["outcome"] == "Passed", st["lastGate"]
    name = rollout.judged_figures()["identity"]["job"]
    job = rollout.cluster.history("batch/v1", "jobs", name)[0]  # deleted once judged
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--dataset") + 1] == f"{DATASET_CLAIM_MOUNT}/sets/support.json"
