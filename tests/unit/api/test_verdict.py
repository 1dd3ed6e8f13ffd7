"""One verdict type: what the gate returns, the bench reports and status records.

``GateRecord`` is a ``Verdict`` on one revision (so any code judging a verdict takes either),
a summary's flat ``verdict``/``reasons`` read back as a ``Verdict``, and ``lastGate`` is
always the verdict of ``history[0]`` (in full where history keeps one line, without the
figures, which stay in history): it cannot name another verdict than the history. ``decision``
(the GATE column) is derived from outcome and decidedBy.
"""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.status import GateRecord, VLLMDeploymentStatus
from vllm_operator.api.summary import STRICTEST_FIRST, BenchSummary, Verdict, VerdictOutcome
from vllm_operator.gate import verdict as gate_verdict


def _record(revision: str, outcome: VerdictOutcome) -> GateRecord:
    return GateRecord(revision=revision, outcome=outcome, reasons=[f"{revision} {outcome}"])


def test_a_recorded_verdict_is_a_verdict_with_the_same_wire_fields() -> None:
    record = _record("abc", "Failed")
    assert isinstance(record, Verdict)
    wire = record.to_wire()
    assert wire == {
        "revision": "abc",
        "outcome": "Failed",
        "reasons": ["abc Failed"],
        "decidedBy": "gate",
        "decision": "Failed",
    }
    plain = Verdict.model_validate({k: wire[k] for k in ("outcome", "reasons")})
    assert plain == Verdict(outcome="Failed", reasons=["abc Failed"])


def test_the_gate_returns_the_verdict_type() -> None:
    judged = gate_verdict(BenchSummary(), Thresholds(), None)
    assert type(judged) is Verdict
    assert judged.outcome in STRICTEST_FIRST


def test_last_gate_is_always_the_newest_history_entry() -> None:
    newest, older = _record("new", "Passed"), _record("old", "Failed")
    status = VLLMDeploymentStatus(history=[newest, older], last_gate=older)
    assert status.last_gate == newest
    wire = status.to_wire()
    entry = wire["history"][0]  # type: ignore[index]
    assert entry == {"revision": "new", "outcome": "Passed", "verdict": "new Passed"}
    # Read back from the wire with a stale lastGate (an older writer): history wins.
    stale = {**wire, "lastGate": older.to_wire()}
    assert VLLMDeploymentStatus.model_validate(stale).last_gate == newest


def test_last_gate_leaves_the_figures_to_history() -> None:
    measured = _record("new", "Passed").model_copy(update={"summary": BenchSummary(model="m")})
    status = VLLMDeploymentStatus(history=[measured])
    assert status.history[0].summary is not None
    assert status.last_gate is not None
    assert status.last_gate.summary is None
    assert status.last_gate.revision == "new"


def test_decision_names_who_decided() -> None:
    def decision(outcome: VerdictOutcome, by: str) -> str | None:
        wire = {"revision": "r", "outcome": outcome, "decidedBy": by, "decision": "Passed"}
        return GateRecord.model_validate(wire).decision

    assert decision("Passed", "gate") == "Passed"
    assert decision("Inconclusive", "gate") == "Inconclusive"
    assert decision("Passed", "person") == "PromotedByPerson"
    assert decision("Failed", "person") == "AbortedByPerson"
    assert decision("Failed", "deadline") == "ProgressDeadlineExceeded"
    # A writer cannot set it apart from outcome and decidedBy.
    assert GateRecord(revision="r", outcome="Failed", decided_by="person").decision == (
        "AbortedByPerson"
    )


def test_no_history_means_no_last_gate() -> None:
    status = VLLMDeploymentStatus.model_validate({"lastGate": _record("x", "Passed").to_wire()})
    assert status.last_gate is None
    assert "lastGate" not in status.to_wire()


def test_a_summary_carries_the_bench_verdict_flat_and_reads_it_back() -> None:
    summary = BenchSummary(verdict="Inconclusive", reasons=["too few samples"])
    assert summary.to_wire()["verdict"] == "Inconclusive"  # the termination-message format
    assert summary.own_verdict == Verdict(outcome="Inconclusive", reasons=["too few samples"])
    ungated = BenchSummary(reasons=["measured only"])
    assert ungated.own_verdict is None


def test_last_gate_in_full_is_kept_beside_its_one_line_history_entry() -> None:
    full = _record("new", "Failed").model_copy(
        update={"reasons": ["a: beyond", "b: within"], "deciding": 1, "finished_at": "t1"}
    )
    line = full.model_copy(update={"reasons": ["a: beyond (+1 more)"], "deciding": None})
    status = VLLMDeploymentStatus(history=[line], last_gate=full)
    assert status.last_gate == full
    wire = status.to_wire()
    assert VLLMDeploymentStatus.model_validate(wire).last_gate == full  # read back
    # Another verdict (an older attempt, a newer one) is not kept: history[0] is.
    for other in ({"attempt": 2}, {"finished_at": "t0"}, {"outcome": "Error"}):
        stale = full.model_copy(update=other)
        assert VLLMDeploymentStatus(history=[line], last_gate=stale).last_gate == line


def test_figures_are_one_line_of_json_in_status_and_read_in_either_shape() -> None:
    figures = BenchSummary(model="m")
    record = _record("new", "Passed").model_copy(update={"summary": figures})
    wire = record.to_wire()
    assert isinstance(wire["summary"], str)
    assert "\n" not in wire["summary"]
    assert GateRecord.model_validate(wire).summary == figures
    as_object = {**wire, "summary": json.loads(str(wire["summary"]))}  # an older writer's
    assert GateRecord.model_validate(as_object).summary == figures
    with pytest.raises(ValidationError, match="figures are not JSON"):
        GateRecord.model_validate({**wire, "summary": "{not json"})
