"""Two verdicts on one revision are two things with two names (issue 42).

In the demo's step 4 the same revision printed "verdict ... PASSED" (its gate) and 30 s later
"verdict ... FAILED" (its canary), and the FAILED list included a check that passed ("TTFT p50
within +100% and +50 ms of stable"). Now the canary's record says which reason decided
(``deciding``), the record says which judge spoke (``GateRecord.judge``), the demo prints
"gate verdict" and "canary verdict" and lists only what decided, and the verdict annotation
that ``kubectl describe`` prints first names the serving revision, the rejected one, its
judge and the deciding figure, in lines describe prints whole.
"""

from __future__ import annotations

import re

from test_rollout_canary import at_canary, until_step_started

from vllm_operator.api.status import GateRecord
from vllm_operator.render import labels
from vllm_operator_demo.demo_story import verdict_lines, verdict_name


def canary_failure() -> tuple[GateRecord, dict[str, str], str, str]:
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    pods.serve(candidate, 150, error_share=0.2)
    pods.serve(stable, 150)
    w.advance(600)
    w.step()
    gate = GateRecord.model_validate(w.status["lastGate"])
    return gate, w.body["metadata"]["annotations"], stable, candidate


def test_a_canary_failure_names_its_judge_and_only_its_deciding_reason() -> None:
    gate, _, _, candidate = canary_failure()
    assert gate.revision == candidate
    assert gate.deciding == 1
    assert len(gate.reasons) > 1  # the other figures are kept in the record
    assert gate.judge() == "canary"
    assert verdict_name(gate) == "canary verdict"
    lines = verdict_lines(gate)
    assert lines[0] == f"    - {gate.reasons[0]}"
    assert lines[0].startswith(
        "    - canary step 1/2 (10% asked, 33.3% in effect) failed: error share"
    )
    assert not any(reason in line for reason in gate.reasons[1:] for line in lines)
    assert lines[1:] == [
        f"    ({len(gate.reasons) - 1} other figure(s) and note(s) did not decide it: see the "
        "report)"
    ]


def test_the_gate_and_a_person_are_named_apart_from_the_canary() -> None:
    passed = GateRecord(
        revision="abc", outcome="Passed", reasons=["warm-up did not settle"], summary="{}"
    )
    assert (passed.judge(), verdict_name(passed)) == ("gate", "gate verdict")
    assert verdict_lines(passed) == ["    note: warm-up did not settle"]
    person = GateRecord(revision="abc", outcome="Failed", reasons=["aborted"], decided_by="person")
    assert (person.judge(), verdict_name(person)) == ("person", "verdict")


def test_the_annotation_leads_with_who_serves_what_was_rejected_and_why() -> None:
    _, annotations, stable, candidate = canary_failure()
    note = annotations[labels.VERDICT_ANNOTATION].split("\n")
    assert note[0].startswith(f"stable revision {stable} serves (")
    assert note[0].endswith(f"; revision {candidate} rejected by its canary (Failed):")
    assert note[1].startswith("  canary step 1/2 (10% asked, 33.3% in effect) failed: error share")
    why = " ".join(line.strip() for line in note[1:])
    assert "TTFT" not in why  # the canary's checks that passed decided nothing
    assert re.search(r"\(\+\d+ more\)$", why), why
    assert max(len(line) for line in note) <= 138  # describe prints each whole
