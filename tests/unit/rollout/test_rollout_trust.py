"""A verdict is believed only from a Job that ended as documented and names this run.

Issue 10: code under test wrote a Passed summary to the termination log and interrupted the
bench; the pod died (exit 130) and the operator promoted the revision. Every way a Job can
end other than "exit 0 with Passed" or "exit 1 with Failed/Inconclusive" must be an Error.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from rollout_world import World, spec, summary

from vllm_operator.api.summary import RunIdentity
from vllm_operator.rollout import figures
from vllm_operator.rollout.results import parse_summary
from vllm_operator.rollout.trust import stricter

V17 = spec(image="vllm/vllm-openai:v0.17.0", gate={"thresholds": {"quality": {"minPassed": 12}}})


def benchmarking() -> World:
    w = World(V17)
    w.step()
    w.ready_all()
    w.step()
    return w


def rejected_as_error(w: World) -> list[str]:
    w.settle()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Error", gate
    assert w.status["phase"] == "Failed"
    assert w.serving() is None
    assert "Promoted" not in w.events()
    return list(gate["reasons"])


def test_documented_pass_is_believed() -> None:
    w = benchmarking()
    w.finish_job(summary(), exit_code=0)
    w.step()
    assert w.status["lastGate"]["outcome"] == "Passed"


@pytest.mark.parametrize(
    ("exit_code", "signal", "reason", "words"),
    [
        (130, None, "Error", "exited with code 130"),  # SIGINT after a forged summary
        (137, 9, "Error", "killed by signal 9"),
        (143, 15, "Error", "killed by signal 15"),
        (137, None, "OOMKilled", "OOM-killed"),
        (2, None, "Error", "exited with code 2"),
        (3, None, "Error", "exited with code 3"),
    ],
)
def test_passed_summary_from_a_pod_that_did_not_exit_as_documented_is_an_error(
    exit_code: int, signal: int | None, reason: str, words: str
) -> None:
    w = benchmarking()
    forged = summary().model_copy(update={"verdict": "Passed"})
    w.finish_job(forged, exit_code=exit_code, signal=signal, reason=reason)
    reasons = rejected_as_error(w)
    assert words in reasons[0]
    assert any("verdict Passed is disregarded" in r for r in reasons)


def test_deadline_exceeded_is_an_error_even_with_a_clean_exit_and_summary() -> None:
    w = benchmarking()
    w.finish_job(summary(), exit_code=0, failed_reason="DeadlineExceeded")
    assert "hit its deadline" in rejected_as_error(w)[0]


def test_exit_0_with_a_failed_summary_is_an_error() -> None:
    w = benchmarking()
    w.finish_job(summary().model_copy(update={"verdict": "Failed"}), exit_code=0)
    assert "does not match the summary's verdict Failed" in rejected_as_error(w)[0]


def test_exit_1_with_a_passed_summary_is_an_error() -> None:
    w = benchmarking()
    w.finish_job(summary().model_copy(update={"verdict": "Passed"}), exit_code=1)
    assert "exit code 1 does not match the summary's verdict Passed" in rejected_as_error(w)[0]


def test_summary_without_identity_is_an_error() -> None:
    w = benchmarking()
    w.finish_job(summary(), identity=None)
    assert "carries no run identity" in rejected_as_error(w)[0]


@pytest.mark.parametrize("field", ["job", "revision", "attempt"])
def test_summary_naming_another_run_is_an_error(field: str) -> None:
    w = benchmarking()
    job = w.job()["metadata"]
    own = {
        "job": job["name"],
        "revision": job["labels"]["vllm-operator.dev/revision"],
        "attempt": 1,
    }
    other = {"job": "beta-gate-0123456789-1", "revision": "0123456789", "attempt": 2}
    identity = RunIdentity.model_validate({**own, field: other[field]})
    w.finish_job(summary(), identity=identity)
    assert "names another run" in rejected_as_error(w)[0]


def test_pod_that_only_copies_the_job_labels_is_not_the_jobs() -> None:
    w = benchmarking()
    job = w.job()
    w.finish_job(summary())
    pod = w.objects[("Pod", f"{job['metadata']['name']}-pod")]
    pod["metadata"]["ownerReferences"] = [
        {"kind": "Job", "uid": "someone-else", "controller": True}
    ]
    assert "pod of Job" in rejected_as_error(w)[0]


def test_pod_gone_is_an_error() -> None:
    w = benchmarking()
    job = w.job()
    w.finish_job(summary())
    del w.objects[("Pod", f"{job['metadata']['name']}-pod")]
    assert "is gone" in rejected_as_error(w)[0]


def test_the_stricter_of_the_two_verdicts_stands() -> None:
    # The bench said Failed (exit 1), the operator's limits would pass: Failed.
    w = benchmarking()
    failed = summary().model_copy(update={"verdict": "Failed", "reasons": ["bench: p99 too slow"]})
    w.finish_job(failed, exit_code=1)
    w.settle()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Failed"
    assert "the benchmark's own verdict Failed is stricter (bench: p99 too slow)" in gate["reasons"]
    # The bench said Passed (exit 0), the operator's limits fail it (6/13 < 12): Failed.
    w = benchmarking()
    w.finish_job(summary(passed=6), exit_code=0)
    w.settle()
    assert w.status["lastGate"]["outcome"] == "Failed"
    assert w.serving() is None


def test_strictness_order() -> None:
    assert stricter("Passed", "Inconclusive") == "Inconclusive"
    assert stricter("Inconclusive", "Failed") == "Failed"
    assert stricter("Error", "Failed") == "Failed"
    assert stricter("Passed", "Passed") == "Passed"


def test_only_the_bench_containers_own_summary_is_read() -> None:
    """Another container of the Job pod (where code under test may run) cannot speak for it."""
    w = benchmarking()
    job = w.job()
    w.finish_job(summary(passed=6), exit_code=1)
    pod = w.objects[("Pod", f"{job['metadata']['name']}-pod")]
    (bench,) = pod["status"]["containerStatuses"]
    honest = parse_summary(bench["state"]["terminated"]["message"])
    assert honest is not None
    forged = json.loads(bench["state"]["terminated"]["message"])
    forged["quality"]["passed"] = 13
    forged["quality"]["failed"] = []
    forged["verdict"] = "Failed"  # what the exit code asks for; the figures would pass
    sandbox = {
        "name": "sandbox",
        "state": {"terminated": {"exitCode": 1, "message": json.dumps(forged)}},
    }
    pod["status"]["containerStatuses"] = [sandbox, bench]
    w.settle()
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Failed"
    # The figures judged (as the verdict was made; status keeps none of a rejected
    # revision's) are the bench container's.
    (judged,) = [v for p in w.plans for v in p.verdicts]
    assert judged.summary is not None
    assert judged.summary.quality is not None
    assert judged.summary.quality.passed == 6
    assert figures.digest_of(judged.summary) == figures.digest_of(honest)


@pytest.mark.parametrize(
    ("forge", "words"),
    [
        (
            lambda doc: doc["concurrency"].append(doc["concurrency"][0]),
            "the figures contradict each other: concurrency lists 1 more than once",
        ),
        (
            lambda doc: doc["quality"].update(passed=doc["quality"]["total"] + 1, failed=[]),
            "the figures contradict each other: quality: passed 14 is above total 13",
        ),
    ],
)
def test_a_summary_whose_figures_contradict_each_other_is_an_error_naming_it(
    forge: Any, words: str
) -> None:
    """Issue 31: a summary the last-wins reading would pass is refused, and the reason says
    which figures disagree."""
    w = benchmarking()
    w.finish_job(summary(), exit_code=0)
    pods = [o for (kind, _), o in w.objects.items() if kind == "Pod" and "bench" in str(o)]
    terminated = pods[-1]["status"]["containerStatuses"][0]["state"]["terminated"]
    doc = json.loads(terminated["message"])
    forge(doc)
    terminated["message"] = json.dumps(doc)
    reasons = rejected_as_error(w)
    assert any("left no summary" in r and words in r for r in reasons), reasons
