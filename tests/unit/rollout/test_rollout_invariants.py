"""Invariants of the planner under random sequences of cluster events and user changes.

Whatever happens (specs changing mid-flight, verdicts, time passing, people annotating),
the serving Service never selects a revision without Ready pods, the Deployment it selects
is never deleted, and planning is pure (same inputs, same plan).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rollout_world import World, spec, summary

from vllm_operator.rollout import Delete
from vllm_operator.rollout.ledger import ABORT_ANNOTATION, PROMOTE_ANNOTATION, RERUN_ANNOTATION

SPECS = [
    spec(image="vllm/vllm-openai:v0.16.0", mode="eager"),
    spec(image="vllm/vllm-openai:v0.17.0", mode="throughput"),
    spec(image="vllm/vllm-openai:v0.17.0", mode="balanced", replicas=3),
]

MOVES = st.one_of(
    st.just(("ready",)),
    st.tuples(st.just("partial"), st.integers(0, 2)),
    st.tuples(st.just("finish"), st.booleans()),
    st.tuples(st.just("spec"), st.integers(0, len(SPECS) - 1)),
    st.tuples(st.just("time"), st.sampled_from([1.0, 120.0, 4000.0])),
    st.tuples(st.just("promote"), st.booleans()),
    st.tuples(st.just("abort"), st.booleans()),
    st.tuples(st.just("rerun"), st.integers(0, 3)),
)


def _candidate(w: World) -> str | None:
    cand = (w.status.get("candidate") or {}).get("revision")
    return str(cand) if cand else None


def _play(w: World, move: tuple[Any, ...]) -> None:
    kind = move[0]
    if kind == "ready":
        w.ready_all()
    elif kind == "partial":
        cand = _candidate(w)
        if cand and w.deployment(cand):
            w.ready(cand, move[1])
    elif kind == "finish":
        jobs = w.kinds("Job")
        if len(jobs) == 1 and not w.job().get("status"):
            w.finish_job(summary(passed=13 if move[1] else 5), exit_code=0 if move[1] else 1)
    elif kind == "spec":
        w.set_spec(SPECS[move[1]])
    elif kind == "time":
        w.advance(move[1])
    elif kind in ("promote", "abort"):
        cand = _candidate(w)
        key = PROMOTE_ANNOTATION if kind == "promote" else ABORT_ANNOTATION
        if cand and move[1]:
            w.annotate(key, cand)
    elif kind == "rerun":
        w.annotate(RERUN_ANNOTATION, f"token-{move[1]}")


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(st.integers(0, len(SPECS) - 1), st.lists(MOVES, min_size=1, max_size=25))
def test_serving_service_and_stable_revision_are_safe(first: int, moves: list[Any]) -> None:
    w = World(
        {
            **SPECS[first],
            "gate": {"thresholds": {"quality": {"minPassed": 12}}},
        }
    )
    for move in moves:
        _play(w, move)
        first_plan = w.plan()
        assert first_plan == w.plan()  # pure
        serving = w.serving()
        for action in first_plan.actions:
            if isinstance(action, Delete) and action.kind == "Deployment" and serving:
                assert action.name != f"qwen--{serving}", "deleted the serving revision"
        w.apply(first_plan)
        for revision, ready in w.selector_changes:
            assert ready >= 1, f"Service switched to {revision} with no Ready pod"
    # The rollout always comes to rest: no pass keeps changing things forever.
    w.ready_all()
    for _ in range(3):
        if w.kinds("Job") and not w.job().get("status"):
            w.finish_job(summary())
        w.settle(limit=15)
        w.ready_all()
