"""A revision's figures live on its Deployment, status keeps their digest (issue 42, item 2).

What must hold while they move (``rollout/figures.py``): an operator stopped between the
status write and the annotation's patch loses nothing; a status written before the move (the
figures in it, no annotation) keeps its stored baseline and moves it; figures a person
planted on a Deployment are not believed; figures too big for an annotation stay in status.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rollout_world import World, spec, summary
from test_rollout_twin import GATE, V16_EAGER

from vllm_operator.api.status import StoredFiguresAdapter, figures_digest, figures_text
from vllm_operator.api.summary import BenchSummary
from vllm_operator.render import labels
from vllm_operator.rollout import Patch, Plan, figures
from vllm_operator.rollout.results import parse_summary

STORED = spec(image="vllm/vllm-openai:v0.17.0", gate={**GATE, "baseline": {"mode": "stored"}})


def _is_figures_patch(action: object) -> bool:
    return isinstance(action, Patch) and labels.FIGURES_ANNOTATION in json.dumps(action.patch)


def _without_figures_patch(p: Plan) -> Plan:
    """The plan as far as a shell got that wrote status and then stopped (the patch of the
    figures annotation never made)."""
    kept = tuple(a for a in p.actions if not _is_figures_patch(a))
    return dataclasses.replace(p, actions=kept)


def _serving(first: BenchSummary) -> tuple[World, str]:
    w = World(V16_EAGER)
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(first)
    w.step()
    w.ready_all()
    w.settle()
    stable = w.serving()
    assert stable is not None
    return w, stable


def _stored_baseline_sent(w: World) -> BenchSummary | None:
    """Start a gate in stored mode; the stored baseline its Job was given, if any."""
    w.set_spec(STORED)
    w.step()
    w.ready_all()
    w.step()
    sent = w.arg("--baseline-json")
    return BenchSummary.model_validate_json(sent) if sent is not None else None


def _annotation(w: World, revision: str) -> str | None:
    dep = w.deployment(revision)
    assert dep is not None
    found = dep["metadata"].get("annotations", {}).get(labels.FIGURES_ANNOTATION)
    return found if isinstance(found, str) else None


def test_a_stop_before_the_annotation_keeps_the_figures_in_status_until_it_is_written() -> None:
    w = World(V16_EAGER)
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary(median_ms=4600, tokens=200))
    judged = w.plan()
    assert any(_is_figures_patch(a) for a in judged.actions)
    w.apply(_without_figures_patch(judged))  # status written, then the operator stopped
    (revision,) = w.revisions()
    assert _annotation(w, revision) is None
    kept = w.status["history"][0]
    assert kept["outcome"] == "Passed"
    assert BenchSummary.model_validate_json(kept["summary"]).latency[1].median_ms == 4600
    # The next operator finds them in status, writes the annotation, then drops them.
    w.step()
    text = _annotation(w, revision)
    assert text is not None
    assert w.status["history"][0]["figuresDigest"] == figures_digest(text)
    w.ready_all()
    w.settle()
    assert w.serving() == revision
    assert "summary" not in w.status["history"][0]
    assert "benchmark" not in w.status["stable"]
    assert w.status["stable"]["figuresDigest"] == figures_digest(text)
    sent = _stored_baseline_sent(w)
    assert sent is not None
    assert sent.latency[1].median_ms == 4600


def test_a_status_written_before_the_move_keeps_its_baseline_and_moves_it() -> None:
    w, stable = _serving(summary(median_ms=4600, tokens=200))
    text = _annotation(w, stable)
    assert text is not None
    # What an operator before this change left: the figures in status, no annotation and
    # no digests anywhere.
    dep = w.deployment(stable)
    assert dep is not None
    del dep["metadata"]["annotations"][labels.FIGURES_ANNOTATION]
    old = w.body["status"]
    old["stable"] = {k: v for k, v in old["stable"].items() if k != "figuresDigest"}
    old["stable"]["benchmark"] = text
    old["history"] = [{k: v for k, v in e.items() if k != "figuresDigest"} for e in old["history"]]
    old.pop("lastGate", None)
    p = w.step()
    assert any(_is_figures_patch(a) for a in p.actions)
    assert _annotation(w, stable) == text
    w.step()
    assert "benchmark" not in w.status["stable"]
    assert w.status["stable"]["figuresDigest"] == figures_digest(text)
    sent = _stored_baseline_sent(w)
    assert sent is not None
    assert sent.latency[1].median_ms == 4600


def test_figures_planted_on_the_deployment_are_not_believed() -> None:
    w, stable = _serving(summary(median_ms=4600, tokens=200))
    dep = w.deployment(stable)
    assert dep is not None
    # Someone who may edit Deployments (not the resource's status) makes the baseline slow,
    # so that any candidate would look fast beside it.
    planted = summary(median_ms=90_000, tokens=1)
    dep["metadata"]["annotations"][labels.FIGURES_ANNOTATION] = figures_text(planted)
    sent = _stored_baseline_sent(w)
    assert sent is None  # no stored figures: absolute limits only, never the planted ones
    reason = w.job()["metadata"]["annotations"][labels.BASELINE_REASON_ANNOTATION]
    assert "do not match the digest in status" in reason, reason
    assert "absolute limits only" in reason


def test_figures_too_big_for_an_annotation_stay_in_status(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(figures, "MAX_BYTES", 100)
    w, stable = _serving(summary(median_ms=4600, tokens=200))
    assert _annotation(w, stable) is None
    stored = BenchSummary.model_validate_json(w.status["stable"]["benchmark"])
    assert stored.latency[1].median_ms == 4600
    sent = _stored_baseline_sent(w)
    assert sent is not None
    assert sent.latency[1].median_ms == 4600


def test_a_rejected_revision_leaves_no_figures_in_status() -> None:
    w, stable = _serving(summary(median_ms=4600, tokens=200))
    w.set_spec(STORED)
    w.step()
    w.ready_all()
    w.step()
    w.finish_job(summary(passed=6), exit_code=1)
    w.settle()
    newest = w.status["history"][0]
    assert newest["outcome"] == "Failed"
    # Its figures are in its Job's log and report page; status keeps one line of it.
    assert "summary" not in newest
    assert "figuresDigest" not in newest
    assert all("summary" not in e for e in w.status["history"])
    assert [e.get("figuresDigest") is not None for e in w.status["history"]] == [False, True]
    assert w.revisions() == [stable]


def test_real_summaries_read_back_to_the_same_text() -> None:
    """The digest is of the text: figures read back from a Deployment must write the same
    text again, or every pass would patch it anew (the real H100/H200 summaries)."""
    root = Path(__file__).resolve().parents[3] / "docs" / "calibration"
    found = sorted(root.glob("*/summary-*.json"))
    assert len(found) >= 20
    for path in found:
        summary = parse_summary(path.read_text())
        assert summary is not None, path
        text = figures_text(summary)
        assert len(text) < figures.MAX_BYTES
        again = figures_text(StoredFiguresAdapter.validate_python(text))
        assert again == text, path
