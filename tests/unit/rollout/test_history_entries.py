"""``status.history`` keeps what the operator reads back and one line for people (issue 42).

Each verdict took about 8 lines of ``kubectl describe``: decision (derived from outcome),
``decidedBy: gate`` on nearly every entry, a ``Reasons:`` list of one line. An entry now
holds revision, outcome, attempt, finishedAt, the digest of its figures, ``decidedBy`` only
for a person or the deadline, and ``verdict``, one line. A rejected revision must stay
rejected with nothing else left (a restarted operator reads only the cluster), and a status
written before this change must be read the same.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_status_shape import _rejected

from vllm_operator.api import HistoryEntry, VLLMDeploymentStatus

KEPT = {"revision", "outcome", "decidedBy", "attempt", "finishedAt", "figuresDigest", "summary"}


def _older_shape(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as an operator before issue 42 stored it (a whole one-line GateRecord)."""
    old = {k: v for k, v in entry.items() if k != "verdict"}
    old.update(decidedBy="gate", decision=entry["outcome"], reasons=[entry["verdict"]])
    return old


def test_an_entry_keeps_what_the_operator_reads_and_one_line() -> None:
    w, stable, cand = _rejected()
    history = w.status["history"]
    assert [h["revision"] for h in history] == [cand, stable]
    for entry in history:
        assert set(entry) <= KEPT | {"verdict"}, entry
        assert entry["verdict"], entry
        assert "decidedBy" not in entry  # the gate decided both
    assert history[0]["outcome"] == "Failed"
    assert history[0]["verdict"] == w.status["lastGate"]["headline"]


@pytest.mark.parametrize("older", [False, True], ids=["as written", "written before issue 42"])
def test_a_rejected_revision_stays_rejected_from_its_entry_alone(older: bool) -> None:
    """A restarted operator that finds only the history (no lastGate) keeps the rejected
    revision out: no candidate, no benchmark Job, the stable one serves."""
    w, stable, cand = _rejected()
    assert cand not in w.revisions()
    status = {k: v for k, v in w.status.items() if k != "lastGate"}
    if older:
        status["history"] = [_older_shape(h) for h in status["history"]]
    w.body["status"] = status
    plans = len(w.plans)
    w.settle()
    w.ready_all()
    w.settle()
    assert cand not in w.revisions()
    assert w.kinds("Job") == []
    assert w.serving() == stable
    assert w.status["phase"] == "Degraded"
    assert "CandidateCreated" not in [e.reason for p in w.plans[plans:] for e in p.events]
    # The status written again is in the new shape, the verdict line unchanged.
    assert w.status["history"][0]["verdict"] == status["history"][0].get(
        "verdict", status["history"][0].get("reasons", [""])[0]
    )
    assert "reasons" not in w.status["history"][0]


def test_a_person_or_the_deadline_is_named_and_an_entry_reads_back_as_a_record() -> None:
    wire = {"revision": "r", "outcome": "Passed", "decidedBy": "person", "verdict": "promoted"}
    entry = HistoryEntry.model_validate(wire)
    record = entry.record()
    assert (record.decided_by, record.decision, record.reasons) == (
        "person",
        "PromotedByPerson",
        ["promoted"],
    )
    assert HistoryEntry.of(record).to_wire() == wire
    gate = HistoryEntry.model_validate({"revision": "r", "outcome": "Failed", "decidedBy": "gate"})
    assert gate.decided_by is None
    assert gate.record().decided_by == "gate"
    status = VLLMDeploymentStatus.model_validate({"history": [wire]})
    assert status.last_gate is not None
    assert status.last_gate.decision == "PromotedByPerson"
