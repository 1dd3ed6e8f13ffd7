"""Requests people make with annotations: force a promotion, abort, re-run the gate.

``vllm-operator.dev/promote=<revision>`` records a Passed verdict decided by a person,
``vllm-operator.dev/abort=<revision>`` a Failed one, ``vllm-operator.dev/rerun-gate=<token>``
makes older verdicts on the spec's revision stop counting. Each value is carried out once:
the operator records it in its ``vllm-operator.dev/handled`` annotation, so leaving an
annotation in place (GitOps keeps re-applying it) does not repeat it, and a restarted
operator does not either. A request naming another revision is refused with an Event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from vllm_operator.api.reasons import EventReason
from vllm_operator.api.status import GateRecord
from vllm_operator.render.labels import ABORT_ANNOTATION, PROMOTE_ANNOTATION, RERUN_ANNOTATION
from vllm_operator.rollout import ledger
from vllm_operator.rollout.canary.phase import in_canary
from vllm_operator.rollout.context import Pass

PERSON_PROMOTE = f"promoted by a person (annotation {PROMOTE_ANNOTATION})"
PERSON_ABORT = f"aborted by a person (annotation {ABORT_ANNOTATION})"


@dataclass(frozen=True)
class _Verdict:
    """A request that records a person's verdict on the candidate: promote or abort."""

    key: str  # the annotation's short name, as the refusal Event writes it
    outcome: Literal["Passed", "Failed"]
    why: str
    event: EventReason
    # True when the decision on record already says what the person asks for (given the
    # pass as well: whether it does can depend on what is observed, e.g. a live canary).
    settled: Callable[[Pass, GateRecord], bool]


_PROMOTE = _Verdict(
    "promote",
    "Passed",
    PERSON_PROMOTE,
    EventReason.ForcedPromotion,
    # During a canary the gate's Passed is on record: a person's promotion ends the canary.
    lambda state, d: d.outcome == "Passed" and not in_canary(state.observed, d.revision),
)
_ABORT = _Verdict(
    "abort",
    "Failed",
    PERSON_ABORT,
    EventReason.Aborted,
    lambda _state, d: ledger.is_rejection(d, "hold"),
)


def handle_requests(state: Pass, desired: str, stable: str | None) -> None:
    """Carry out new promote / abort / rerun-gate annotations, each exactly once."""
    requests = ledger.parse_requests(state.observed.annotations)
    state.handled = handled = _rerun(state, requests.rerun, desired, stable)
    serves = "none: " + desired + " serves" if desired == stable else desired
    promote = _carry_out(
        state,
        _PROMOTE,
        requests.promote,
        handled.promote,
        desired=desired,
        stable=stable,
        refusal=f" ({serves})",
    )
    handled = ledger.Handled(promote, handled.abort, handled.rerun)
    abort = _carry_out(
        state,
        _ABORT,
        requests.abort,
        handled.abort,
        desired=desired,
        stable=stable,
        refusal="; the serving revision is never aborted",
    )
    handled = ledger.Handled(handled.promote, abort, handled.rerun)
    if handled != state.handled or handled != ledger.parse_handled(state.observed.annotations):
        state.handled_changed = True
    state.handled = handled


def _rerun(state: Pass, token: str | None, desired: str, stable: str | None) -> ledger.Handled:
    """The handled record once a new rerun-gate token is carried out (unchanged if none)."""
    handled = state.handled
    rerun = handled.rerun
    if token is None or (rerun is not None and rerun.token == token):
        return handled
    if desired == stable:
        state.event("Normal", EventReason.RequestIgnored, f"rerun-gate: revision {desired} serves")
        min_attempt = rerun.min_attempt if rerun is not None else 1
    else:
        attempts = [j.attempt for j in state.observed.jobs if j.revision == desired]
        min_attempt = max([ledger.verdicts_on(state.history, desired), *attempts]) + 1
        state.event(
            "Normal",
            EventReason.GateRerun,
            f"re-running the gate on revision {desired} (attempt {min_attempt}), "
            f"requested by annotation {RERUN_ANNOTATION}",
        )
    rerun = ledger.Rerun(token, desired, ledger.timestamp(state.now), min_attempt)
    return ledger.Handled(handled.promote, handled.abort, rerun)


def _carry_out(
    state: Pass,
    request: _Verdict,
    asked: str | None,
    done: str | None,
    *,
    desired: str,
    stable: str | None,
    refusal: str,
) -> str | None:
    """Record the person's verdict once (refused with an Event unless ``asked`` names the
    candidate); the request's handled value afterwards."""
    if asked is None or asked == done:
        return done
    if asked == desired and desired != stable:
        decided = state.decision(desired)
        if decided is None or not request.settled(state, decided):
            entry = GateRecord(
                revision=desired,
                outcome=request.outcome,
                reasons=[request.why],
                baseline_revision=stable,
                decided_by="person",
            )
            state.decide(entry, request.event)
    else:
        state.event(
            "Warning",
            EventReason.RequestIgnored,
            f"{request.key}={asked} does not name the candidate revision{refusal}",
        )
    return asked
