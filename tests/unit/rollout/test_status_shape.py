"""The status a person reads (issue 34): the newest verdict in full once, the rest one line.

``kubectl describe`` prints every field of status, sorted, after the spec. So the figures
are one line of JSON each (not a tree of ~100 lines per copy), the history keeps one line
per verdict, ``lastGate`` keeps the newest verdict's every reason and placement across later
passes, and the ``vllm-operator.dev/verdict`` annotation (printed before the spec) names
what decided. What status no longer shows in full stays reachable: the figures as JSON,
each reason in ``lastGate`` and in the verdict's Event.
"""

from __future__ import annotations

import json

import yaml
from rollout_world import World, spec, summary
from test_rollout_twin import V17_FAST, _twin_started, deployed

from vllm_operator.api.status import VLLMDeploymentStatus, figures_digest
from vllm_operator.api.summary import BenchSummary
from vllm_operator.render import labels

V17_EAGER_AGAIN = spec(image="vllm/vllm-openai:v0.17.0", mode="balanced", gate=V17_FAST["gate"])


def _rejected() -> tuple[World, str, str]:
    """A candidate measured beside a twin of the stable revision and rejected on latency."""
    w = deployed()
    stable, cand = _twin_started(w)
    w.ready_all()
    w.step()
    slow = summary(median_ms=1400, tokens=900)  # latency fails, throughput does not
    w.finish_job(slow, baseline=summary(median_ms=886, tokens=900), exit_code=1)
    w.settle()
    return w, stable, cand


def test_last_gate_keeps_the_newest_verdict_in_full_over_later_passes() -> None:
    w, stable, cand = _rejected()
    for _ in range(3):  # passes after the one that recorded it read it back from status
        w.step()
    gate = w.status["lastGate"]
    assert gate["revision"] == cand
    assert gate["outcome"] == "Failed"
    assert gate["deciding"] >= 1
    assert len(gate["reasons"]) > gate["deciding"]  # the deciding ones and the others
    assert gate["headline"].startswith(gate["reasons"][0].split(":")[0])  # deciding first
    assert gate["baselineMode"] == "twin"
    assert gate["baselineReason"]
    assert gate["candidatePlacement"]["vllmVersion"] == "0.17.0"
    assert gate["baselinePlacement"]["vllmVersion"] == "0.16.0"
    assert "summary" not in gate
    # history[0] is the same verdict in one line, without its figures (a rejected
    # revision's figures are in its Job's log and report, not in status), and without what
    # says nothing more (issue 42): decision (derived), decidedBy "gate" (absent = the gate).
    newest = w.status["history"][0]
    assert newest["verdict"] == gate["headline"]
    for key in ("revision", "outcome", "attempt", "finishedAt"):
        assert newest[key] == gate[key], key
    for gone in ("headline", "deciding", "candidatePlacement", "baselineReason", "baselineMode"):
        assert gone not in newest, gone
    for gone in ("reasons", "decision", "decidedBy"):
        assert gone not in newest, gone
    assert "summary" not in newest
    assert "figuresDigest" not in newest
    # The stable revision's figures (the stored baseline) are one line of JSON on its
    # Deployment, under the digest status keeps.
    assert "benchmark" not in w.status["stable"]
    text = w.deployment(stable)["metadata"]["annotations"][labels.FIGURES_ANNOTATION]
    assert w.status["stable"]["figuresDigest"] == figures_digest(text)
    stored = BenchSummary.model_validate_json(text)
    assert stored.latency[1].median_ms == 4600
    assert w.serving() == stable


def test_the_verdict_annotation_names_what_decided_and_follows_the_newest_verdict() -> None:
    w, stable, cand = _rejected()
    annotations = w.body["metadata"]["annotations"]
    gate = w.status["lastGate"]
    note = annotations[labels.VERDICT_ANNOTATION].split("\n")
    # Issue 42: which revision serves, which was rejected and by what, then what decided,
    # each line short enough that `kubectl describe` prints it whole (it cuts at 138).
    assert note[0] == (
        f"stable revision {stable} serves (2/2 Ready); revision {cand} rejected by its gate "
        "(Failed):"
    )
    assert all(line.startswith("  ") for line in note[1:])
    assert " ".join(line.strip() for line in note[1:]).startswith(gate["headline"][:200])
    assert max(len(line) for line in note) <= 130
    before = len(w.plans)
    w.settle()  # written once: a pass that would write the same text writes nothing
    assert all(not p.annotations for p in w.plans[before:])
    # A new revision passes: the annotation and lastGate move to it, the rejection stays
    # in the history as one line.
    w.set_spec(V17_EAGER_AGAIN)
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary(median_ms=880, tokens=900), baseline=summary(median_ms=886, tokens=900))
    w.step()
    w.ready_all()
    w.settle()
    newest = w.status["lastGate"]
    assert newest["outcome"] == "Passed"
    assert newest["revision"] not in (stable, cand)
    note = annotations[labels.VERDICT_ANNOTATION].split("\n")
    assert note[0] == (
        f"stable revision {newest['revision']} serves (2/2 Ready); revision "
        f"{newest['revision']} promoted by its gate (Passed):"
    )
    assert " ".join(line.strip() for line in note[1:]) == newest["headline"]
    rejected = w.status["history"][1]
    assert (rejected["revision"], rejected["outcome"]) == (cand, "Failed")
    assert rejected["verdict"] == gate["headline"]


def test_the_status_of_a_rejection_and_a_promotion_stays_short_in_yaml() -> None:
    """What `kubectl describe` prints of status is about its YAML lines: before issue 34 a
    status like this one took over 700 (the figures as trees, four times)."""
    w, _stable, _cand = _rejected()
    status = VLLMDeploymentStatus.model_validate(w.status)
    lines = yaml.safe_dump(status.to_wire(), width=100_000).count("\n")  # no folding
    assert lines < 100, lines
    longest = max(len(json.dumps(v)) for v in w.status["lastGate"]["reasons"])
    assert longest < 1024
