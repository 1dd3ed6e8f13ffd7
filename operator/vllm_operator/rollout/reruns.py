"""Re-running a gate: a person's request, or ``rollout.onInconclusive: rerun``.

An Inconclusive verdict under ``rerun`` does not decide the revision while reruns remain: a
new benchmark Job attempt runs, and only after ``maxReruns`` Inconclusive attempts in a row
does the candidate hold for a person. Like every decision, this is read from the verdict
history in status (``ledger.inconclusive_streak``), so a restart neither repeats nor skips
an attempt; each verdict records the attempt it judged, which is how the superseded Job is
told from the new one.
"""

from __future__ import annotations

from vllm_operator.api.reasons import EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.status import GateRecord
from vllm_operator.rollout import advice, ledger
from vllm_operator.rollout.context import Pass


def rerun_due(state: Pass, vd: VLLMDeployment, candidate: str, decided: GateRecord) -> bool:
    """An Inconclusive gate verdict that ``onInconclusive: rerun`` still re-runs."""
    if vd.spec.rollout.on_inconclusive != "rerun" or decided.outcome != "Inconclusive":
        return False
    if decided.decided_by != "gate":
        return False
    streak = ledger.inconclusive_streak(state.history, candidate, state.handled.rerun)
    return streak <= vd.spec.rollout.max_reruns


def gate_pending(state: Pass, vd: VLLMDeployment, candidate: str) -> bool:
    """Whether ``candidate`` still awaits a verdict (none yet, or an automatic re-run)."""
    decided = state.decision(candidate)
    return decided is None or rerun_due(state, vd, candidate, decided)


def attempt_floor(state: Pass, candidate: str) -> int:
    """The lowest Job attempt that can still be judged: after a person's re-run request,
    and after an Inconclusive attempt that an automatic re-run supersedes."""
    rerun = state.handled.rerun
    floor = rerun.min_attempt if rerun is not None and rerun.revision == candidate else 1
    decided = state.decision(candidate)
    if decided is not None and decided.outcome == "Inconclusive" and decided.attempt:
        floor = max(floor, decided.attempt + 1)
    return floor


def announce(state: Pass, vd: VLLMDeployment, candidate: str, attempt: int) -> None:
    """Say what ``onInconclusive: rerun`` does with the Inconclusive verdict just recorded."""
    limit = vd.spec.rollout.max_reruns
    streak = ledger.inconclusive_streak(state.history, candidate, state.handled.rerun)
    if streak <= limit:
        state.event(
            "Normal",
            EventReason.GateRerun,
            f"revision {candidate}: gate inconclusive on attempt {attempt}; running attempt "
            f"{attempt + 1} (rerun {streak} of {limit}, rollout.onInconclusive: rerun)",
        )
    else:
        state.event(
            "Warning",
            EventReason.GateHolding,
            f"revision {candidate}: gate still inconclusive after {limit} rerun(s); held for "
            "a person; " + "; ".join(advice.holding_advice(vd, candidate)),
        )
