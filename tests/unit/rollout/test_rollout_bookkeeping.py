"""The operator's bookkeeping annotations are checked when read back (issue 20).

Anyone who may edit a VLLMDeployment may edit the operator's ``handled`` record, and anyone
who may edit Jobs their ``attempt``: a hand-written ``minAttempt`` of 1000 named a Job past
63 characters, and the API refused it on every pass. A bad value counts as absent, with one
Event; the record is rewritten, so the Event is not repeated.
"""

from __future__ import annotations

import json

import pytest
from rollout_world import World, spec, summary

from vllm_operator.api.resource import MAX_OBJECT_NAME
from vllm_operator.render import labels
from vllm_operator.rollout import ledger
from vllm_operator.rollout.views import job_view

GOOD_RERUN = {"token": "t", "revision": "abc", "at": "2026-01-01T00:00:00.000000Z"}


def _handled(doc: object) -> tuple[ledger.Handled, list[str]]:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    return ledger.check_handled({labels.HANDLED_ANNOTATION: text})


def test_a_good_record_reads_back_as_written() -> None:
    handled = ledger.Handled("r1", None, ledger.Rerun("t", "abc", GOOD_RERUN["at"], 3))
    assert ledger.check_handled({labels.HANDLED_ANNOTATION: handled.to_annotation()}) == (
        handled,
        [],
    )
    assert ledger.check_handled({}) == (ledger.Handled(), [])


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"rerun": {**GOOD_RERUN, "minAttempt": 1000}}, "minAttempt (1 to 999)"),
        ({"rerun": {**GOOD_RERUN, "minAttempt": 0}}, "minAttempt"),
        ({"rerun": {**GOOD_RERUN, "minAttempt": True}}, "minAttempt"),
        ({"rerun": {**GOOD_RERUN, "at": "yesterday"}}, "RFC 3339"),
        ({"rerun": {**GOOD_RERUN, "at": "2026-01-01T00:00:00"}}, "RFC 3339"),
        ({"rerun": {"token": "t"}}, "rerun needs"),
        ({"rerun": "x"}, "rerun needs"),
        ({"promote": 7}, "promote is not a string"),
        ({"abort": "x" * 300}, "abort is not a string"),
        ("[1, 2]", "not a JSON object"),
        ("{", "not a JSON object"),
        ('{"promote": "' + "x" * 5000 + '"}', "not a JSON object of at most 4096"),
    ],
)
def test_each_bad_part_is_named_and_counts_as_absent(doc: object, needle: str) -> None:
    handled, problems = _handled(doc)
    assert any(needle in p for p in problems), problems
    if isinstance(doc, dict) and "rerun" in doc:
        assert handled.rerun is None


def test_a_job_attempt_outside_what_a_name_holds_falls_back_to_the_name() -> None:
    def job(attempt: str) -> dict[str, object]:
        return {
            "metadata": {
                "name": "qwen--gate-abc-2",
                "labels": {"vllm-operator.dev/revision": "abc"},
                "annotations": {
                    "vllm-operator.dev/attempt": attempt,
                    "vllm-operator.dev/baseline-mode": "sideways",
                },
            }
        }

    for bad in ("1000", "0", "-1", "2e3", "x", " 3"):
        view = job_view(job(bad))
        assert view is not None
        assert view.attempt == 2, bad
    view = job_view(job("3"))
    assert view is not None
    assert view.attempt == 3
    assert view.baseline_mode is None  # neither twin nor stored


def test_a_hand_written_min_attempt_of_1000_names_no_overlong_job_and_warns_once() -> None:
    w = World(spec(image="vllm/vllm-openai:v0.17.0", mode="throughput"))
    w.step()
    w.ready_all()
    revision = w.revisions()[0]
    damaged = {"rerun": {**GOOD_RERUN, "revision": revision, "minAttempt": 1000}}
    w.annotate(labels.HANDLED_ANNOTATION, json.dumps(damaged))
    w.step()
    w.step()
    name = w.job()["metadata"]["name"]
    assert name.endswith("-1")
    assert len(name) <= MAX_OBJECT_NAME
    assert w.events().count("AnnotationIgnored") == 1
    rewritten = json.loads(w.body["metadata"]["annotations"][labels.HANDLED_ANNOTATION])
    assert "rerun" not in rewritten
    w.finish_job(summary(median_ms=900, tokens=700))
    w.step()
    w.ready_all()
    w.settle()
    assert w.status["phase"] == "Serving"
    assert w.events().count("AnnotationIgnored") == 1
    assert "ApplyFailed" not in w.events()
