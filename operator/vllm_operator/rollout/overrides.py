"""Requests people make with annotations: force a promotion, abort, re-run the gate.

``vllm-operator.dev/promote=<revision>`` records a Passed verdict decided by a person,
``vllm-operator.dev/abort=<revision>`` a Failed one, ``vllm-operator.dev/rerun-gate=<token>``
makes older verdicts on the spec's revision stop counting. Each value is carried out once:
the operator records it in its ``vllm-operator.dev/handled`` annotation, so leaving an
annotation in place (GitOps keeps re-applying it) does not repeat it, and a restarted
operator does not either. A request naming another revision is refused with an Event.
"""

from __future__ import annotations

from vllm_operator.api.reasons import EventReason
from vllm_operator.api.status import GateRecord
from vllm_operator.render.labels import ABORT_ANNOTATION, PROMOTE_ANNOTATION, RERUN_ANNOTATION
from vllm_operator.rollout import ledger
from vllm_operator.rollout.canary import in_canary
from vllm_operator.rollout.context import Pass

PERSON_PROMOTE = f"promoted by a person (annotation {PROMOTE_ANNOTATION})"
PERSON_ABORT = f"aborted by a person (annotation {ABORT_ANNOTATION})"


def handle_requests(state: Pass, desired: str, stable: str | None) -> None:
    """Carry out new promote / abort / rerun-gate annotations, each exactly once."""
    requests = ledger.parse_requests(state.observed.annotations)
    handled = state.handled
    rerun = handled.rerun
    if requests.rerun is not None and (rerun is None or rerun.token != requests.rerun):
        if desired == stable:
            state.event(
                "Normal", EventReason.RequestIgnored, f"rerun-gate: revision {desired} serves"
            )
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
        rerun = ledger.Rerun(requests.rerun, desired, ledger.timestamp(state.now), min_attempt)
        handled = ledger.Handled(handled.promote, handled.abort, rerun)
    state.handled = handled
    decided = state.decision(desired)
    if requests.promote is not None and requests.promote != handled.promote:
        if requests.promote == desired and desired != stable:
            # During a canary the gate's Passed is on record: a person's promotion ends it.
            live = in_canary(state.observed, desired)
            if decided is None or decided.outcome != "Passed" or live:
                state.record(
                    GateRecord(
                        revision=desired,
                        outcome="Passed",
                        reasons=[PERSON_PROMOTE],
                        baseline_revision=stable,
                        decided_by="person",
                    )
                )
                state.event(
                    "Warning", EventReason.ForcedPromotion, f"revision {desired}: {PERSON_PROMOTE}"
                )
        else:
            state.event(
                "Warning",
                EventReason.RequestIgnored,
                f"promote={requests.promote} does not name the candidate revision "
                f"({desired if desired != stable else 'none: ' + desired + ' serves'})",
            )
        handled = ledger.Handled(requests.promote, handled.abort, handled.rerun)
    decided = state.decision(desired)
    if requests.abort is not None and requests.abort != handled.abort:
        if requests.abort == desired and desired != stable:
            if decided is None or not ledger.is_rejection(decided, "hold"):
                state.record(
                    GateRecord(
                        revision=desired,
                        outcome="Failed",
                        reasons=[PERSON_ABORT],
                        baseline_revision=stable,
                        decided_by="person",
                    )
                )
                state.event("Warning", EventReason.Aborted, f"revision {desired}: {PERSON_ABORT}")
        else:
            state.event(
                "Warning",
                EventReason.RequestIgnored,
                f"abort={requests.abort} does not name the candidate revision; the serving "
                "revision is never aborted",
            )
        handled = ledger.Handled(handled.promote, requests.abort, handled.rerun)
    if handled != state.handled or handled != ledger.parse_handled(state.observed.annotations):
        state.handled_changed = True
    state.handled = handled
