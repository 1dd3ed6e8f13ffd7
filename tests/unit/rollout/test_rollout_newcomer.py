"""What a person meets when the gate cannot decide, and how much status `describe` prints.

Holding must not be a dead end: the status message, the Stalled condition (what `kubectl
describe` shows) and the Event say what decides it, as exact commands; after a person
promotes, the GATE column (``lastGate.decision``) and GatePassed say a person did. The
verdict history in status is bounded: the newest verdicts keep their figures, older ones one
line, the whole within a byte cap, and a rejected revision stays rejected all the same.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from rollout_world import World, paired, spec, summary

from builders import resource
from vllm_operator.api.resource import parse_vllm_deployment
from vllm_operator.api.status import (
    HISTORY_BYTES,
    HISTORY_FULL,
    HISTORY_LIMIT,
    GateRecord,
    VLLMDeploymentStatus,
)
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import labels
from vllm_operator.render.revision import revision_hash
from vllm_operator.rollout import advice, ledger


def _held_world(**rollout: Any) -> World:
    w = World(
        spec(
            rollout={"onInconclusive": "hold", **rollout},
            gate={"thresholds": {"latencyMs": {"medium": 2000}}},
        )
    )
    w.step()
    w.ready_all()
    w.step()
    thin = summary()
    thin = thin.model_copy(
        update={"latency": [x.model_copy(update={"requests": 1}) for x in thin.latency]}
    )
    w.finish_job(thin)
    w.settle()
    assert w.status["phase"] == "Holding", w.status
    return w


def test_holding_says_what_decides_it_with_the_exact_commands() -> None:
    w = _held_world()
    rev = w.revisions()[0]
    promote = f"kubectl -n ml annotate vllmd qwen vllm-operator.dev/promote={rev} --overwrite"
    abort = f"kubectl -n ml annotate vllmd qwen vllm-operator.dev/abort={rev} --overwrite"
    rerun = "kubectl -n ml annotate vllmd qwen vllm-operator.dev/rerun-gate=$(date +%s)"
    for text in (w.status["message"], w.condition("Stalled")["message"]):
        assert promote in text, text
        assert abort in text, text
        assert rerun in text, text
        assert "set spec.gate.trials to 6 (now 3" in text, text
        patch = 'kubectl -n ml patch vllmd qwen --type merge -p \'{"spec":{"gate":{"trials":6}}}\''
        assert patch in text, text
        assert "spec.rollout.onInconclusive decide without a person (now hold)" in text, text
    holding = [e.message for p in w.plans for e in p.events if e.reason == "GateHolding"]
    assert len(holding) == 1, holding
    assert promote in holding[0], holding
    assert abort in holding[0], holding


def test_more_trials_roll_no_new_revision() -> None:
    """The advice to raise gate.trials is safe: the pods stay as they are."""
    docs = [resource(spec(gate={"trials": n})) for n in (3, 6)]
    three, six = (parse_vllm_deployment(d) for d in docs)
    assert revision_hash(three.spec, plan_launch(three.spec)) == revision_hash(
        six.spec, plan_launch(six.spec)
    )


def test_a_person_promoting_shows_in_the_gate_column_and_condition() -> None:
    w = _held_world()
    rev = w.revisions()[0]
    assert w.status["lastGate"]["decision"] == "Inconclusive"
    w.annotate(labels.PROMOTE_ANNOTATION, rev)
    w.settle()
    w.ready_all()
    w.settle()
    assert w.serving() == rev
    assert w.status["lastGate"]["decision"] == "PromotedByPerson"
    gate = w.condition("GatePassed")
    assert gate["status"] == "True"
    assert gate["reason"] == "PromotedByPerson"
    assert "promoted by a person" in gate["message"]


def _big_record(i: int, outcome: str = "Failed") -> GateRecord:
    figures = paired(summary(median_ms=900.0 + i), summary())
    return GateRecord(
        revision=f"{i:010d}",
        outcome=outcome,  # type: ignore[arg-type]
        reasons=[f"reason {n} of verdict {i}: " + "x" * 300 for n in range(8)],
        summary=figures,
        attempt=1,
        finished_at=f"2026-01-01T12:{i:02d}:00.000000Z",
    )


def test_history_keeps_figures_of_the_newest_only_and_stays_under_its_cap() -> None:
    records = [_big_record(i) for i in range(HISTORY_LIMIT + 5)]
    kept = ledger.bounded(records)
    assert len(kept) == HISTORY_LIMIT
    assert [r.revision for r in kept] == [r.revision for r in records[:HISTORY_LIMIT]]
    assert all(r.summary is not None for r in kept[:HISTORY_FULL])
    for old in kept[HISTORY_FULL:]:
        assert old.summary is None
        assert len(old.reasons) == 1
        assert old.reasons[0].endswith("(+7 more)")
        assert old.outcome == "Failed"
        assert old.attempt == 1
    size = len(json.dumps([r.to_wire() for r in kept], separators=(",", ":")))
    assert size <= HISTORY_BYTES
    # A revision rejected long ago stays rejected once its figures are gone.
    oldest = kept[-1].revision
    decided = ledger.decision(kept, oldest, None)
    assert decided is not None
    assert decided.outcome == "Failed"


def test_describe_of_a_long_history_stays_short() -> None:
    """About what `kubectl describe` prints of status: its YAML lines (1,275 unbounded)."""
    status = VLLMDeploymentStatus(history=ledger.bounded([_big_record(i) for i in range(20)]))
    lines = yaml.safe_dump(status.to_wire()).count("\n")
    assert lines < 400, lines
    # lastGate repeats history[0] without its figures.
    assert status.last_gate is not None
    assert status.last_gate.summary is None


def test_history_over_the_byte_cap_loses_figures_oldest_first() -> None:
    huge = [
        r.model_copy(update={"reasons": ["y" * 6000 for _ in range(3)]})
        for r in (_big_record(i) for i in range(HISTORY_FULL))
    ]
    kept = ledger.bounded(huge)
    assert len(json.dumps([r.to_wire() for r in kept], separators=(",", ":"))) <= HISTORY_BYTES
    assert kept[0].revision == huge[0].revision


def test_the_demo_can_show_one_choice_per_line() -> None:
    w = _held_world()
    why, choices = advice.split_holding(w.status["message"])
    assert why.startswith("gate inconclusive on revision")
    assert why.endswith("held for a person.")
    assert [c.split(":")[0] for c in choices] == [
        "promote it",
        "reject it",
        "measure again with more trials",
        "or let spec.rollout.onInconclusive decide without a person (now hold)",
    ]
    assert advice.split_holding("revision x serves") == ("revision x serves", [])


def test_a_running_benchmark_reports_where_it_is() -> None:
    """Status message and a BenchmarkProgress Event follow the newest progress event, one
    Event per stage (the first look's trials, each further trial), and the pass asks to be
    run again to read it."""
    w = World(spec())
    w.step()
    w.ready_all()
    w.step()
    job = w.job()["metadata"]["name"]
    w.progress[job] = {
        "event": "request",
        "phase": "latency",
        "class": "long",
        "index": 0,
        "trial": 2,
    }
    p = w.step()
    assert w.status["message"].endswith("; now: latency, long prompts #1, trial 2 of 10")
    assert [e.message for e in p.events if e.reason == "BenchmarkProgress"] == [
        f"revision {w.revisions()[0]}: latency, long prompts #1, trial 2 of 10"
    ]
    assert p.requeue_after is not None
    assert p.requeue_after <= 30
    again = w.step()  # nothing new read: no second Event
    assert not [e for e in again.events if e.reason == "BenchmarkProgress"]
    w.progress[job] = {"event": "concurrency", "level": 4, "trial": 3}  # the same look
    same = w.step()
    assert w.status["message"].endswith("; now: concurrency, 4 streams, trial 3 of 10")
    assert not [e for e in same.events if e.reason == "BenchmarkProgress"]
    w.progress[job] = {"event": "settle", "level": 8, "trial": 4}  # a kind added later
    later = w.step()
    assert [
        e.message.split(": ", 1)[1] for e in later.events if e.reason == "BenchmarkProgress"
    ] == ["settle, 8 streams, trial 4 of 10"]
